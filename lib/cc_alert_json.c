/*
 * cc_alert_json.c — an alert event in text: the names of its enums and the JSON object of
 * proto/alert.schema.json (the Kafka payload and the element of GET /v1/alerts).
 */
#include "cc_anomaly.h"

#include <errno.h>

#include "cc_json.h"

const char *cc_alert_kind_name(enum CcAlertKind k)
{
    return k == CC_ALERT_DATA_QUALITY ? "data_quality" : "anomaly";
}

const char *cc_alert_state_name(enum CcAlertState s)
{
    return s == CC_ALERT_RESOLVED ? "resolved" : "firing";
}

const char *cc_alert_severity_name(enum CcAlertSeverity s)
{
    return s == CC_SEV_CRITICAL ? "critical" : "warning";
}

const char *cc_dq_reason_name(enum CcDqReason r)
{
    switch (r) {
    case CC_DQ_STUCK: return "stuck";
    case CC_DQ_ALL_ZERO: return "all_zero";
    case CC_DQ_BOUNDS: return "bounds";
    case CC_DQ_MISSING: return "missing";
    default: return "none";
    }
}

const char *cc_anomaly_rule_name(int rule)
{
    switch (rule) {
    case CC_RULE_Z: return "z";
    case CC_RULE_CUSUM: return "cusum";
    case CC_RULE_PROFILE: return "profile";
    case CC_RULE_WINDOW: return "window";
    case CC_RULE_LIKELIHOOD: return "likelihood";
    case CC_RULE_NOVELTY: return "novelty";
    default: return "?";
    }
}

static void json_kpi(CcJsonBuf *j, const CcHparams *hp, int f)
{
    if (f < 0)
        cc_json_printf(j, "null");
    else if (hp && f < hp->n_features)
        cc_json_str(j, hp->features[f]);
    else
        cc_json_printf(j, "\"kpi%d\"", f);
}

/* One attribution entry; cusum, profile and novelty only when those rules made the KPI over. */
static void json_attr(CcJsonBuf *j, const CcHparams *hp, const CcAlertAttr *a)
{
    cc_json_printf(j, "{\"kpi\":");
    json_kpi(j, hp, a->kpi);
    cc_json_printf(j, ",\"observed\":");
    cc_json_num(j, a->observed);
    cc_json_printf(j, ",\"expected\":");
    cc_json_num(j, a->expected);
    cc_json_printf(j, ",\"lo\":");
    cc_json_num(j, a->lo);
    cc_json_printf(j, ",\"hi\":");
    cc_json_num(j, a->hi);
    cc_json_printf(j, ",\"z\":");
    cc_json_num(j, a->z);
    if (a->cusum != 0) {
        cc_json_printf(j, ",\"cusum\":");
        cc_json_num(j, a->cusum);
    }
    if (a->profile != 0) {
        cc_json_printf(j, ",\"profile\":");
        cc_json_num(j, a->profile);
        cc_json_printf(j, ",\"profile_expected\":");
        cc_json_num(j, a->profile_expected);
    }
    if (a->novelty == CC_NOVEL_VALUE || a->novelty == CC_NOVEL_SHAPE)
        cc_json_printf(j, ",\"novelty\":\"%s\"", a->novelty == CC_NOVEL_VALUE ? "value" : "shape");
    cc_json_printf(j, "}");
}

int cc_alert_event_json(const CcAlertEvent *ev, const CcHparams *hp, char *buf, size_t cap)
{
    CcJsonBuf j = cc_json_buf(buf, cap);
    cc_json_printf(&j, "{\"schema\":\"cellcast.alert/1\",\"id\":");
    cc_json_str(&j, ev->id);
    cc_json_printf(&j,
                   ",\"state\":\"%s\",\"kind\":\"%s\",\"reason\":\"%s\",\"severity\":\"%s\","
                   "\"cell_id\":",
                   cc_alert_state_name(ev->state), cc_alert_kind_name(ev->kind),
                   cc_dq_reason_name(ev->reason), cc_alert_severity_name(ev->severity));
    cc_json_str(&j, ev->cell_id ? ev->cell_id : "");
    cc_json_printf(&j, ",\"kpi\":");
    json_kpi(&j, hp, ev->kpi);
    cc_json_printf(&j,
                   ",\"start_step\":%lld,\"step\":%lld,\"start_time\":", (long long)ev->start_step,
                   (long long)ev->step);
    cc_json_time(&j, ev->start_ts);
    cc_json_printf(&j, ",\"time\":");
    cc_json_time(&j, ev->ts);
    cc_json_printf(&j, ",\"score\":");
    cc_json_num(&j, ev->score);
    cc_json_printf(&j, ",\"attribution\":[");
    for (int i = 0; i < ev->n_attr && i < CC_ALERT_MAX_ATTR; i++) {
        if (i)
            cc_json_printf(&j, ",");
        json_attr(&j, hp, &ev->attr[i]);
    }
    cc_json_printf(&j, "]}");
    if (!buf || !cc_json_fits(&j))
        return -ENOSPC;
    return (int)j.len;
}

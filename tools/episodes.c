/* episodes.c — each anomaly episode against its triggering deviation plus the hysteresis
 * (see episodes.h). */
#include <string.h>

#include "cc_time.h"
#include "episodes.h"

/* a before b in the worst list: larger excess, then longer */
static int worse(const CctEpisode *a, const CctEpisode *b)
{
    return a->excess > b->excess || (a->excess == b->excess && a->length > b->length);
}

static int same_episode(const CctEpisode *a, const CctEpisode *b)
{
    return a->onset_ts == b->onset_ts && a->length == b->length && a->kpi == b->kpi &&
           !strcmp(a->cell, b->cell);
}

void cct_episodes_add(CctEpisodes *e, const CcAlertEvent *ev, int resolve_m)
{
    if (ev->kind != CC_ALERT_ANOMALY || ev->state != CC_ALERT_RESOLVED)
        return;
    const CcEpisodeTrace *t = &ev->trace;
    CctEpisode ep = {.onset_ts = ev->start_ts,
                     .length = ev->step - ev->start_step + 1,
                     .deviation = t->live_run};
    snprintf(ep.cell, sizeof ep.cell, "%s", ev->cell_id ? ev->cell_id : "");
    ep.excess = ep.length - (ep.deviation + resolve_m);
    if (ep.excess > 0) {
        ep.rules = t->hold_rules;
        ep.kpi = t->hold_kpi;
        ep.held = t->held;
        ep.unscored = t->unscored;
        e->exceed++;
        for (int b = 0; b < CC_RULES; b++)
            e->by_rule[b] += (t->hold_rules >> b) & 1;
    } else {
        ep.rules = t->fire_rules;
        ep.kpi = t->fire_kpi;
    }
    if (!e->n || ep.excess > e->max_excess)
        e->max_excess = ep.excess;
    e->n++;
    /* the trials of a run replay the same clean rows: an episode there recurs in every
     * trial, and the list names distinct episodes */
    for (int j = 0; j < e->n_worst; j++)
        if (same_episode(&ep, &e->worst[j]))
            return;
    int i = e->n_worst < CCT_EP_WORST ? e->n_worst++ : CCT_EP_WORST;
    if (i == CCT_EP_WORST && !worse(&ep, &e->worst[CCT_EP_WORST - 1]))
        return;
    if (i == CCT_EP_WORST)
        i--;
    for (; i > 0 && worse(&ep, &e->worst[i - 1]); i--)
        e->worst[i] = e->worst[i - 1];
    e->worst[i] = ep;
}

const char *cct_episode_rules(int rules, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
    for (int b = 0; b < CC_RULES; b++)
        if ((rules >> b) & 1 && n < cap)
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? "+" : "",
                                  cc_anomaly_rule_name(1 << b));
    if (!n)
        snprintf(buf, cap, "-");
    return buf;
}

static const char *kpi_name(const CcHparams *hp, int kpi)
{
    return kpi < 0 ? "-" : hp && kpi < hp->n_features ? hp->features[kpi] : "?";
}

void cct_episodes_print(const CctEpisodes *e, const CcHparams *hp, FILE *out)
{
    fprintf(out,
            "    %-18s %d resolved (%d open at the end), %d longer than deviation + "
            "hysteresis, largest excess %lld steps",
            "episodes", e->n, e->open, e->exceed, (long long)e->max_excess);
    for (int b = 0, first = 1; b < CC_RULES; b++)
        if (e->by_rule[b]) {
            fprintf(out, "%s%s %d", first ? "; held by " : ", ", cc_anomaly_rule_name(1 << b),
                    e->by_rule[b]);
            first = 0;
        }
    fputc('\n', out);
    for (int i = 0; i < e->n_worst; i++) {
        const CctEpisode *w = &e->worst[i];
        char rules[64], onset[CC_RFC3339_LEN];
        if (cc_time_format_rfc3339(w->onset_ts, onset, sizeof onset))
            snprintf(onset, sizeof onset, "?");
        fprintf(out,
                "      %s %s %s (%s) onset %s: length %lld, deviation %lld, excess %lld"
                " (held %d, unscored %d)\n",
                w->cell, kpi_name(hp, w->kpi), cct_episode_rules(w->rules, rules, sizeof rules),
                w->excess > 0 ? "held" : "raised", onset, (long long)w->length,
                (long long)w->deviation, (long long)w->excess, w->held, w->unscored);
    }
}

json_t *cct_episodes_json(const CctEpisodes *e, const CcHparams *hp)
{
    json_t *worst = json_array(), *held = json_object();
    json_t *o = worst && held
                    ? json_pack("{s:i, s:i, s:i, s:I, s:o, s:o}", "resolved", e->n, "exceed",
                                e->exceed, "open", e->open, "max_excess", (json_int_t)e->max_excess,
                                "held_by", held, "worst", worst)
                    : NULL;
    if (!o) {
        json_decref(worst);
        json_decref(held);
        return NULL;
    }
    for (int b = 0; b < CC_RULES; b++)
        if (e->by_rule[b])
            json_object_set_new(held, cc_anomaly_rule_name(1 << b), json_integer(e->by_rule[b]));
    for (int i = 0; i < e->n_worst; i++) {
        const CctEpisode *w = &e->worst[i];
        char rules[64], onset[CC_RFC3339_LEN];
        if (cc_time_format_rfc3339(w->onset_ts, onset, sizeof onset))
            onset[0] = 0;
        json_array_append_new(
            worst, json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:i, s:i}", "cell", w->cell,
                             "kpi", kpi_name(hp, w->kpi), "rules",
                             cct_episode_rules(w->rules, rules, sizeof rules), "onset", onset,
                             "length", (json_int_t)w->length, "deviation", (json_int_t)w->deviation,
                             "excess", (json_int_t)w->excess, "hysteresis",
                             (json_int_t)(w->length - w->deviation - w->excess), "held", w->held,
                             "unscored", w->unscored));
    }
    return o;
}

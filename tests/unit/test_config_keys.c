/* test_config_keys.c — the alerting, snapshot and admin keys of cellcastd's config table: every
 * deployment-wide alert setting of cc_anomaly_keys() is a key alerts.<name> whose default is the
 * library's default (so the commented conf/cellcast.yaml documents what the library does), per-KPI
 * overrides parse into alerts.kpis, the snapshot/admin defaults, admin.token is
 * redacted in the JSON view (GET /v1/config), and every incidents.* key of the grouping reaches
 * its settings (ccd_incident_settings_of_config: what cellcastd and the fleet benchmarks run
 * with). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "cc_anomaly.h"
#include "incidents.h"

static void test_alert_keys_match_library(void **state)
{
    (void)state;
    CcdConfig c;
    CcAnomalySettings lib;
    int n;
    const CcAnomalyKey *keys = cc_anomaly_keys(&n);
    assert_int_equal(ccd_config_init(&c), 0);
    cc_anomaly_default_settings(&lib);
    for (int i = 0; i < n; i++) {
        char name[128];
        snprintf(name, sizeof name, "alerts.%s", keys[i].name);
        const CcdConfigDef *d = ccd_config_find(name);
        if (!d)
            fail_msg("no config key %s", name);
        assert_true(d->reloadable);
        assert_int_equal(d->offset, offsetof(CcdConfig, alerts) + keys[i].offset);
        const char *cv = (const char *)&c.alerts + keys[i].offset;
        const char *lv = (const char *)&lib + keys[i].offset;
        switch (keys[i].type) {
        case CC_AKEY_INT:
            assert_int_equal(d->type, CCD_CFG_INT);
            assert_int_equal(*(const int *)cv, *(const int *)lv);
            break;
        case CC_AKEY_INT64:
            assert_int_equal(d->type, CCD_CFG_INT64);
            assert_int_equal(*(const int64_t *)cv, *(const int64_t *)lv);
            break;
        case CC_AKEY_DOUBLE:
            assert_int_equal(d->type, CCD_CFG_DOUBLE);
            if (*(const double *)cv != *(const double *)lv)
                fail_msg("%s: config default %.17g, library %.17g", name, *(const double *)cv,
                         *(const double *)lv);
            break;
        }
        assert_true(d->min == keys[i].lo && d->max == keys[i].hi);
    }
    ccd_config_free(&c);
}

static void test_ops_keys(void **state)
{
    (void)state;
    CcdConfig c;
    char err[512];
    static const char yaml[] =
        "alerts:\n  warn_z: 5\n  crit_z: 9.5\n  kpis:\n    prb.max: \"100\"\n"
        "    thr.direction: down\n"
        "snapshot:\n  path: /var/lib/cellcast/s.snap\n  interval_s: 30\n"
        "admin:\n  token: abc\n";
    assert_int_equal(ccd_config_init(&c), 0);
    assert_string_equal(c.snapshot_path, "auto");
    assert_int_equal(c.snapshot_interval_s, 60);
    assert_string_equal(c.admin_token, "");
    assert_int_equal(ccd_config_load_string(&c, yaml, strlen(yaml), "t.yaml", err, sizeof err), 0);
    assert_true(c.alerts.warn_z == 5 && c.alerts.crit_z == 9.5);
    assert_int_equal(c.alerts_kpis.n, 2);
    assert_string_equal(ccd_strmap_get(&c.alerts_kpis, "prb.max"), "100");
    assert_string_equal(c.snapshot_path, "/var/lib/cellcast/s.snap");
    assert_int_equal(c.snapshot_interval_s, 30);
    assert_int_equal(ccd_config_set(&c, "alerts.kpis.users.enabled=false", err, sizeof err), 0);
    assert_string_equal(ccd_strmap_get(&c.alerts_kpis, "users.enabled"), "false");
    /* out of bounds names the key */
    assert_int_not_equal(ccd_config_set(&c, "alerts.window_n=65", err, sizeof err), 0);
    assert_non_null(strstr(err, "alerts.window_n"));
    json_t *j = ccd_config_to_json(&c);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "admin"), "token")),
                        "(redacted)");
    json_decref(j);
    ccd_config_free(&c);
}

/* The settings a configuration gives, padding zeroed so that two can be compared whole. */
static void incident_settings(const CcdConfig *c, CcdIncidentSettings *s)
{
    memset(s, 0, sizeof *s);
    ccd_incident_settings_of_config(c, s);
}

/* Each incidents.* key set away from its default changes the grouping's settings: a key added
 * to the table but not to ccd_incident_settings_of_config would reach neither cellcastd's
 * grouping nor the benchmarks'. incidents.topic is the producer's, not the grouping's. */
static void test_incident_keys_reach_settings(void **state)
{
    (void)state;
    int n, seen = 0;
    const CcdConfigDef *defs = ccd_config_defs(&n);
    assert_non_null(defs);
    for (int i = 0; i < n; i++) {
        const CcdConfigDef *d = &defs[i];
        if (strncmp(d->name, "incidents.", 10) || !strcmp(d->name, "incidents.topic"))
            continue;
        CcdConfig c;
        CcdIncidentSettings before, after;
        char set[160], err[512];
        assert_int_equal(ccd_config_init(&c), 0);
        incident_settings(&c, &before);
        double def = atof(d->def);
        switch (d->type) {
        case CCD_CFG_INT:
        case CCD_CFG_INT64:
            snprintf(set, sizeof set, "%s=%.0f", d->name, def + 1 <= d->max ? def + 1 : d->min);
            break;
        case CCD_CFG_DOUBLE:
            snprintf(set, sizeof set, "%s=%.17g", d->name,
                     def < d->max ? (def + d->max) / 2 : d->min);
            break;
        case CCD_CFG_BOOL:
            snprintf(set, sizeof set, "%s=%s", d->name, strcmp(d->def, "true") ? "true" : "false");
            break;
        case CCD_CFG_ENUM: { /* the first value that is not the default */
            const char *e = d->enums;
            size_t len = strcspn(e, "|");
            if (!strncmp(e, d->def, len) && strlen(d->def) == len && e[len])
                e += len + 1, len = strcspn(e, "|");
            snprintf(set, sizeof set, "%s=%.*s", d->name, (int)len, e);
            break;
        }
        default: fail_msg("%s: a key of the grouping of a type this test does not set", d->name);
        }
        if (ccd_config_set(&c, set, err, sizeof err))
            fail_msg("%s: %s", set, err);
        incident_settings(&c, &after);
        if (!memcmp(&before, &after, sizeof before))
            fail_msg("%s does not reach CcdIncidentSettings", set);
        ccd_config_free(&c);
        seen++;
    }
    assert_true(seen >= 5); /* group_by, keep, evidence_cells, _share, _frac at least */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alert_keys_match_library),
        cmocka_unit_test(test_ops_keys),
        cmocka_unit_test(test_incident_keys_reach_settings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

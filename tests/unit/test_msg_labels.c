/* test_msg_labels.c — daemon/msg_labels (a cell's labels from fields of its KPI messages,
 * issue 32): values read from the elements of accepted records only; interned (one copy
 * per distinct value, the same pointer for every cell); a repeated value changes nothing;
 * "" clears, null and an absent field leave the label; too long, another type or a control
 * character refused and counted; a message naming no label field is not parsed; counts of
 * cells per value; and the topology's merge (the file's value wins, the messages' fill in). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cc_kpi.h"
#include "msg_labels.h"
#include "topology.h"

static const char *const KPI_NAMES[2] = {"prb", "thr"};

/* Decodes msg and reads its labels into m; returns the changes. */
static int feed(CcKpiDecoder *dec, CcdMsgLabels *m, const char *msg)
{
    CcKpiBatch kb;
    assert_int_equal(cc_kpi_decode(dec, msg, strlen(msg), &kb), 0);
    return ccd_msg_labels_read(m, msg, strlen(msg), &kb);
}

static void test_msg_labels(void **state)
{
    (void)state;
    CcKpiSettings ks;
    cc_kpi_default_settings(&ks);
    ks.n_features = 2;
    ks.step_seconds = 900;
    ks.feature_names = KPI_NAMES;
    CcKpiDecoder *dec;
    char err[256];
    assert_int_equal(cc_kpi_open(&dec, &ks, err, sizeof err), 0);
    const char *names[] = {"site", "region", "vendor"}, *fields[] = {"site_id", "reg", "vendor"};
    CcdMsgLabels *m;
    assert_int_equal(ccd_msg_labels_open(&m, names, fields, 0), -EINVAL);
    assert_int_equal(ccd_msg_labels_open(&m, names, fields, 3), 0);
    assert_true(ccd_msg_labels_same(m, names, fields, 3));

    /* two cells of one site; a refused record (no KPI) gives its cell nothing */
    assert_int_equal(feed(dec, m,
                          "[{\"cell\":\"a1\",\"ts\":0,\"prb\":1,\"site_id\":\"S-1\",\"reg\":7},"
                          " {\"cell\":\"a2\",\"ts\":0,\"prb\":1,\"site_id\":\"S-1\"},"
                          " {\"cell\":\"a3\",\"ts\":0,\"site_id\":\"S-1\"}]"),
                     3);
    assert_string_equal(ccd_msg_labels_get(m, "a1", "site"), "S-1");
    assert_string_equal(ccd_msg_labels_get(m, "a1", "region"), "7"); /* an integer's text */
    assert_null(ccd_msg_labels_get(m, "a2", "region"));
    assert_null(ccd_msg_labels_get(m, "a3", "site"));
    assert_ptr_equal(ccd_msg_labels_get(m, "a1", "site"), ccd_msg_labels_get(m, "a2", "site"));
    assert_int_equal(ccd_msg_labels_count(m, "site", "S-1"), 2);

    /* the same again: no change; null and absent leave it; "" clears; a move counts */
    assert_int_equal(feed(dec, m, "{\"cell\":\"a1\",\"ts\":900,\"prb\":2,\"site_id\":\"S-1\"}"), 0);
    assert_int_equal(feed(dec, m, "{\"cell\":\"a1\",\"ts\":1800,\"prb\":2,\"site_id\":null}"), 0);
    assert_string_equal(ccd_msg_labels_get(m, "a1", "site"), "S-1");
    assert_int_equal(feed(dec, m, "{\"cell\":\"a2\",\"ts\":900,\"prb\":2,\"site_id\":\"S-2\"}"), 1);
    assert_int_equal(ccd_msg_labels_count(m, "site", "S-1"), 1);
    assert_int_equal(ccd_msg_labels_count(m, "site", "S-2"), 1);
    assert_int_equal(feed(dec, m, "{\"cell\":\"a2\",\"ts\":1800,\"prb\":2,\"site_id\":\"\"}"), 1);
    assert_null(ccd_msg_labels_get(m, "a2", "site"));
    assert_int_equal(ccd_msg_labels_count(m, "site", "S-2"), 0);

    /* refused values: counted, the record's other labels still apply */
    char big[200];
    snprintf(big, sizeof big,
             "{\"cell\":\"a1\",\"ts\":2700,\"prb\":2,\"site_id\":\"%065d\",\"vendor\":\"acme\"}",
             0);
    assert_int_equal(feed(dec, m, big), 1);
    assert_string_equal(ccd_msg_labels_get(m, "a1", "site"), "S-1");
    assert_string_equal(ccd_msg_labels_get(m, "a1", "vendor"), "acme");
    assert_int_equal(feed(dec, m, "{\"cell\":\"a1\",\"ts\":3600,\"prb\":2,\"site_id\":[1]}"), 0);
    assert_int_equal(feed(dec, m, "{\"cell\":\"a1\",\"ts\":4500,\"prb\":2,\"site_id\":1.5}"), 0);
    assert_int_equal(
        feed(dec, m, "{\"cell\":\"a1\",\"ts\":5400,\"prb\":2,\"site_id\":\"a\\u0001\"}"), 0);
    assert_int_equal(feed(dec, m, "{\"cell\":\"a1\",\"ts\":6300,\"prb\":2}"), 0); /* no field */
    CcdMsgLabelStats st;
    ccd_msg_labels_stats(m, &st);
    assert_int_equal(st.too_long, 1);
    assert_int_equal(st.bad_value, 3);
    assert_int_equal(st.changes, 6);
    assert_int_equal(st.cells, 2);
    assert_int_equal(st.values, 4);   /* S-1, 7, S-2, acme */
    assert_int_equal(st.messages, 9); /* the last named no field: not parsed */
    assert_string_equal(ccd_msg_labels_get(m, "a1", "site"), "S-1");

    /* the topology's merge: the file lists a1 in site F-1 (it wins) and b1; a2 and vendor
     * come from the messages */
    static const char topo[] = "cell,site,region\na1,F-1,\nb1,F-1,R-9\n";
    CcdTopology *t;
    assert_int_equal(ccd_topology_parse(&t, topo, sizeof topo - 1, "t.csv", err, sizeof err), 0);
    assert_null(ccd_topology_label(t, "a2", "site"));
    ccd_topology_set_msg_labels(t, m); /* t owns it now */
    assert_ptr_equal(ccd_topology_msg_labels(t), m);
    assert_string_equal(ccd_topology_label(t, "a1", "site"), "F-1");    /* the file's */
    assert_string_equal(ccd_topology_label(t, "a1", "region"), "7");    /* the file's is empty */
    assert_string_equal(ccd_topology_label(t, "a1", "vendor"), "acme"); /* the messages' */
    assert_null(ccd_topology_label(t, "a2", "site"));                   /* cleared above */
    assert_int_equal(feed(dec, m, "{\"cell\":\"c1\",\"ts\":0,\"prb\":1,\"site_id\":\"M-1\"}"), 1);
    assert_string_equal(ccd_topology_label(t, "c1", "site"), "M-1"); /* a cell not in the file */
    assert_true(ccd_topology_has_label(t, "vendor"));
    assert_int_equal(ccd_topology_site_cells(t, "F-1"), 2); /* the file's count */
    assert_int_equal(ccd_topology_site_cells(t, "M-1"), 1); /* the messages' */
    /* a1's messages say S-1 but the file puts it in F-1: S-1 counts no cell */
    assert_int_equal(ccd_msg_labels_count(m, "site", "S-1"), 0);
    assert_int_equal(ccd_topology_site_cells(t, "S-1"), 0);
    char json[CCD_TOPO_LABELS_JSON_MAX];
    assert_true(ccd_topology_labels_json(t, "a1", json, sizeof json) > 0);
    assert_string_equal(json, "{\"site\":\"F-1\",\"region\":\"7\",\"vendor\":\"acme\"}");
    CcdTopoFilter f = {.site = "M-1"};
    assert_true(ccd_topology_filter_match(t, &f, "c1"));
    assert_false(ccd_topology_filter_match(t, &f, "a1"));
    ccd_topology_free(&t); /* and the store with it */
    cc_kpi_close(&dec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_msg_labels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

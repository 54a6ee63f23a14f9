/* cmd_synth.c — `cellcast synth`: synthetic multi-cell KPI history as long CSV
 * (`ts,cell_id,<kpis>`), from lib/cc_synth. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc_data.h"
#include "cc_synth.h"
#include "cli.h"

static int opt_start(const CcOpt *opt, const char *value, char *err, size_t errlen)
{
    double t;
    if (cc_data_parse_time(value, strlen(value), NULL, &t)) {
        snprintf(err, errlen, "cannot parse --start '%s'", value);
        return -EINVAL;
    }
    *(int64_t *)opt->target = (int64_t)floor(t);
    return 0;
}

int cmd_synth(int argc, char **argv)
{
    CcSynthSettings s;
    cc_synth_default_settings(&s);
    double days = 28;
    int64_t seed = (int64_t)s.seed;
    const char *out_path = NULL, *sites_path = NULL, *events_path = NULL;
    CcSynth *g = NULL;
    FILE *fp = NULL;
    char err[512];
    int ret = 1;
    CcOpt opts[] = {
        CC_OPTS_INT("cells", &s.n_cells, 1, 10000000, "N", "cells", .flags = CC_OPT_SHOW_DEFAULT),
        CC_OPTS_DBL("days", &days, 0, 0, "D", "days of history, may be fractional",
                    .flags = CC_OPT_SHOW_DEFAULT),
        CC_OPTS_INT64("step", &s.step_seconds, 0, 0, "S", "seconds per step",
                      .flags = CC_OPT_SHOW_DEFAULT),
        CC_OPTS_INT64("seed", &seed, 0, 0, "X", "random seed", .flags = CC_OPT_SHOW_DEFAULT),
        CC_OPTS_STR("features", &s.features, "LIST",
                    "comma-separated subset/order of\n" CC_SYNTH_FEATURES),
        CC_OPTS_CALL("start", opt_start, &s.start, "TIME",
                     "first step: unix seconds or ISO-8601 (default 2024-01-01)"),
        CC_OPTS_INT64("tz-offset", &s.tz_offset_s, 0, 0, "SEC",
                      "local time of the daily pattern vs UTC", .flags = CC_OPT_SHOW_DEFAULT),
        CC_OPTS_DBL("noise", &s.noise, 0, 0, "X", "relative load noise",
                    .flags = CC_OPT_SHOW_DEFAULT),
        CC_OPTS_DBL("burst-rate", &s.burst_rate, 0, 0, "X", "bursts per cell per day",
                    .flags = CC_OPT_SHOW_DEFAULT),
        CC_OPTS_DBL("outage-rate", &s.outage_rate, 0, 0, "X", "outages per cell per week",
                    .flags = CC_OPT_SHOW_DEFAULT),
        CC_OPTS_DBL("missing-rate", &s.missing_rate, 0, 0, "X", "probability a step is absent",
                    .flags = CC_OPT_SHOW_DEFAULT),
        CC_OPTS_DBL("gap-rate", &s.gap_rate, 0, 0, "X", "multi-step gaps per cell per week",
                    .flags = CC_OPT_SHOW_DEFAULT),
        CC_OPTS_STR("out", &out_path, "FILE", "output file (default stdout)"),
        CC_OPTS_STR("sites", &sites_path, "FILE",
                    "group the cells into sites of 3-6 cells and regions, with\n"
                    "site-wide events, and write the topology CSV to FILE\n"
                    "(cellcastd's topology.path)"),
        CC_OPTS_INT("sites-per-region", &s.sites_per_region, 1, 1000000, "N",
                    "sites of a region (with --sites)", .flags = CC_OPT_SHOW_DEFAULT),
        CC_OPTS_DBL("site-outage-rate", &s.site_outage_rate, 0, 0, "X",
                    "site-wide events per site per week (with --sites): half\n"
                    "power outages (every counter of the cells 0), half transport\n"
                    "losses (no cell of the site reports)",
                    .flags = CC_OPT_SHOW_DEFAULT),
        CC_OPTS_DBL("neighbour-shift", &s.neighbour_shift, 0, 100, "X",
                    "with --sites: during a site-wide event the next site of its\n"
                    "region carries its traffic, load x (1 + X (0.75..1.25)); 0 off",
                    .flags = CC_OPT_SHOW_DEFAULT),
        CC_OPTS_DBL("cell-event-rate", &s.cell_event_rate, 0, 0, "X",
                    "cell events per cell per week, 4-16 steps: half load spikes\n"
                    "(x2-3.5), half degradations (CQI 3-5 lower); 0 off",
                    .flags = CC_OPT_SHOW_DEFAULT),
        CC_OPTS_STR("events", &events_path, "FILE",
                    "write the injected events (ground truth) as CSV to FILE:\n"
                    "kind,scope,site,cells,start,end (see cc_synth.h)"),
    };
    const CcOptsSpec spec = {
        .prog = "cellcast synth",
        .usage = "cellcast synth [options]",
        .about = "Writes synthetic KPI history of many cells as long CSV: ts,cell_id,<kpis>\n"
                 "(ts in unix seconds; missing steps are absent rows, unreported values empty).",
        CC_OPTS_TABLE(opts),
    };
    int rc = cc_opts_parse(&spec, argc, argv, NULL);
    if (rc)
        return CLI_OPTS_EXIT(rc);
    s.seed = (uint64_t)seed;
    s.sites = sites_path != NULL;
    if (!(days > 0) || days > 36500) {
        fprintf(stderr, "cellcast synth: --days must be in (0, 36500]\n");
        return 2;
    }
    if (s.neighbour_shift > 0 && !sites_path) {
        fprintf(stderr, "cellcast synth: --neighbour-shift needs --sites\n");
        return 2;
    }
    if (cc_synth_open(&g, &s, err, sizeof err)) {
        fprintf(stderr, "cellcast synth: %s\n", err);
        return 2;
    }
    if (sites_path) {
        FILE *tf = fopen(sites_path, "w");
        int wrc = tf ? cc_synth_write_topology(g, tf) : -errno;
        if (tf && fclose(tf) && !wrc)
            wrc = -EIO;
        if (wrc) {
            fprintf(stderr, "cellcast synth: %s: %s\n", sites_path, strerror(-wrc));
            goto done;
        }
        fprintf(stderr, "cellcast synth: %d cells in %d sites → %s\n", s.n_cells,
                cc_synth_n_sites(g), sites_path);
    }
    int64_t n_steps = (int64_t)llround(days * 86400.0 / (double)s.step_seconds);
    if (n_steps < 1)
        n_steps = 1;
    if (events_path) {
        FILE *ef = fopen(events_path, "w");
        int wrc = ef ? cc_synth_write_events(g, ef, n_steps) : -errno;
        if (ef && fclose(ef) && !wrc)
            wrc = -EIO;
        if (wrc) {
            fprintf(stderr, "cellcast synth: %s: %s\n", events_path, strerror(-wrc));
            goto done;
        }
    }
    fp = out_path ? fopen(out_path, "w") : stdout;
    if (!fp) {
        fprintf(stderr, "cellcast synth: %s: %s\n", out_path, strerror(errno));
        goto done;
    }
    if (cc_synth_write_csv(g, fp, n_steps)) {
        fprintf(stderr, "cellcast synth: write error\n");
        goto done;
    }
    if (out_path) {
        if (fclose(fp)) {
            fp = NULL;
            fprintf(stderr, "cellcast synth: %s: %s\n", out_path, strerror(errno));
            goto done;
        }
        fp = NULL;
        fprintf(stderr, "cellcast synth: %d cells × %lld steps of %llds → %s\n", s.n_cells,
                (long long)n_steps, (long long)s.step_seconds, out_path);
    } else if (fflush(stdout)) {
        goto done;
    }
    ret = 0;
done:
    if (fp && fp != stdout)
        fclose(fp);
    cc_synth_close(&g);
    return ret;
}

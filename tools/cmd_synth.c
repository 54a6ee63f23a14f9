/* cmd_synth.c — `cellcast synth`: synthetic multi-cell KPI history as long CSV
 * (`ts,cell_id,<kpis>`), from lib/cc_synth. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc_data.h"
#include "cc_synth.h"
#include "cli.h"

static void synth_usage(FILE *out)
{
    CcSynthSettings d;
    cc_synth_default_settings(&d);
    fprintf(out,
            "usage: cellcast synth [options]\n"
            "Writes synthetic KPI history of many cells as long CSV: ts,cell_id,<kpis>\n"
            "(ts in unix seconds; missing steps are absent rows, unreported values empty).\n\n"
            "  --cells N          cells (default %d)\n"
            "  --days D           days of history (default 28; may be fractional)\n"
            "  --step S           seconds per step (default %lld)\n"
            "  --seed X           random seed (default %llu)\n"
            "  --features LIST    comma-separated subset/order of\n"
            "                     %s\n"
            "  --start TIME       first step: unix seconds or ISO-8601 (default 2024-01-01)\n"
            "  --tz-offset SEC    local time of the daily pattern vs UTC (default 0)\n"
            "  --noise X          relative load noise (default %.2f)\n"
            "  --burst-rate X     bursts per cell per day (default %.2f)\n"
            "  --outage-rate X    outages per cell per week (default %.2f)\n"
            "  --missing-rate X   probability a step is absent (default %.3f)\n"
            "  --gap-rate X       multi-step gaps per cell per week (default %.2f)\n"
            "  --out FILE         output file (default stdout)\n",
            d.n_cells, (long long)d.step_seconds, (unsigned long long)d.seed,
            CC_SYNTH_FEATURES, d.noise, d.burst_rate, d.outage_rate, d.missing_rate,
            d.gap_rate);
}

static int parse_double(const char *s, double *v)
{
    char *e;
    errno = 0;
    *v = strtod(s, &e);
    return (e == s || *e || errno || !isfinite(*v)) ? -1 : 0;
}

int cmd_synth(int argc, char **argv)
{
    enum { O_CELLS = 1, O_DAYS, O_STEP, O_SEED, O_FEATURES, O_START, O_TZ, O_NOISE, O_BURST,
           O_OUTAGE, O_MISSING, O_GAP, O_OUT, O_HELP };
    static const struct option opts[] = {
        {"cells", required_argument, 0, O_CELLS},
        {"days", required_argument, 0, O_DAYS},
        {"step", required_argument, 0, O_STEP},
        {"seed", required_argument, 0, O_SEED},
        {"features", required_argument, 0, O_FEATURES},
        {"start", required_argument, 0, O_START},
        {"tz-offset", required_argument, 0, O_TZ},
        {"noise", required_argument, 0, O_NOISE},
        {"burst-rate", required_argument, 0, O_BURST},
        {"outage-rate", required_argument, 0, O_OUTAGE},
        {"missing-rate", required_argument, 0, O_MISSING},
        {"gap-rate", required_argument, 0, O_GAP},
        {"out", required_argument, 0, O_OUT},
        {"help", no_argument, 0, O_HELP},
        {0, 0, 0, 0},
    };
    CcSynthSettings s;
    cc_synth_default_settings(&s);
    double days = 28, v;
    const char *out_path = NULL;
    CcSynth *g = NULL;
    FILE *fp = NULL;
    char err[512];
    int ret = 1, o;

    optind = 1;
    opterr = 1;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case O_CELLS:
        case O_STEP:
        case O_SEED:
        case O_TZ: {
            char *e;
            errno = 0;
            long long x = strtoll(optarg, &e, 10);
            if (e == optarg || *e || errno) {
                fprintf(stderr, "cellcast synth: bad integer '%s'\n", optarg);
                return 2;
            }
            if (o == O_CELLS) {
                if (x <= 0 || x > 10000000) {
                    fprintf(stderr, "cellcast synth: --cells must be 1..10000000\n");
                    return 2;
                }
                s.n_cells = (int)x;
            } else if (o == O_STEP) {
                s.step_seconds = x;
            } else if (o == O_SEED) {
                s.seed = (uint64_t)x;
            } else {
                s.tz_offset_s = x;
            }
            break;
        }
        case O_START: {
            double t;
            if (cc_data_parse_time(optarg, strlen(optarg), NULL, &t)) {
                fprintf(stderr, "cellcast synth: cannot parse --start '%s'\n", optarg);
                return 2;
            }
            s.start = (int64_t)floor(t);
            break;
        }
        case O_FEATURES:
            s.features = optarg;
            break;
        case O_OUT:
            out_path = optarg;
            break;
        case O_DAYS:
        case O_NOISE:
        case O_BURST:
        case O_OUTAGE:
        case O_MISSING:
        case O_GAP:
            if (parse_double(optarg, &v)) {
                fprintf(stderr, "cellcast synth: bad number '%s'\n", optarg);
                return 2;
            }
            if (o == O_DAYS)
                days = v;
            else if (o == O_NOISE)
                s.noise = v;
            else if (o == O_BURST)
                s.burst_rate = v;
            else if (o == O_OUTAGE)
                s.outage_rate = v;
            else if (o == O_MISSING)
                s.missing_rate = v;
            else
                s.gap_rate = v;
            break;
        case O_HELP:
            synth_usage(stdout);
            return 0;
        default:
            synth_usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "cellcast synth: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!(days > 0) || days > 36500) {
        fprintf(stderr, "cellcast synth: --days must be in (0, 36500]\n");
        return 2;
    }
    if (cc_synth_open(&g, &s, err, sizeof err)) {
        fprintf(stderr, "cellcast synth: %s\n", err);
        return 2;
    }
    int64_t n_steps = (int64_t)llround(days * 86400.0 / (double)s.step_seconds);
    if (n_steps < 1)
        n_steps = 1;
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

/*
 * incidents_bench.c — the CPU and memory of cellcastd's incident grouping (daemon/
 * incidents.c) at fleet scale (issue 32: "incident grouping's CPU and memory at 100k
 * cells").
 *
 * A fleet of --cells cells in sites of 3–6 consecutive cells, 25 sites a region, runs
 * --steps steps; at each step (one flush, as cellcastd's cron groups a step's alerts):
 *   - each cell starts a cell episode with probability --cell-rate per step (an anomaly
 *     alert naming one KPI), lasting 1–24 steps;
 *   - each site starts a site episode with probability --site-rate per step: every cell of
 *     the site fires at that step a critical all_zero alert and 2 per-KPI alerts (stuck),
 *     which resolve after 3–24 steps, cell by cell (a cell's own alerts may overlap it);
 *   - the transitions of the step are added (ccd_incidents_add), then the changed
 *     incidents are emitted (ccd_incidents_emit) to a callback that renders each one's
 *     JSON (ccd_incident_json: what cellcastd produces to Kafka), timed apart.
 * Prints one JSON line: transitions, CPU ns per transition (add), per flush (emit, grouping
 * only) and per emitted incident (JSON), the open incidents at the peak, and the heap bytes
 * the grouping holds (glibc mallinfo2: in use minus before the run, the bench's own queues
 * taken out; at the end and the peak over the run) and RSS. Times are the thread's CPU
 * time (the machine is shared), so they include no waiting.
 *
 * Usage: incidents_bench [--cells N] [--steps T] [--cell-rate P] [--site-rate P] [--seed X]
 */
#include <getopt.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "incidents.h"

/* CPU time of this thread: the machine is shared, wall time would count the others. */
static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t rng_state = 88172645463325252ull;
static double urand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}

/* A firing alert waiting for its resolution step. */
typedef struct Open {
    int cell;
    int64_t start, end;
    char id[64];
    const char *reason, *kpi;
    int critical;
} Open;

/* A transition of the current flush, its strings with it. */
typedef struct Due {
    CcdIncAlert a;
    char id[64], cell[32], site[32], region[32];
} Due;

typedef struct Bench {
    Open *open;
    size_t n_open, cap_open;
    Due *due;
    size_t cap_due;
    int *site_of, *site_first;
    int n_sites;
    uint64_t emitted, json_bytes;
    int64_t json_ns;
} Bench;

static const char *const kpis[] = {"prb_dl",       "prb_ul",     "thr_dl_mbps", "thr_ul_mbps",
                                   "active_users", "latency_ms", "cqi",         "drop_rate"};

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

static void on_emit(void *cookie, const CcdIncident *inc)
{
    Bench *b = cookie;
    int64_t t0 = now_ns();
    size_t len = 0;
    char *s = ccd_incident_json(inc, &len);
    b->json_ns += now_ns() - t0;
    b->json_bytes += len;
    b->emitted++;
    free(s);
}

static Open *open_add(Bench *b)
{
    if (b->n_open == b->cap_open) {
        size_t cap = b->cap_open ? 2 * b->cap_open : 4096;
        Open *p = realloc(b->open, cap * sizeof *p);
        if (!p) {
            fprintf(stderr, "incidents_bench: out of memory\n");
            exit(1);
        }
        b->open = p;
        b->cap_open = cap;
    }
    return &b->open[b->n_open++];
}

static Due *due_add(Bench *b, size_t i)
{
    if (i == b->cap_due) {
        size_t cap = b->cap_due ? 2 * b->cap_due : 4096;
        Due *p = realloc(b->due, cap * sizeof *p);
        if (!p) {
            fprintf(stderr, "incidents_bench: out of memory\n");
            exit(1);
        }
        b->due = p;
        b->cap_due = cap;
    }
    return &b->due[i];
}

int main(int argc, char **argv)
{
    int n_cells = 100000, steps = 2000;
    double cell_rate = 0.001, site_rate = 0.0005;
    static const struct option lo[] = {
        {"cells", 1, 0, 'c'},     {"steps", 1, 0, 't'}, {"cell-rate", 1, 0, 'r'},
        {"site-rate", 1, 0, 's'}, {"seed", 1, 0, 'x'},  {0, 0, 0, 0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (opt) {
        case 'c': n_cells = atoi(optarg); break;
        case 't': steps = atoi(optarg); break;
        case 'r': cell_rate = atof(optarg); break;
        case 's': site_rate = atof(optarg); break;
        case 'x': rng_state = strtoull(optarg, NULL, 10) * 2654435761ull + 1; break;
        default:
            fprintf(stderr, "usage: incidents_bench [--cells N] [--steps T] [--cell-rate P] "
                            "[--site-rate P] [--seed X]\n");
            return 2;
        }
    }
    if (n_cells < 1 || steps < 1) {
        fprintf(stderr, "incidents_bench: --cells and --steps must be ≥ 1\n");
        return 2;
    }
    Bench b = {0};
    b.site_of = malloc((size_t)n_cells * sizeof *b.site_of);
    b.site_first = malloc(((size_t)n_cells + 1) * sizeof *b.site_first);
    if (!b.site_of || !b.site_first)
        return 1;
    for (int c = 0; c < n_cells; b.n_sites++) {
        int size = 3 + (int)(urand() * 4);
        b.site_first[b.n_sites] = c;
        for (int k = 0; k < size && c < n_cells; k++)
            b.site_of[c++] = b.n_sites;
    }
    b.site_first[b.n_sites] = n_cells;

    size_t heap0 = heap_in_use(), heap_peak = 0;
    long rss0 = rss_kb();
    CcdIncidents *g = NULL;
    CcdIncidentSettings is;
    ccd_incident_default_settings(&is);
    if (ccd_incidents_open(&g, &is))
        return 1;
    int64_t add_ns = 0, emit_ns = 0;
    uint64_t n_trans = 0;
    size_t peak_open = 0;
    for (int64_t p = 0; p < steps; p++) {
        /* the step's new alerts */
        for (int s = 0; s < b.n_sites; s++) {
            if (urand() >= site_rate)
                continue;
            int64_t end = p + 3 + (int64_t)(urand() * 22);
            for (int c = b.site_first[s]; c < b.site_first[s + 1]; c++)
                for (int k = 0; k < 3; k++) {
                    Open *o = open_add(&b);
                    o->cell = c;
                    o->start = p;
                    o->end = end + (int64_t)(urand() * 2); /* cells recover a step apart */
                    o->reason = k ? "stuck" : "all_zero";
                    o->kpi = k ? kpis[k] : NULL;
                    o->critical = !k;
                    snprintf(o->id, sizeof o->id, "cell%06d:dq:%s:%s:%lld", c, o->reason,
                             o->kpi ? o->kpi : "-", (long long)p);
                }
        }
        for (int c = 0; c < n_cells; c++) {
            if (urand() >= cell_rate)
                continue;
            Open *o = open_add(&b);
            o->cell = c;
            o->start = p;
            o->end = p + 1 + (int64_t)(urand() * 24);
            o->reason = "anomaly";
            o->kpi = kpis[(int)(urand() * 8)];
            o->critical = urand() < 0.2;
            snprintf(o->id, sizeof o->id, "cell%06d:anomaly:%lld", c, (long long)p);
        }
        /* the flush: firings of this step and resolutions due (prepared first, then added
         * in one timed block), then the emit */
        size_t n_due = 0;
        for (size_t i = 0; i < b.n_open;) {
            Open *o = &b.open[i];
            int firing = o->start == p, resolving = o->end == p;
            if (!firing && !resolving) {
                i++;
                continue;
            }
            Due *d = due_add(&b, n_due++);
            int s = b.site_of[o->cell];
            snprintf(d->cell, sizeof d->cell, "cell%06d", o->cell);
            snprintf(d->site, sizeof d->site, "site%05d", s);
            snprintf(d->region, sizeof d->region, "region%04d", s / 25);
            snprintf(d->id, sizeof d->id, "%s", o->id);
            d->a = (CcdIncAlert){
                .reason = o->reason,
                .kpi = o->kpi,
                .firing = firing,
                .critical = o->critical,
                .step = p,
                .ts = p * 900,
                .start_ts = o->start * 900,
                .group_cells = b.site_first[s + 1] - b.site_first[s],
            };
            if (resolving && !firing) {
                b.open[i] = b.open[--b.n_open];
                continue;
            }
            i++;
        }
        for (size_t i = 0; i < n_due; i++) { /* pointers once the array stopped moving */
            Due *d = &b.due[i];
            d->a.id = d->id;
            d->a.cell = d->cell;
            d->a.site = d->site;
            d->a.region = d->region;
        }
        int64_t a0 = now_ns();
        for (size_t i = 0; i < n_due; i++)
            ccd_incidents_add(g, &b.due[i].a);
        add_ns += now_ns() - a0;
        n_trans += n_due;
        int64_t e0 = now_ns();
        uint64_t json0 = (uint64_t)b.json_ns;
        ccd_incidents_emit(g, on_emit, &b);
        emit_ns += now_ns() - e0 - ((uint64_t)b.json_ns - json0);
        CcdIncidentStats st;
        ccd_incidents_stats(g, &st);
        if (st.firing > peak_open)
            peak_open = st.firing;
        size_t h = heap_in_use();
        if (h > heap_peak)
            heap_peak = h;
    }
    CcdIncidentStats st;
    ccd_incidents_stats(g, &st);
    size_t heap1 = heap_in_use();
    long rss1 = rss_kb();
    /* the bench's own queue of open alerts is in the heap too: counted apart */
    size_t own = b.cap_open * sizeof *b.open + b.cap_due * sizeof *b.due;
    printf("{\"cells\":%d,\"sites\":%d,\"steps\":%d,\"cell_rate\":%g,\"site_rate\":%g,"
           "\"transitions\":%llu,\"ns_per_transition\":%.0f,\"ns_per_flush\":%.0f,"
           "\"emitted\":%llu,\"ns_per_emitted_json\":%.0f,\"json_bytes_per_emitted\":%.0f,"
           "\"opened\":%llu,\"open_now\":%zu,\"open_peak\":%zu,\"recent_kept\":%zu,"
           "\"heap_bytes_end\":%lld,\"heap_bytes_peak\":%lld,\"bench_queue_bytes\":%zu,"
           "\"rss_kb_start\":%ld,\"rss_kb_end\":%ld}\n",
           n_cells, b.n_sites, steps, cell_rate, site_rate, (unsigned long long)n_trans,
           n_trans ? (double)add_ns / (double)n_trans : 0, (double)emit_ns / steps,
           (unsigned long long)b.emitted, b.emitted ? (double)b.json_ns / (double)b.emitted : 0,
           b.emitted ? (double)b.json_bytes / (double)b.emitted : 0, (unsigned long long)st.opened,
           st.firing, peak_open, st.recent, (long long)heap1 - (long long)heap0 - (long long)own,
           (long long)heap_peak - (long long)heap0 - (long long)own, own, rss0, rss1);
    ccd_incidents_close(&g);
    free(b.open);
    free(b.due);
    free(b.site_of);
    free(b.site_first);
    return 0;
}

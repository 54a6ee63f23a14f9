/*
 * cc_synth.c — stateless synthetic KPI generator (see cc_synth.h for the model).
 *
 * Randomness is counter-based: every random number is a hash of (seed, cell, stream,
 * index), so any (cell, step) can be generated alone. Streams name what a number is for.
 */
#include "cc_synth.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const kpi_names[CC_SYNTH_N_KPIS] = {
    "prb_dl",       "prb_ul",     "thr_dl_mbps", "thr_ul_mbps",
    "active_users", "latency_ms", "cqi",         "drop_rate",
};

enum { K_PRB_DL, K_PRB_UL, K_THR_DL, K_THR_UL, K_USERS, K_LAT, K_CQI, K_DROP };

/* random streams */
enum {
    R_PARAM = 1,
    R_NOISE0,
    R_NOISE1,
    R_NOISE2,
    R_NOISE3,
    R_BURST,
    R_OUTAGE,
    R_GAP,
    R_MISSING,
    R_WHITE,
    R_SITE,       /* site sizes */
    R_SITE_EVENT, /* site-wide events (drawn with the site's index as the cell) */
    R_SHIFT,      /* a site event's neighbour shift (site index, slot) */
    R_CELL_EVENT, /* cell events */
    R_CELL_MAG,   /* a cell event's magnitude (slot) */
};

typedef struct CellParams {
    double scale, phase_h, business, users_max, ul_ratio, cqi0, bw_mhz, lat0, drop_k;
} CellParams;

struct CcSynth {
    CcSynthSettings s;
    int F;
    int kpi[CC_SYNTH_N_KPIS]; /* output column → KPI id */
    int64_t first_step;
    CellParams *cells;                         /* (n_cells) */
    int64_t burst_slot, outage_slot, gap_slot; /* slot lengths in steps */
    double p_burst, p_outage, p_gap;           /* probability of one event per slot */
    double p_site;                             /* the same for site-wide events */
    double p_cell;                             /* the same for cell events */
    int *site_of;                              /* (n_cells) a cell's site, NULL: no sites */
    int *site_first;                           /* (n_sites + 1) a site's first cell */
    int n_sites;
};

void cc_synth_default_settings(CcSynthSettings *s)
{
    memset(s, 0, sizeof *s);
    s->n_cells = 16;
    s->step_seconds = 900;
    s->start = 1704067200;
    s->seed = 1;
    s->features = NULL;
    s->tz_offset_s = 0;
    s->noise = 0.08;
    s->burst_rate = 0.5;
    s->outage_rate = 0.3;
    s->missing_rate = 0.003;
    s->gap_rate = 0.2;
    s->sites = 0;
    s->sites_per_region = 25;
    s->site_outage_rate = 0.2;
    s->neighbour_shift = 0;
    s->cell_event_rate = 0;
}

static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Uniform in [0, 1) from (seed, cell, stream, index). */
static double urand(const CcSynth *g, int cell, int stream, int64_t index)
{
    uint64_t h = mix64(g->s.seed ^ mix64((uint64_t)cell * 0x100000001B3ull + (uint64_t)stream));
    h = mix64(h ^ (uint64_t)index);
    return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}

/* Standard normal from two uniforms (Box–Muller). */
static double nrand(const CcSynth *g, int cell, int stream, int64_t index)
{
    double a = urand(g, cell, stream, 2 * index), b = urand(g, cell, stream, 2 * index + 1);
    return sqrt(-2.0 * log(a + 1e-300)) * cos(6.283185307179586 * b);
}

/* Smooth value noise in [-1, 1] with knots every `period` hours. */
static double value_noise(const CcSynth *g, int cell, int stream, double hours, double period)
{
    double x = hours / period;
    double i0 = floor(x), fr = x - i0;
    double a = 2 * urand(g, cell, stream, (int64_t)i0) - 1;
    double b = 2 * urand(g, cell, stream, (int64_t)i0 + 1) - 1;
    double w = 0.5 - 0.5 * cos(3.141592653589793 * fr);
    return a + (b - a) * w;
}

static double bump(double h, double centre, double width)
{
    double d = fabs(h - centre);
    if (d > 12)
        d = 24 - d;
    return exp(-0.5 * d * d / (width * width));
}

static double clampd(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

int cc_synth_open(CcSynth **out, const CcSynthSettings *sp, char *err, size_t errlen)
{
    *out = NULL;
    CcSynthSettings defs;
    if (!sp) {
        cc_synth_default_settings(&defs);
        sp = &defs;
    }
    if (sp->n_cells <= 0 || sp->n_cells > 10000000)
        return cc_errf(err, errlen, -EINVAL, "synth: cells must be 1..10000000");
    if (sp->step_seconds <= 0 || sp->step_seconds > 7 * 86400)
        return cc_errf(err, errlen, -EINVAL, "synth: step must be 1..604800 seconds");
    if (!(sp->noise >= 0 && sp->noise <= 1) || !(sp->burst_rate >= 0) || !(sp->outage_rate >= 0) ||
        !(sp->missing_rate >= 0 && sp->missing_rate < 1) || !(sp->gap_rate >= 0) ||
        !(sp->site_outage_rate >= 0) || (sp->sites && sp->sites_per_region < 1) ||
        !(sp->neighbour_shift >= 0 && sp->neighbour_shift <= 100) || !(sp->cell_event_rate >= 0))
        return cc_errf(err, errlen, -EINVAL,
                       "synth: noise must be in [0,1], rates ≥ 0, missing rate < 1, sites per "
                       "region ≥ 1, neighbour shift in [0, 100]");
    CcSynth *g = calloc(1, sizeof *g);
    if (!g)
        return -ENOMEM;
    g->s = *sp;
    g->s.features = NULL;
    if (sp->features && *sp->features) {
        const char *p = sp->features;
        for (;;) {
            const char *q = strchr(p, ',');
            size_t n = q ? (size_t)(q - p) : strlen(p);
            int found = -1;
            for (int k = 0; k < CC_SYNTH_N_KPIS; k++)
                if (strlen(kpi_names[k]) == n && strncmp(kpi_names[k], p, n) == 0)
                    found = k;
            for (int j = 0; j < g->F && found >= 0; j++)
                if (g->kpi[j] == found)
                    found = -2;
            if (found < 0 || g->F == CC_SYNTH_N_KPIS) {
                free(g);
                return cc_errf(err, errlen, -EINVAL, "synth: %s feature '%.*s' (known: %s)",
                               found == -2 ? "repeated" : "unknown", (int)n, p, CC_SYNTH_FEATURES);
            }
            g->kpi[g->F++] = found;
            if (!q)
                break;
            p = q + 1;
        }
    } else {
        for (int k = 0; k < CC_SYNTH_N_KPIS; k++)
            g->kpi[g->F++] = k;
    }
    const int64_t S = sp->step_seconds;
    g->first_step = sp->start >= 0 ? sp->start / S : -((-sp->start + S - 1) / S);
    g->cells = calloc((size_t)sp->n_cells, sizeof *g->cells);
    if (!g->cells) {
        free(g);
        return -ENOMEM;
    }
    for (int c = 0; c < sp->n_cells; c++) {
        CellParams *cp = &g->cells[c];
#define U(i) urand(g, c, R_PARAM, i)
        cp->scale = 0.35 + 0.55 * U(0);
        cp->phase_h = -1.5 + 3.0 * U(1);
        cp->business = U(2);
        cp->users_max = 50 + 350 * U(3);
        cp->ul_ratio = 0.25 + 0.3 * U(4);
        cp->cqi0 = 9 + 4 * U(5);
        cp->bw_mhz = U(6) < 0.5 ? 10 : 20;
        cp->lat0 = 12 + 18 * U(7);
        cp->drop_k = 0.5 + 1.5 * U(8);
#undef U
    }
    g->burst_slot = 21600 / S > 12 ? 21600 / S : 12;
    g->outage_slot = 604800 / S > 24 ? 604800 / S : 24;
    g->gap_slot = g->outage_slot;
    g->p_burst = clampd(sp->burst_rate * (double)(g->burst_slot * S) / 86400.0, 0, 1);
    g->p_outage = clampd(sp->outage_rate * (double)(g->outage_slot * S) / 604800.0, 0, 1);
    g->p_gap = clampd(sp->gap_rate * (double)(g->gap_slot * S) / 604800.0, 0, 1);
    g->p_site = clampd(sp->site_outage_rate * (double)(g->outage_slot * S) / 604800.0, 0, 1);
    g->p_cell = clampd(sp->cell_event_rate * (double)(g->outage_slot * S) / 604800.0, 0, 1);
    if (sp->sites) {
        int n = sp->n_cells;
        g->site_of = malloc((size_t)n * sizeof *g->site_of);
        g->site_first = malloc(((size_t)n + 1) * sizeof *g->site_first);
        if (!g->site_of || !g->site_first) {
            cc_synth_close(&g);
            return -ENOMEM;
        }
        for (int c = 0; c < n; g->n_sites++) { /* sizes 3..6 from the seed */
            int size = 3 + (int)(urand(g, 0, R_SITE, g->n_sites) * 4);
            g->site_first[g->n_sites] = c;
            for (int k = 0; k < size && c < n; k++)
                g->site_of[c++] = g->n_sites;
        }
        g->site_first[g->n_sites] = n;
    }
    *out = g;
    return 0;
}

int cc_synth_n_sites(const CcSynth *g) { return g->n_sites; }

int cc_synth_cell_site(const CcSynth *g, int cell)
{
    return g->site_of && cell >= 0 && cell < g->s.n_cells ? g->site_of[cell] : -1;
}

void cc_synth_close(CcSynth **pg)
{
    if (!pg || !*pg)
        return;
    free((*pg)->cells);
    free((*pg)->site_of);
    free((*pg)->site_first);
    free(*pg);
    *pg = NULL;
}

int cc_synth_n_features(const CcSynth *g) { return g->F; }
const char *cc_synth_feature_name(const CcSynth *g, int f)
{
    return f >= 0 && f < g->F ? kpi_names[g->kpi[f]] : NULL;
}
int cc_synth_n_cells(const CcSynth *g) { return g->s.n_cells; }
int64_t cc_synth_step_seconds(const CcSynth *g) { return g->s.step_seconds; }
int64_t cc_synth_first_step(const CcSynth *g) { return g->first_step; }

void cc_synth_cell_id(int cell, char *buf, size_t n) { snprintf(buf, n, "cell%04d", cell); }

static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* Is `step` inside an event of this stream? Events: one per slot with probability p,
 * starting uniformly inside the slot, lasting dmin..dmax steps (dmax ≤ slot). *strength
 * gets a uniform [0,1) draw of the event, *slot_of (may be NULL) the slot it was drawn in. */
static int in_event_slot(const CcSynth *g, int cell, int stream, int64_t step, int64_t slot,
                         double p, int dmin, int dmax, double *strength, int64_t *slot_of)
{
    if (p <= 0)
        return 0;
    int64_t s0 = floor_div(step, slot);
    for (int64_t s = s0; s >= s0 - 1; s--) {
        if (urand(g, cell, stream, 4 * s) >= p)
            continue;
        int64_t begin = s * slot + (int64_t)(urand(g, cell, stream, 4 * s + 1) * (double)slot);
        int64_t dur = dmin + (int64_t)(urand(g, cell, stream, 4 * s + 2) * (dmax - dmin + 1));
        if (step >= begin && step < begin + dur) {
            if (strength)
                *strength = urand(g, cell, stream, 4 * s + 3);
            if (slot_of)
                *slot_of = s;
            return 1;
        }
    }
    return 0;
}

static int in_event(const CcSynth *g, int cell, int stream, int64_t step, int64_t slot, double p,
                    int dmin, int dmax, double *strength)
{
    return in_event_slot(g, cell, stream, step, slot, p, dmin, dmax, strength, NULL);
}

/* Durations (steps) of each event stream: one table for the generator and the labels. */
enum {
    SITE_DMIN = 3,
    SITE_DMAX = 24,
    OUT_DMIN = 3,
    OUT_DMAX = 24,
    BURST_DMIN = 2,
    BURST_DMAX = 12,
    GAP_DMIN = 3,
    GAP_DMAX = 20,
    CELL_DMIN = 4,
    CELL_DMAX = 16
};

int cc_synth_neighbour_site(const CcSynth *g, int site)
{
    if (!g->site_of || site < 0 || site >= g->n_sites)
        return -1;
    int spr = g->s.sites_per_region;
    if (site + 1 < g->n_sites && (site + 1) / spr == site / spr)
        return site + 1;
    if (site > 0 && (site - 1) / spr == site / spr)
        return site - 1;
    return -1;
}

/* The extra relative load on site `site` at `step` from a neighbour's site-wide event
 * (0: none). */
static double neighbour_extra(const CcSynth *g, int site, int64_t step)
{
    if (!(g->s.neighbour_shift > 0) || site < 0)
        return 0;
    double extra = 0;
    for (int src = site - 1; src <= site + 1; src += 2) {
        int64_t slot;
        if (src < 0 || src >= g->n_sites || cc_synth_neighbour_site(g, src) != site ||
            !in_event_slot(g, src, R_SITE_EVENT, step, g->outage_slot, g->p_site, SITE_DMIN,
                           SITE_DMAX, NULL, &slot))
            continue;
        extra += g->s.neighbour_shift * (0.75 + 0.5 * urand(g, src, R_SHIFT, slot));
    }
    return extra;
}

int cc_synth_cell_event(const CcSynth *g, int cell, int64_t step)
{
    double kind;
    if (cell < 0 || cell >= g->s.n_cells ||
        !in_event(g, cell, R_CELL_EVENT, step, g->outage_slot, g->p_cell, CELL_DMIN, CELL_DMAX,
                  &kind))
        return 0;
    return kind < 0.5 ? 1 : 2;
}

/* The magnitude draw in [0, 1) of the cell event at `step` (one is there). */
static double cell_event_mag(const CcSynth *g, int cell, int64_t step)
{
    int64_t slot = 0;
    in_event_slot(g, cell, R_CELL_EVENT, step, g->outage_slot, g->p_cell, CELL_DMIN, CELL_DMAX,
                  NULL, &slot);
    return urand(g, cell, R_CELL_MAG, slot);
}

int cc_synth_site_event(const CcSynth *g, int site, int64_t step)
{
    double kind;
    if (site < 0 || site >= g->n_sites ||
        !in_event(g, site, R_SITE_EVENT, step, g->outage_slot, g->p_site, SITE_DMIN, SITE_DMAX,
                  &kind))
        return 0;
    return kind < 0.5 ? 1 : 2;
}

int cc_synth_values(const CcSynth *g, int cell, int64_t step, float *out)
{
    if (cell < 0 || cell >= g->s.n_cells) {
        for (int j = 0; j < g->F; j++)
            out[j] = NAN;
        return 0;
    }
    const CellParams *cp = &g->cells[cell];
    const int64_t S = g->s.step_seconds;
    double secs = (double)step * (double)S + (double)g->s.tz_offset_s;
    double hours = secs / 3600.0;
    double days = floor(secs / 86400.0);
    int dow = (int)fmod(fmod(days + 3, 7) + 7, 7); /* Monday = 0 */
    double h = fmod(fmod(hours + cp->phase_h, 24) + 24, 24);

    double business =
        0.08 + 0.9 * bump(h, 11, 2.2) + 0.8 * bump(h, 15, 2.5) + 0.2 * bump(h, 19, 2.0);
    double residential =
        0.12 + 0.35 * bump(h, 8.5, 1.5) + 0.45 * bump(h, 13, 2.5) + 1.0 * bump(h, 21, 2.3);
    double weekend = dow >= 5;
    double day = cp->business * business * (weekend ? 0.55 : 1.0) +
                 (1 - cp->business) * residential * (weekend ? 1.1 : 1.0);
    double nz = 0.5 * value_noise(g, cell, R_NOISE0, hours, 72) +
                0.6 * value_noise(g, cell, R_NOISE1, hours, 6) +
                0.3 * value_noise(g, cell, R_NOISE2, hours, 2) +
                0.15 * value_noise(g, cell, R_NOISE3, hours, 0.5);
    double u = cp->scale * day * (1 + g->s.noise * nz);
    double st;
    if (in_event(g, cell, R_BURST, step, g->burst_slot, g->p_burst, BURST_DMIN, BURST_DMAX, &st))
        u *= 1.3 + 1.2 * st;
    int site = cc_synth_cell_site(g, cell);
    double extra = neighbour_extra(g, site, step);
    if (extra > 0)
        u *= 1 + extra;
    int cell_event = cc_synth_cell_event(g, cell, step);
    double cqi_drop = 0;
    if (cell_event == 1)
        u *= 2 + 1.5 * cell_event_mag(g, cell, step);
    else if (cell_event == 2)
        cqi_drop = 3 + 2 * cell_event_mag(g, cell, step);
    if (u < 0)
        u = 0;
    int outage =
        in_event(g, cell, R_OUTAGE, step, g->outage_slot, g->p_outage, OUT_DMIN, OUT_DMAX, NULL);
    int site_event = cc_synth_site_event(g, site, step);

    double v[CC_SYNTH_N_KPIS];
#define W(k) (nrand(g, cell, R_WHITE, step * CC_SYNTH_N_KPIS + (k)))
    if (site_event == 1) { /* power: the site's cells are dark, every counter 0 */
        for (int k = 0; k < CC_SYNTH_N_KPIS; k++)
            v[k] = 0;
        v[K_LAT] = NAN;
        v[K_CQI] = NAN;
    } else if (outage) {
        v[K_PRB_DL] = clampd(0.3 + 0.1 * W(K_PRB_DL), 0, 100);
        v[K_PRB_UL] = clampd(0.1 + 0.05 * W(K_PRB_UL), 0, 100);
        v[K_THR_DL] = 0;
        v[K_THR_UL] = 0;
        v[K_USERS] = 0;
        v[K_LAT] = NAN;
        v[K_CQI] = NAN;
        v[K_DROP] = 0;
    } else {
        double prb_dl = clampd(100 * u * (1 + 0.04 * W(K_PRB_DL)), 0, 100);
        double prb_ul = clampd(prb_dl * cp->ul_ratio * (1 + 0.08 * W(K_PRB_UL)), 0, 100);
        double cqi = clampd(cp->cqi0 - 2.0 * u - cqi_drop + 0.4 * W(K_CQI), 1, 15);
        double se = 0.15 + 0.37 * cqi;
        v[K_PRB_DL] = prb_dl;
        v[K_PRB_UL] = prb_ul;
        v[K_THR_DL] = fmax(0, prb_dl / 100 * cp->bw_mhz * se * 0.75 * (1 + 0.05 * W(K_THR_DL)));
        v[K_THR_UL] = fmax(0, prb_ul / 100 * cp->bw_mhz * se * 0.4 * (1 + 0.06 * W(K_THR_UL)));
        v[K_USERS] = fmax(0, round(cp->users_max * u * (1 + 0.05 * W(K_USERS))));
        v[K_LAT] = fmax(1, cp->lat0 * (1 + 0.6 * u * u) + 40 * fmax(0, u - 0.9) + 4 * cqi_drop +
                               1.0 * W(K_LAT));
        v[K_CQI] = cqi;
        v[K_DROP] = clampd(cp->drop_k * (0.1 + 0.3 * u + 4 * fmax(0, u - 0.9)) * (1 + cqi_drop) +
                               0.03 * fabs(W(K_DROP)),
                           0, 100);
    }
#undef W
    for (int j = 0; j < g->F; j++)
        out[j] = (float)v[g->kpi[j]];

    if (site_event == 2) /* transport: nothing reported */
        return 0;
    if (urand(g, cell, R_MISSING, step) < g->s.missing_rate)
        return 0;
    if (in_event(g, cell, R_GAP, step, g->gap_slot, g->p_gap, GAP_DMIN, GAP_DMAX, NULL))
        return 0;
    return 1;
}

int cc_synth_write_csv(const CcSynth *g, FILE *fp, int64_t n_steps)
{
    float v[CC_SYNTH_N_KPIS];
    char id[32];
    fputs("ts,cell_id", fp);
    for (int j = 0; j < g->F; j++)
        fprintf(fp, ",%s", kpi_names[g->kpi[j]]);
    fputc('\n', fp);
    for (int64_t i = 0; i < n_steps; i++) {
        int64_t p = g->first_step + i;
        for (int c = 0; c < g->s.n_cells; c++) {
            if (!cc_synth_values(g, c, p, v))
                continue;
            cc_synth_cell_id(c, id, sizeof id);
            fprintf(fp, "%lld,%s", (long long)(p * g->s.step_seconds), id);
            for (int j = 0; j < g->F; j++) {
                if (isnan(v[j]))
                    fputs(",", fp);
                else if (g->kpi[j] == K_USERS)
                    fprintf(fp, ",%.0f", v[j]);
                else
                    fprintf(fp, ",%.5g", v[j]);
            }
            fputc('\n', fp);
        }
    }
    return ferror(fp) ? -EIO : 0;
}

int cc_synth_write_topology(const CcSynth *g, FILE *fp)
{
    if (!g->site_of)
        return -EINVAL;
    char id[32];
    fputs("cell,site,region,sector,lat,lon\n", fp);
    for (int c = 0; c < g->s.n_cells; c++) {
        int site = g->site_of[c];
        /* sites scattered over ~1 x 1.5 degrees, deterministic from the seed */
        double lat = 41.0 + urand(g, site, R_SITE, -1),
               lon = 1.5 + 1.5 * urand(g, site, R_SITE, -2);
        cc_synth_cell_id(c, id, sizeof id);
        fprintf(fp, "%s,site%04d,region%03d,%d,%.5f,%.5f\n", id, site, site / g->s.sites_per_region,
                c - g->site_first[site] + 1, lat, lon);
    }
    return ferror(fp) ? -EIO : 0;
}

/* ---- ground truth ------------------------------------------------------------------ */

enum {
    EV_POWER,
    EV_TRANSPORT,
    EV_SHIFT,
    EV_CELL_OUTAGE,
    EV_SPIKE,
    EV_DEGRADATION,
    EV_BURST,
    EV_GAP
};
static const char *const event_kind_names[] = {
    "power_outage", "transport_loss",   "neighbour_shift", "cell_outage",
    "cell_spike",   "cell_degradation", "burst",           "gap",
};

typedef struct SynthEvent {
    int64_t start, end; /* steps, end exclusive */
    int kind;
    int site; /* scope site: the site; scope cell: -1 */
    int cell; /* scope cell: the cell */
} SynthEvent;

typedef struct EventList {
    SynthEvent *v;
    size_t n, cap;
} EventList;

static int event_push(EventList *l, int64_t start, int64_t end, int kind, int site, int cell)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        SynthEvent *p = realloc(l->v, cap * sizeof *p);
        if (!p)
            return -ENOMEM;
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = (SynthEvent){start, end, kind, site, cell};
    return 0;
}

/* The events of one stream of `who` (a cell, or a site's index) that touch [p0, p1), drawn
 * exactly as in_event_slot draws them, clipped to the window; kind_of maps the strength
 * draw to a kind. With shift_to ≥ 0 each also adds a neighbour_shift event of that site. */
static int stream_events(const CcSynth *g, EventList *l, int who, int stream, int64_t slot,
                         double p, int dmin, int dmax, int64_t p0, int64_t p1, int kind_lo,
                         int kind_hi, int scope_site, int shift_to)
{
    if (p <= 0)
        return 0;
    for (int64_t s = floor_div(p0, slot) - 1; s <= floor_div(p1 - 1, slot); s++) {
        if (urand(g, who, stream, 4 * s) >= p)
            continue;
        int64_t begin = s * slot + (int64_t)(urand(g, who, stream, 4 * s + 1) * (double)slot);
        int64_t dur = dmin + (int64_t)(urand(g, who, stream, 4 * s + 2) * (dmax - dmin + 1));
        int64_t a = begin > p0 ? begin : p0, b = begin + dur < p1 ? begin + dur : p1;
        if (a >= b)
            continue;
        int kind = urand(g, who, stream, 4 * s + 3) < 0.5 ? kind_lo : kind_hi;
        if (event_push(l, a, b, kind, scope_site ? who : -1, scope_site ? -1 : who) ||
            (shift_to >= 0 && event_push(l, a, b, EV_SHIFT, shift_to, -1)))
            return -ENOMEM;
    }
    return 0;
}

static int cmp_event(const void *x, const void *y)
{
    const SynthEvent *a = x, *b = y;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    if (a->kind != b->kind)
        return a->kind - b->kind;
    int ka = a->site >= 0 ? a->site : a->cell, kb = b->site >= 0 ? b->site : b->cell;
    return ka - kb;
}

int cc_synth_write_events(const CcSynth *g, FILE *fp, int64_t n_steps)
{
    EventList l = {0};
    const int64_t p0 = g->first_step, p1 = g->first_step + n_steps, S = g->s.step_seconds;
    int rc = 0;
    for (int site = 0; site < g->n_sites && !rc; site++) {
        int nb = g->s.neighbour_shift > 0 ? cc_synth_neighbour_site(g, site) : -1;
        rc = stream_events(g, &l, site, R_SITE_EVENT, g->outage_slot, g->p_site, SITE_DMIN,
                           SITE_DMAX, p0, p1, EV_POWER, EV_TRANSPORT, 1, nb);
    }
    for (int c = 0; c < g->s.n_cells && !rc; c++) {
        if ((rc = stream_events(g, &l, c, R_OUTAGE, g->outage_slot, g->p_outage, OUT_DMIN, OUT_DMAX,
                                p0, p1, EV_CELL_OUTAGE, EV_CELL_OUTAGE, 0, -1)) ||
            (rc = stream_events(g, &l, c, R_CELL_EVENT, g->outage_slot, g->p_cell, CELL_DMIN,
                                CELL_DMAX, p0, p1, EV_SPIKE, EV_DEGRADATION, 0, -1)) ||
            (rc = stream_events(g, &l, c, R_BURST, g->burst_slot, g->p_burst, BURST_DMIN,
                                BURST_DMAX, p0, p1, EV_BURST, EV_BURST, 0, -1)))
            break;
        rc = stream_events(g, &l, c, R_GAP, g->gap_slot, g->p_gap, GAP_DMIN, GAP_DMAX, p0, p1,
                           EV_GAP, EV_GAP, 0, -1);
    }
    if (rc) {
        free(l.v);
        return rc;
    }
    qsort(l.v, l.n, sizeof *l.v, cmp_event);
    char id[32];
    fputs("kind,scope,site,cells,start,end\n", fp);
    for (size_t i = 0; i < l.n; i++) {
        const SynthEvent *e = &l.v[i];
        int site = e->site >= 0 ? e->site : cc_synth_cell_site(g, e->cell);
        fprintf(fp, "%s,%s,", event_kind_names[e->kind], e->site >= 0 ? "site" : "cell");
        if (site >= 0)
            fprintf(fp, "site%04d", site);
        fputc(',', fp);
        int c0 = e->site >= 0 ? g->site_first[e->site] : e->cell;
        int c1 = e->site >= 0 ? g->site_first[e->site + 1] : e->cell + 1;
        for (int c = c0; c < c1; c++) {
            cc_synth_cell_id(c, id, sizeof id);
            fprintf(fp, "%s%s", c > c0 ? ";" : "", id);
        }
        fprintf(fp, ",%lld,%lld\n", (long long)(e->start * S), (long long)(e->end * S));
    }
    free(l.v);
    return ferror(fp) ? -EIO : 0;
}

/*
 * cc_synth.h — a deterministic synthetic multi-cell mobile-network KPI generator.
 *
 * Every value is a pure function of (seed, cell, absolute step): the generator keeps no
 * running state, so a demo feed can ask for cell c at step p in any order and a CSV
 * written in one go holds exactly the same numbers (cc_synth_values is the streaming API).
 *
 * The default KPIs, in this order (CC_SYNTH_FEATURES):
 *   prb_dl       downlink PRB utilisation, %            (0..100)
 *   prb_ul       uplink PRB utilisation, %              (0..100)
 *   thr_dl_mbps  downlink cell throughput, Mbit/s       (≥ 0)
 *   thr_ul_mbps  uplink cell throughput, Mbit/s         (≥ 0)
 *   active_users mean RRC-connected users (integer)     (≥ 0)
 *   latency_ms   mean user-plane latency, ms            (> 0)
 *   cqi          mean channel quality indicator         (1..15)
 *   drop_rate    call/session drop rate, %              (0..100)
 *
 * How a cell's values come about:
 *   load u(c,p) = scale_c · day(h_c) · week(dow) · (1 + smooth noise) · burst
 *     day()   a mix of a "business" profile (peaks ~11:00 and ~15:00) and a "residential"
 *             one (peak ~21:00), in per-cell proportion; h_c = local hour + the cell's
 *             phase (±1.5 h);
 *     week()  business cells drop to ~55 % at weekends, residential ones rise ~10 %;
 *     noise   multi-octave value noise (smooth, from the seed, relative level `noise`);
 *     bursts  ~`burst_rate` per cell per day, 2–12 steps of ×1.3–2.5 load (events, crowds);
 *   KPIs then follow u: PRB ∝ u, throughput ∝ PRB × spectral efficiency from CQI, CQI
 *   falls and latency and drops rise with load; each KPI adds its own small noise.
 *   outages ~`outage_rate` per cell per week, 3–24 steps: the cell carries no traffic
 *     (PRB ≈ 0, throughput 0, users 0, drop_rate 0) and reports no latency or CQI (NaN).
 *   missing steps: a step is absent (no row) with probability `missing_rate`, and
 *     ~`gap_rate` collector gaps per cell per week drop 3–20 consecutive steps.
 * Cell ids are "cell%04d" (cell0000, cell0001, …).
 *
 * Sites (`sites` on; off by default, and then nothing above changes): consecutive cells
 * form sites of 3–6 cells (sizes drawn from the seed; the last site takes what is left,
 * 1–6), numbered "site%04d", and `sites_per_region` consecutive sites a region
 * "region%03d"; a cell's sector is its place in its site (1..6). Site-wide events,
 * ~`site_outage_rate` per site per week, 3–24 steps, hit every cell of the site at the
 * same steps: half of them a power outage (every counter of every cell 0, no latency or
 * CQI reported), half a transport loss (no cell of the site reports: its rows are absent).
 * cc_synth_write_topology writes the topology file (cellcastd's topology.path).
 *
 * Fleet events (each off by default; then nothing above changes):
 *   neighbour shift (`neighbour_shift` X > 0, with sites): while a site is in a site-wide
 *     event, its neighbour — the next site of the same region (the previous one for the
 *     region's last site) — carries its traffic: the load of every cell of the neighbour
 *     is multiplied by 1 + X·(0.75 + 0.5·s), s the outage's own strength draw in [0, 1);
 *   cell events (`cell_event_rate` per cell per week, 4–16 steps): half a spike (the
 *     cell's load ×2–3.5: a crowd or a misrouted cluster), half a degradation (CQI 3–5
 *     lower: throughput falls, latency and drops rise; an interference or a faulty unit).
 * cc_synth_write_events lists every injected event in a window (kind, scope, site,
 * cells, start, end) as the ground truth of an evaluation.
 */
#ifndef CC_SYNTH_H
#define CC_SYNTH_H

#include <stdio.h>

#include "cc_common.h"

#define CC_SYNTH_FEATURES                                                                          \
    "prb_dl,prb_ul,thr_dl_mbps,thr_ul_mbps,active_users,latency_ms,cqi,drop_rate"
#define CC_SYNTH_N_KPIS 8

typedef struct CcSynth CcSynth;

typedef struct CcSynthSettings {
    int n_cells;             ///< cells (default 16)
    int64_t step_seconds;    ///< S (default 900: 15-minute counters)
    int64_t start;           ///< unix seconds of the first row, rounded down to a step
                             ///< (default 1704067200 = 2024-01-01 00:00 UTC, a Monday)
    uint64_t seed;           ///< (default 1)
    const char *features;    ///< comma-separated subset of CC_SYNTH_FEATURES, in the order
                             ///< wanted; NULL = all 8 (default NULL)
    int64_t tz_offset_s;     ///< offset of the cells' local time from UTC (default 0)
    double noise;            ///< relative load noise (default 0.08)
    double burst_rate;       ///< bursts per cell per day (default 0.5)
    double outage_rate;      ///< outages per cell per week (default 0.3)
    double missing_rate;     ///< probability a single step is absent (default 0.003)
    double gap_rate;         ///< multi-step collector gaps per cell per week (default 0.2)
    int sites;               ///< 1: cells grouped into sites and regions (default 0)
    int sites_per_region;    ///< sites of a region (default 25)
    double site_outage_rate; ///< site-wide events per site per week (default 0.2; with sites)
    double neighbour_shift;  ///< extra load of a site-wide event's neighbour site, relative
                             ///< (default 0: off; with sites)
    double cell_event_rate;  ///< cell events (spike, degradation) per cell per week
                             ///< (default 0: off)
} CcSynthSettings;

void cc_synth_default_settings(CcSynthSettings *s);

/** 0, -EINVAL (bad settings or unknown feature: message in err), -ENOMEM. */
int cc_synth_open(CcSynth **out, const CcSynthSettings *s, char *err, size_t errlen);
void cc_synth_close(CcSynth **g);

int cc_synth_n_features(const CcSynth *g);
const char *cc_synth_feature_name(const CcSynth *g, int f);
int cc_synth_n_cells(const CcSynth *g);
int64_t cc_synth_step_seconds(const CcSynth *g);
/** Absolute step index (unix seconds / S) of the settings' start. */
int64_t cc_synth_first_step(const CcSynth *g);

/** "cell%04d". */
void cc_synth_cell_id(int cell, char *buf, size_t n);

/** Sites (0 without sites) and a cell's site index (-1 without sites). */
int cc_synth_n_sites(const CcSynth *g);
int cc_synth_cell_site(const CcSynth *g, int cell);
/** Whether site `site` is in a site-wide event at `step`: 0 none, 1 power outage (its cells
 *  carry no traffic), 2 transport loss (its cells' rows are absent). */
int cc_synth_site_event(const CcSynth *g, int site, int64_t step);
/** The site that takes over the traffic of site `site` during its site-wide events: the
 *  next site of its region, the previous one for the region's last site; -1 when its
 *  region has no other site (or without sites). */
int cc_synth_neighbour_site(const CcSynth *g, int site);
/** Cell event of cell `cell` at `step`: 0 none, 1 spike, 2 degradation. */
int cc_synth_cell_event(const CcSynth *g, int cell, int64_t step);
/** Writes the topology CSV of the cells (header cell,site,region,sector,lat,lon; one line
 *  per cell). 0, -EINVAL (no sites), -EIO. */
int cc_synth_write_topology(const CcSynth *g, FILE *fp);

/**
 * Values of cell `cell` at absolute step `step` (unix seconds / S) into out (F floats,
 * the chosen features in order; NaN = value not reported). Returns 1 when the step has a
 * row, 0 when the whole step is missing (out is still filled, as if it had been
 * observed). Deterministic in (seed, cell, step); thread-safe (g is read-only).
 */
int cc_synth_values(const CcSynth *g, int cell, int64_t step, float *out);

/**
 * Writes `n_steps` steps of every cell from the first step as long CSV
 * (`ts,cell_id,<kpis>` header; ts in unix seconds; missing steps omitted; NaN values as
 * empty fields), rows ordered by step then cell. 0 or -EIO.
 */
int cc_synth_write_csv(const CcSynth *g, FILE *fp, int64_t n_steps);

/**
 * Writes the events injected in the `n_steps` steps from the first step as CSV, header
 * `kind,scope,site,cells,start,end`, one line per event ordered by start then kind:
 *   kind   power_outage, transport_loss, neighbour_shift (scope site: every cell of the
 *          site); cell_outage, cell_spike, cell_degradation, burst, gap (scope cell);
 *   site   the site's name (site%04d), empty without sites;
 *   cells  the cells' ids separated by ';';
 *   start  unix seconds of the event's first step; end: of the step after its last
 *          (an event cut by the window is cut there too).
 * Bursts are the generator's load bursts (background traffic, `burst_rate`), gaps its
 * collector gaps (`gap_rate`); single missing steps are not listed. 0 or -EIO.
 */
int cc_synth_write_events(const CcSynth *g, FILE *fp, int64_t n_steps);

#endif

/*
 * episodes.h — the per-episode check of anomaly-eval (issue 13: "no episode lasts longer
 * than its triggering deviation plus the hysteresis"). Every anomaly episode resolved in
 * the test rows is measured from its resolved event (CcAlertEvent.trace, lib/cc_anomaly.h):
 *     length    onset to resolution, both included
 *     deviation the triggering deviation: onset to the last step at which the rules still
 *               saw a live deviation (CcEpisodeTrace.live_run)
 *     excess    length − (deviation + resolve_m), ≥ 0 by construction
 * An episode that ends when its deviation does has excess 0; a positive excess is the steps
 * a draining sum or average (CUSUM, window, likelihood, the profile without
 * sustained_live) kept over, or unscored steps inside the episode. Episodes still firing at
 * the end are counted, not checked (they have no resolution).
 */
#ifndef CCT_EPISODES_H
#define CCT_EPISODES_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "cc_anomaly.h"
#include "cc_model.h"

#define CCT_EP_WORST 3

/** One checked episode. */
typedef struct CctEpisode {
    char cell[CC_ANOMALY_CELL_ID_MAX + 1];
    int64_t onset_ts;          ///< unix seconds of the onset
    int64_t length, deviation; ///< see above
    int64_t excess;            ///< length − (deviation + resolve_m)
    int rules, kpi;            ///< what held it past its deviation (excess > 0), else what
                               ///< raised it (CcAnomalyRule bits; kpi -1: none)
    int held, unscored;        ///< of the excess: over steps held, steps without a verdict
} CctEpisode;

/** The episodes of one detector (zero-initialised). */
typedef struct CctEpisodes {
    int n;                          ///< episodes resolved in the test rows
    int exceed;                     ///< of them with excess > 0
    int open;                       ///< still firing at the end (not checked)
    int64_t max_excess;             ///< the largest excess
    int by_rule[CC_RULES];          ///< exceeding episodes held by each rule (bit order)
    int n_worst;                    ///< entries of worst
    CctEpisode worst[CCT_EP_WORST]; ///< by excess, then length, descending
} CctEpisodes;

/** Checks the episode of a resolved anomaly event (other events are ignored). */
void cct_episodes_add(CctEpisodes *e, const CcAlertEvent *ev, int resolve_m);

/** "cusum+profile" for a set of CcAnomalyRule bits ("-" for none) into buf. */
const char *cct_episode_rules(int rules, char *buf, size_t cap);

/** The check as lines under a row of the table (KPI names from hp). */
void cct_episodes_print(const CctEpisodes *e, const CcHparams *hp, FILE *out);

/** The check as a JSON object (NULL on -ENOMEM). */
json_t *cct_episodes_json(const CctEpisodes *e, const CcHparams *hp);

#endif

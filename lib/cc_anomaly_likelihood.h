/*
 * cc_anomaly_likelihood.h — the anomaly likelihood stage: how unusual a KPI's recent
 * residuals are against their own long-run distribution. After Numenta's anomaly likelihood
 * (Ahmad et al. 2017), rebuilt here online and O(1) per step: a raw score r = ln(1 + |z|)
 * (z the KPI's calibrated forecast z) is averaged over the last short_n steps (m); m's
 * long-run mean μ and variance v are tracked exponentially (a plain average over the first
 * long_steps updates, then time constant long_steps); the likelihood is 1 − Q((m − μ)/sd),
 * sd = max(√v, CC_LIK_MIN_SD), Q the Gaussian upper tail, one-sided (residuals quieter than
 * usual are no anomaly), and it is reported on a log scale,
 *     ll = min(1, −log10(Q + 1e-10) / 10)   (0.5 at Q = 10⁻⁵, 1 at Q ≤ 10⁻¹⁰),
 * so that one noisy raw score becomes a rare, sharp signal: a single large |z| on a KPI whose
 * residuals are always large barely moves it, a run of moderate ones on a quiet KPI does.
 * Also value novelty (CcNovelty, below). Both are the scorer's options (cc_anomaly.h,
 * "Anomaly likelihood"); this header is their state and their step, shared by the scorer
 * and the snapshot record.
 */
#ifndef CC_ANOMALY_LIKELIHOOD_H
#define CC_ANOMALY_LIKELIHOOD_H

#include <stdint.h>

#define CC_LIK_SHORT_MAX 32 /* largest short_n: the ring is in the state */

/* The floor of the long-run sd, in units of r: a KPI whose residuals never vary (a
 * constant series, a perfect forecast) would otherwise make any change certain. 0.05 is
 * a 5% change of 1 + |z|, half the sd of a 10-step average of r on Gaussian residuals. */
#define CC_LIK_MIN_SD 0.05

/* Updates of the long-run distribution are clipped at this many sd from its mean once it
 * has CC_LIK_MIN_N of them, so that an anomaly's own scores widen it only slowly. */
#define CC_LIK_CLIP 3.0

/* Updates of the long-run distribution before the likelihood is reported (before: NaN).
 * The mean of short_n steps needs a few of its own widths to say what is usual. */
#define CC_LIK_MIN_N 100

typedef struct CcLikState {
    float ring[CC_LIK_SHORT_MAX]; ///< the last short_n raw scores
    int32_t pos;                  ///< next ring slot
    int32_t filled;               ///< ring entries in use (≤ short_n)
    int32_t n;                    ///< long-run updates (saturates at long_steps)
    double mean, var;             ///< long-run mean and variance of the short average
} CcLikState;

/* One step of raw score r (NaN: none, the state is unchanged and NaN is returned): the
 * log-scale likelihood ll of the short average before it is learnt (NaN while the state
 * has fewer than CC_LIK_MIN_N updates), then, with learn, the long-run distribution
 * learns the short average. */
double cc_lik_step(CcLikState *st, int short_n, int long_steps, double r, int learn);

/* The log-scale likelihood of a short average m against the long-run distribution learnt
 * so far (NaN before CC_LIK_MIN_N updates). */
double cc_lik_of(const CcLikState *st, double m);

/* The raw score of a z: ln(1 + |z|) (heavy tails weigh less than in |z|). */
double cc_lik_raw(double z);

/* Novelty (after the spatial check of Numenta's NAB detector): a value more than tol times
 * the range of the values seen so far beyond that range is one never seen in any context,
 * which a forecast that follows the series may take in its stride. */
typedef struct CcNovelty {
    double lo, hi; ///< the range of the values seen
    int32_t n;     ///< values seen (saturates at CC_NOVELTY_MAX_N)
} CcNovelty;

#define CC_NOVELTY_MAX_N (INT32_MAX / 2)

/* One value x: +1 when tol > 0, at least min_n values (and CC_LIK_MIN_N) were seen and x is
 * above hi by more than tol·(hi − lo), -1 below lo likewise, else 0; then the range takes x
 * in. */
int cc_novelty_step(CcNovelty *nv, double x, double tol, int32_t min_n);

/* Whether the stage's state read from a snapshot is in range (any short_n: a ring of
 * another length is restarted by cc_lik_step). */
int cc_lik_valid(const CcLikState *st, const CcNovelty *nv);

#endif

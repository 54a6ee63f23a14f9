/*
 * cc_anomaly_profile.h — the seasonal profile (cc_anomaly_profile.c): its bins and their
 * block in a cell, where a step falls in them, and one KPI's step against them.
 */
#ifndef CC_ANOMALY_PROFILE_H
#define CC_ANOMALY_PROFILE_H

#include "cc_anomaly_cell.h"

/* Where a step falls in the profile: day type, the bin it updates, and the two bins whose
 * centres surround it with the weight of the second. */
typedef struct ProfPos {
    int type;       ///< 0 weekday, 1 weekend (local time)
    int bin;        ///< bin of the step
    int b0, b1;     ///< bins interpolated between
    double w1;      ///< weight of b1
    double per_day; ///< samples per bin per day: profile_bin_s / step_seconds, ≥ 1
} ProfPos;

/* Profile bins per day the settings want; 0 = no profile. */
int cc_profile_bins(const CcAnomalySettings *s);

/* One allocation for a profile of NB bins per day: the means, the spreads (*spread), then
 * the counts (*counts). NULL on -ENOMEM. */
float *cc_profile_block(int NB, int F, float **spread, uint16_t **counts);

/* (Re)sizes the profile to NB bins per day, emptied, and restarts every KPI's profile
 * scale and sums (they belong to the old bins). 0 or -ENOMEM (profile unchanged). */
int cc_profile_alloc(CcAnomalyCell *c, int NB);

void cc_profile_pos(const CcAnomalySettings *s, int64_t step, int NB, ProfPos *p);

/* The profile z of x for KPI f before learning x: (x − usual value) / scale, NaN while
 * the bins or the scale are not warm; *ref gets the usual value (NaN: none). Then, when
 * learn (not in a maintenance window), x is learnt: the scale from the residual, the
 * step's bin from x, and (not while the cell fires) its hour's spread (PROFILE_SPREAD). */
double cc_profile_step(const CcAnomalySettings *s, CcAnomalyCell *c, const ProfPos *p, int f,
                       int learn, int firing, double x, double *ref);

#endif

/*
 * cc_anomaly_shape.h — shape novelty: a window of a KPI's recent values whose shape no
 * earlier window had (after the categories of adaptive resonance theory's fuzzy ART, as
 * the ARTime detector uses them on NAB). Every ds observed values are averaged into a
 * point; the last w points form a window. Windows are grouped into categories, each a box:
 * per point, the lowest and highest value its windows had. A window joins the category
 * whose box, grown to include it, is smallest, if that size (the sum over the points of
 * the box's widths, in units of the range of the KPI's values seen so far) is at most
 * (1 − rho)·w, and the box grows to include it. Otherwise it starts a new category (the
 * least recently used one makes room once there are cats of them): a shape not seen
 * before. It is reported as novel once warm windows have been seen, and only when the
 * previous new category is at least quiet windows old: a KPI that keeps making categories
 * is noisy, not changing shape.
 */
#ifndef CC_ANOMALY_SHAPE_H
#define CC_ANOMALY_SHAPE_H

#include <stdint.h>

#define CC_SHAPE_MAX_W 16
#define CC_SHAPE_MAX_CATS 64

typedef struct CcShapeParams {
    int w;      ///< points per window, 2..CC_SHAPE_MAX_W
    int ds;     ///< observed values averaged into a point, ≥ 1
    double rho; ///< vigilance in (0, 1): higher, narrower categories
    int cats;   ///< categories kept, 1..CC_SHAPE_MAX_CATS
    int warm;   ///< windows seen before a new category is reported
    int quiet;  ///< windows since the previous new category for this one to be reported
} CcShapeParams;

/* One KPI's stage, without its categories' boxes (the caller's, see cc_shape_step). */
typedef struct CcShape {
    double acc;               ///< sum of the values of the point being averaged
    int32_t acc_n;            ///< values in it, < ds
    int32_t pos, n_pt;        ///< next slot of pt, points in it (≤ w)
    int32_t n_cat;            ///< categories in use (≤ cats)
    int64_t windows;          ///< windows seen
    int64_t last_new;         ///< index of the window that made the last category, -1 none
    float pt[CC_SHAPE_MAX_W]; ///< ring of the last points
} CcShape;

void cc_shape_init(CcShape *sh);

/* One observed value x of the KPI, whose values so far span [lo, hi]; box (cats, 2, w) holds
 * each category's lowest then highest point values, used (cats) the window each category
 * last took. +1 or -1 when a window completes at this step with a shape to report (its last
 * point above or below the middle of the nearest box), 0 otherwise. */
int cc_shape_step(CcShape *sh, float *box, int64_t *used, const CcShapeParams *p, double x,
                  double lo, double hi);

/* One allocation for F KPIs' stages (each initialised) and their categories: the stages,
 * then used (F, cats) and box (F, cats, 2, w). NULL on -ENOMEM; free() the stages. */
CcShape *cc_shape_block(int F, int w, int cats, int64_t **used, float **box);

/* The stage's state is in range for these sizes (a snapshot's). */
int cc_shape_valid(const CcShape *sh, const float *box, int w, int ds, int cats);

#endif

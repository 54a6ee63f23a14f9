/*
 * cc_anomaly_shape.c — shape novelty (cc_anomaly_shape.h).
 */
#include "cc_anomaly_shape.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void cc_shape_init(CcShape *sh)
{
    memset(sh, 0, sizeof *sh);
    sh->last_new = -1;
}

/* Size of a box (lo, hi: w values each) grown to include window v, in units of range r. */
static double grown_size(const float *lo, const float *hi, const float *v, int w, double r)
{
    double s = 0;
    for (int i = 0; i < w; i++)
        s += (fmax(hi[i], v[i]) - fmin(lo[i], v[i])) / r;
    return s;
}

/* The category a new shape takes: a free one, else the least recently used. */
static int new_category(CcShape *sh, const int64_t *used, int cats)
{
    if (sh->n_cat < cats)
        return sh->n_cat++;
    int c = 0;
    for (int i = 1; i < sh->n_cat; i++)
        if (used[i] < used[c])
            c = i;
    return c;
}

int cc_shape_step(CcShape *sh, float *box, int64_t *used, const CcShapeParams *p, double x,
                  double lo, double hi)
{
    const int w = p->w;
    sh->acc += x;
    if (++sh->acc_n < p->ds)
        return 0;
    sh->pt[sh->pos] = (float)(sh->acc / sh->acc_n);
    sh->pos = (sh->pos + 1) % w;
    sh->acc = 0;
    sh->acc_n = 0;
    if (sh->n_pt < w && ++sh->n_pt < w)
        return 0;
    const double r = hi - lo;
    if (!(r > 0)) /* a constant KPI has one shape */
        return 0;
    float v[CC_SHAPE_MAX_W];
    for (int i = 0; i < w; i++)
        v[i] = sh->pt[(sh->pos + i) % w];
    int best = -1;
    double bs = INFINITY;
    for (int c = 0; c < sh->n_cat; c++) {
        const float *b = box + (size_t)c * 2 * w;
        double s = grown_size(b, b + w, v, w, r);
        if (s < bs)
            bs = s, best = c;
    }
    const int64_t win = sh->windows++;
    if (best >= 0 && bs <= (1 - p->rho) * w) {
        float *b = box + (size_t)best * 2 * w;
        for (int i = 0; i < w; i++) {
            b[i] = fminf(b[i], v[i]);
            b[w + i] = fmaxf(b[w + i], v[i]);
        }
        used[best] = win;
        return 0;
    }
    int dir = 0; /* the first category is no news */
    if (best >= 0) {
        const float *b = box + (size_t)best * 2 * w;
        dir = v[w - 1] >= 0.5f * (b[w - 1] + b[2 * w - 1]) ? 1 : -1;
    }
    const int c = new_category(sh, used, p->cats);
    memcpy(box + (size_t)c * 2 * w, v, (size_t)w * sizeof *v);
    memcpy(box + (size_t)c * 2 * w + w, v, (size_t)w * sizeof *v);
    used[c] = win;
    const int64_t prev = sh->last_new;
    sh->last_new = win;
    if (win < p->warm || (prev >= 0 && win - prev < p->quiet))
        return 0;
    return dir;
}

CcShape *cc_shape_block(int F, int w, int cats, int64_t **used, float **box)
{
    const size_t n = (size_t)F * (size_t)cats;
    CcShape *sh =
        malloc((size_t)F * sizeof *sh + n * sizeof **used + n * 2 * (size_t)w * sizeof **box);
    if (!sh)
        return NULL;
    for (int f = 0; f < F; f++)
        cc_shape_init(&sh[f]);
    *used = (int64_t *)(sh + F);
    *box = (float *)(*used + n);
    memset(*used, 0, n * sizeof **used);
    memset(*box, 0, n * 2 * (size_t)w * sizeof **box);
    return sh;
}

int cc_shape_valid(const CcShape *sh, const float *box, int w, int ds, int cats)
{
    if (sh->acc_n < 0 || sh->acc_n >= ds || sh->pos < 0 || sh->pos >= w || sh->n_pt < 0 ||
        sh->n_pt > w || sh->n_cat < 0 || sh->n_cat > cats || sh->windows < 0 || sh->last_new < -1 ||
        sh->last_new >= sh->windows || !isfinite(sh->acc))
        return 0;
    for (int i = 0; i < w; i++)
        if (!isfinite(sh->pt[i]))
            return 0;
    for (int c = 0; c < sh->n_cat; c++)
        for (int i = 0; i < w; i++)
            if (!(box[(size_t)c * 2 * w + i] <= box[(size_t)c * 2 * w + w + i]))
                return 0;
    return 1;
}

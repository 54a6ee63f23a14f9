/*
 * linear_baseline.h — the `linear` method of `cellcast eval`: NLinear (Zeng et al. 2023,
 * "Are Transformers Effective for Time Series Forecasting?") fitted in closed form, the
 * simplest strong baseline operators compare a forecaster with.
 *
 * Per KPI f, one map shared by every series of the file:
 *   x̂_{t+1+k} = x_t + Σ_i W_f[k][i]·(x_{t-L+1+i} − x_t) + b_f[k],   k < H, i < L,
 * the ridge regression (lib/cc_ridge.h) of the targets' change from the last value on the
 * window's change from the last value, over every origin t of the fit rows (per series, a
 * range: the rows before the test range, which a model may have trained on) whose L inputs
 * lie in the range and whose H targets lie in it and are observed. Inputs are the values as
 * the model sees them (missing ones imputed by the loader).
 *
 * Penalty: lambda · n · ms · |W|², n the origins and ms the inputs' mean square (so lambda
 * does not depend on the KPI's units or the data's length); the bias is not penalised. A
 * constant KPI (ms = 0) gets lambda · n, so W = 0 and the forecast is x_t + b: finite.
 * By default lambda is chosen per KPI on held-out rows, as a model's checkpoint is: the map
 * is fitted on the origins whose targets end before the last CCT_LINEAR_VAL_FRAC of each
 * series' fit rows for every lambda of 1e-4, 1e-3, 1e-2, 0.1, 1, the one with the lowest
 * MSE on that tail kept, and the map refitted with it on every origin
 * (CCT_LINEAR_LAMBDA_FALLBACK when the shorter rows hold fewer than 2·L origins or the tail
 * none). Chosen rather than fixed because it matters and no one value suits every set
 * (docs/results.md, "A linear baseline in every eval"): on ETTh1-96 the test MSE is 0.3765,
 * 0.3763, 0.3737, 0.3817 at lambda 0, 1e-3, 0.1, 1; on hourly Cell000113 the MASE 1.183 at
 * 1e-3 and 1.082 at 1 (chosen: 1).
 *
 * The window is cut to the largest L ≤ settings.window for which the fit rows hold at
 * least 2·L origins (a note says so); the method is skipped (-EAGAIN, the reason in msg)
 * when that leaves L < 2 or a KPI has fewer than 2·L origins with observed targets.
 * Forecasts at origins closer than L to a series' first row repeat its first value.
 */
#ifndef CCT_LINEAR_BASELINE_H
#define CCT_LINEAR_BASELINE_H

#include <stddef.h>

#include "cc_data.h"

#define CCT_LINEAR_VAL_FRAC 0.15        /* held-out tail of the fit rows choosing lambda */
#define CCT_LINEAR_LAMBDA_FALLBACK 1e-3 /* lambda when the rows are too short to choose */

typedef struct CctLinearSettings {
    int window;    ///< L, inputs per origin; cut to the fit rows (default 336, DLinear's)
    int horizon;   ///< H, steps forecast (required, ≥ 1)
    double lambda; ///< ridge penalty relative to the inputs' mean square; -1: chosen per KPI
                   ///< on the fit rows' tail (default -1)
} CctLinearSettings;

typedef struct CctLinear CctLinear;

void cct_linear_default_settings(CctLinearSettings *s);

/**
 * Fits the maps of the K KPIs kidx[0..K) (feature indices of ds) over the rows fit[s] of
 * every series s (empty ranges allowed). ds must outlive the fit. 0 (msg: "" or a note
 * that the window was cut), -EAGAIN (skipped: the reason in msg), -EINVAL (bad settings),
 * -ENOMEM, -EDOM (a singular system, lambda = 0 on collinear inputs: the reason in msg).
 */
int cct_linear_open(CctLinear **out, const CcDataset *ds, const CcRange *fit, const int *kidx,
                    int K, const CctLinearSettings *s, char *msg, size_t msglen);
void cct_linear_close(CctLinear **lb);

/** The window L used (after the cut). */
int cct_linear_window(const CctLinear *lb);

/** The penalty of the q-th KPI's map (given or chosen). */
double cct_linear_lambda(const CctLinear *lb, int q);

/** The forecast of the q-th KPI (kidx[q]) of series se (of the dataset fitted on) at origin
 * row t: out[k] for the targets t+1+k, k < H. */
void cct_linear_forecast(const CctLinear *lb, const CcSeries *se, int q, int t, double *out);

#endif

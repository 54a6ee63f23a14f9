/*
 * cc_model.h — the cellcast-tx/3 model of shared spec/model.md (and the tx/2 layout it
 * extends): hyperparameters, the parameter block (llm.c style: one allocation pointed into
 * by a struct of float*), and safetensors load/save.
 *
 * A tx/2 model is a model with linear_window = 0: its three tx/3 parts (the linear path,
 * norm.floor, calib.sigma_scale) have no elements, and it is normalised with the tx/2 floor
 * and served with unit calibration, exactly as before tx/3.
 *
 * Letters used in shape comments:
 *   F features (KPIs per cell)   P patch length      N cached patches   M norm look-back
 *   D d_model   H heads   DK = D/H   L layers   FF d_ff   HZ horizon   IN = P + 4
 *   R linear_window (tx/3; 0 in a tx/2 model)
 * Linear weights are PyTorch nn.Linear (out, in), row-major.
 */
#ifndef CC_MODEL_H
#define CC_MODEL_H

#include "cc_common.h"

#define CC_FORMAT_TX2 "cellcast-tx/2"
#define CC_FORMAT_TX3 "cellcast-tx/3"
/* The tx/2 layout, for callers that predate tx/3; a model's own is cc_hparams_format(). */
#define CC_FORMAT CC_FORMAT_TX2
#define CC_MAX_FEATURES 64
#define CC_FEATURE_NAME_MAX 64
#define CC_MAX_META 32
/* Sanity bounds: a weight file outside them is refused as absurd. */
#define CC_MAX_D_MODEL 4096
#define CC_MAX_LAYERS 64
#define CC_MAX_D_FF 16384
#define CC_MAX_PATCH_LEN 1024
#define CC_MAX_N_PATCHES 1024
#define CC_MAX_NORM_WINDOW 100000
#define CC_MAX_HORIZON 4096
/* R beyond a year of 5-minute steps is not a window anyone trains; it bounds the ring. */
#define CC_MAX_LINEAR_WINDOW 100000

typedef struct CcMetaPair {
    char key[64];
    char value[512];
} CcMetaPair;

typedef struct CcHparams {
    int n_features;       ///< F, number of KPIs per cell (default 8)
    int patch_len;        ///< P, steps per patch token (default 16)
    int n_patches;        ///< N, cached patch tokens (default 21)
    int norm_window;      ///< M, normalisation look-back in steps (default 336)
    int d_model;          ///< D (default 64)
    int n_heads;          ///< H, must divide D (default 4)
    int n_layers;         ///< L (default 2)
    int d_ff;             ///< FF, feed-forward width (default 128)
    int horizon;          ///< HZ, forecast steps (default 24)
    int linear_window;    ///< R, steps of the tx/3 linear path; 0 = none, a tx/2 model (default 0)
    int64_t step_seconds; ///< S, seconds per step (default 3600)
    int64_t tz_offset_s;  ///< added to unix time before the time features (default 0)
    char features[CC_MAX_FEATURES][CC_FEATURE_NAME_MAX]; ///< KPI names, channel_embed order
    /* Optional metadata (all strings). `extra` carries anything else (trainer's command...). */
    char name[128], version[64], trained_on[512], created_at[64];
    int n_extra;
    CcMetaPair extra[CC_MAX_META];
} CcHparams;

/** Parameter tensors in file order; CC_NUM_PARAM_ARRAYS entries. q,k,v are stacked in qkv_w. */
typedef struct CcParams {
    float *embed_w; // (D, IN)
    float *embed_b; // (D)
    float *chan;    // (F, D)
    float *qkv_w;   // (L, 3D, D)  rows [0,D) q_proj, [D,2D) k_proj, [2D,3D) v_proj
    float *qkv_b;   // (L, 3D)
    float *o_w;     // (L, D, D)
    float *o_b;     // (L, D)
    float *ln1_g;   // (L, D)
    float *ln1_b;   // (L, D)
    float *up_w;    // (L, FF, D)
    float *up_b;    // (L, FF)
    float *down_w;  // (L, D, FF)
    float *down_b;  // (L, D)
    float *ln2_g;   // (L, D)
    float *ln2_b;   // (L, D)
    float *head_w;  // (2HZ, D)  row 2k = mean of step k, row 2k+1 = its log-sigma
    float *head_b;  // (2HZ)
    /* tx/3 (no elements when R = 0): */
    float *lin_w;       // (HZ, R)  linear.weight, on r_i = xn_{t-R+1+i} - xn_t
    float *lin_b;       // (HZ)     linear.bias
    float *norm_floor;  // (F)      norm.floor, KPI units, >= 0
    float *sigma_scale; // (F, HZ)  calib.sigma_scale, > 0
} CcParams;
#define CC_NUM_PARAM_ARRAYS 21

typedef struct CcModel {
    CcHparams hp;
    CcParams w;   ///< points into block
    float *block; ///< all parameters, n_params floats
    size_t n_params;
} CcModel;

/** Fills the spec's defaults (F=8 with placeholder names kpi0..kpi7, S=3600). */
void cc_hparams_default(CcHparams *hp);

/** Checks ranges and consistency (H divides D, bounds above, unique feature names). */
int cc_hparams_validate(const CcHparams *hp, char *err, size_t errlen);

/** Element count of each of the CC_NUM_PARAM_ARRAYS arrays, in CcParams order; returns total. */
size_t cc_params_sizes(const CcHparams *hp, size_t sizes[CC_NUM_PARAM_ARRAYS]);

/** Points every array of `p` into `block` (which holds cc_params_sizes() floats). */
void cc_params_point(CcParams *p, const CcHparams *hp, float *block);

/** The format a model of these hparams is written as: CC_FORMAT_TX3 when R > 0. */
const char *cc_hparams_format(const CcHparams *hp);

/** calib.sigma_scale (F, HZ) of a tx/3 model, NULL for tx/2 (unit calibration): the
 *  CcForecast.sd_scale of the forecasts m makes (callers that rebuild a CcForecast from
 *  published y/mu/sigma set it from this). */
const float *cc_model_sd_scale(const CcModel *m);

/** Allocates a zeroed model for validated hparams (tx/3: floor 0, sigma_scale 1, linear path
 *  zero). 0, -EINVAL or -ENOMEM. *out owned by caller. */
int cc_model_open(CcModel **out, const CcHparams *hp, char *err, size_t errlen);

/** Deterministic random init: Xavier-uniform linears, zero biases, unit LayerNorm gains,
 *  N(0, 0.02) channel embedding; tx/3: linear.weight U(±1/sqrt(R)) (PyTorch's nn.Linear
 *  default), floor 0, sigma_scale 1. The tx/2 parts draw the same numbers as before tx/3. */
void cc_model_init_random(CcModel *m, uint64_t seed);

/** Loads a safetensors file (see spec). Refuses broken files with a message naming the
 *  problem and tensor: -EINVAL (bad content), -EIO (cannot read), -ENOMEM. */
int cc_model_open_file(CcModel **out, const char *path, char *err, size_t errlen);

/** Same from memory (used by the fuzz target). The buffer is not retained. */
int cc_model_open_buffer(CcModel **out, const uint8_t *buf, size_t len, char *err, size_t errlen);

/** Writes F32 safetensors with the spec's metadata, atomically (temp file + rename):
 *  cellcast-tx/3 when the model has a linear path (R > 0), cellcast-tx/2 otherwise. */
int cc_model_save(const CcModel *m, const char *path, char *err, size_t errlen);

/** Sets (or replaces) an extra metadata pair; -ENOSPC when full, -EINVAL if too long. */
int cc_hparams_set_extra(CcHparams *hp, const char *key, const char *value);

/** The value of an extra metadata pair, or NULL when the file has no such key. */
const char *cc_hparams_get_extra(const CcHparams *hp, const char *key);

/** Index of a feature name, or -1. */
int cc_hparams_feature_index(const CcHparams *hp, const char *name);

void cc_model_close(CcModel **m);

#endif

/* cmd_info.c — `cellcast info`: a model's hyperparameters, features and sizes as JSON. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cc_engine.h"
#include "cli.h"

int cmd_info(int argc, char **argv)
{
    const char *path = NULL;
    CcOpt opts[] = {
        CC_OPTS_STR("model", &path, "FILE", "the model", .short_name = 'm',
                    .flags = CC_OPT_REQUIRED),
    };
    const CcOptsSpec spec = {
        .prog = "cellcast info",
        .usage = "cellcast info --model FILE",
        .about = "Prints JSON: hyperparameters, feature names, metadata, parameter count,\n"
                 "bytes of KV state and of whole state per cell (f32 and 16-bit KV).",
        CC_OPTS_TABLE(opts),
    };
    int ret = 1;
    char err[512];
    CcModel *m = NULL;
    CcEngine *e32 = NULL, *e16 = NULL;
    json_t *j = NULL;
    int rc = cc_opts_parse(&spec, argc, argv, NULL);
    if (rc)
        return CLI_OPTS_EXIT(rc);
    if (cc_model_open_file(&m, path, err, sizeof err) < 0) {
        fprintf(stderr, "cellcast info: %s: %s\n", path, err);
        goto end;
    }
    CcEngineSettings s;
    cc_engine_default_settings(&s);
    if (cc_engine_open(&e32, m, &s, NULL, 0) < 0)
        goto end;
    s.kv_type = CC_KV_F16;
    if (cc_engine_open(&e16, m, &s, NULL, 0) < 0)
        goto end;
    const CcHparams *hp = &m->hp;
    json_t *feats = json_array(), *meta = json_object();
    for (int f = 0; f < hp->n_features; f++)
        json_array_append_new(feats, json_string(hp->features[f]));
    for (int i = 0; i < hp->n_extra; i++)
        json_object_set_new(meta, hp->extra[i].key, json_string(hp->extra[i].value));
    j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, "
                  "s:i, s:i, s:I, s:I}, s:o, s:I, s:o, s:{s:I, s:I, s:I, s:I, s:i}}",
                  "path", path, "format", cc_hparams_format(hp), "name", hp->name, "version",
                  hp->version, "trained_on", hp->trained_on, "created_at", hp->created_at,
                  "hparams", "n_features", hp->n_features, "patch_len", hp->patch_len, "n_patches",
                  hp->n_patches, "norm_window", hp->norm_window, "d_model", hp->d_model, "n_heads",
                  hp->n_heads, "n_layers", hp->n_layers, "d_ff", hp->d_ff, "horizon", hp->horizon,
                  "linear_window", hp->linear_window, "step_seconds", (json_int_t)hp->step_seconds,
                  "tz_offset_s", (json_int_t)hp->tz_offset_s, "features", feats, "n_params",
                  (json_int_t)m->n_params, "metadata", meta, "state_bytes_per_cell", "kv_f32",
                  (json_int_t)cc_engine_kv_bytes_per_cell(e32), "kv_16bit",
                  (json_int_t)cc_engine_kv_bytes_per_cell(e16), "total_f32",
                  (json_int_t)cc_engine_cell_bytes(e32), "total_16bit",
                  (json_int_t)cc_engine_cell_bytes(e16), "ring_steps", cc_engine_ring_steps(e32));
    if (!j)
        goto end;
    json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    putchar('\n');
    ret = 0;
end:
    json_decref(j);
    cc_engine_close(&e32);
    cc_engine_close(&e16);
    cc_model_close(&m);
    return ret;
}

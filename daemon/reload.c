/*
 * reload.c — SIGHUP and POST /v1/admin/reload: re-reads the configuration file (and the
 * --set overrides) and the model file; a broken file or model is refused and everything
 * stays as it was. Applies the reloadable keys through the modules' setters (settings.h),
 * swaps the model (cells keep their history; a model of another shape rebinds them,
 * logged), and reports the non-reloadable keys that changed (they need a restart).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alerts.h"
#include "cellcastd.h"
#include "incidents.h"
#include "silences.h"
#include "topology.h"
#include "http.h"
#include "ingest.h"
#include "auth.h"
#include "log.h"
#include "notify.h"
#include "reload.h"
#include "settings.h"
#include "utf8.h"

static size_t field_size(enum CcdCfgType t)
{
    switch (t) {
    case CCD_CFG_BOOL:
    case CCD_CFG_INT:
    case CCD_CFG_ENUM: return sizeof(int);
    case CCD_CFG_INT64: return sizeof(int64_t);
    case CCD_CFG_DOUBLE: return sizeof(double);
    case CCD_CFG_STRING: return sizeof(char *);
    case CCD_CFG_LIST: return sizeof(CcdStrList);
    case CCD_CFG_MAP: return sizeof(CcdStrMap);
    }
    return 0;
}

static int cfg_equal(const CcdConfigDef *def, const CcdConfig *a, const CcdConfig *b)
{
    const char *pa = (const char *)a + def->offset, *pb = (const char *)b + def->offset;
    switch (def->type) {
    case CCD_CFG_STRING: {
        const char *sa = *(char *const *)pa, *sb = *(char *const *)pb;
        return !strcmp(sa ? sa : "", sb ? sb : "");
    }
    case CCD_CFG_LIST: {
        const CcdStrList *la = (const CcdStrList *)pa, *lb = (const CcdStrList *)pb;
        if (la->n != lb->n)
            return 0;
        for (int i = 0; i < la->n; i++)
            if (strcmp(la->items[i], lb->items[i]))
                return 0;
        return 1;
    }
    case CCD_CFG_MAP: {
        const CcdStrMap *ma = (const CcdStrMap *)pa, *mb = (const CcdStrMap *)pb;
        if (ma->n != mb->n)
            return 0;
        for (int i = 0; i < ma->n; i++)
            if (strcmp(ma->items[i].key, mb->items[i].key) ||
                strcmp(ma->items[i].value, mb->items[i].value))
                return 0;
        return 1;
    }
    default: return !memcmp(pa, pb, field_size(def->type));
    }
}

static int same_shape(const CcHparams *a, const CcHparams *b)
{
    return a->patch_len == b->patch_len && a->n_patches == b->n_patches &&
           a->norm_window == b->norm_window && a->d_model == b->d_model &&
           a->n_heads == b->n_heads && a->n_layers == b->n_layers && a->d_ff == b->d_ff &&
           a->horizon == b->horizon && a->linear_window == b->linear_window; /* R sizes the ring */
}

int ccd_reload(Ccd *d, json_t **report, char *err, size_t errlen)
{
    CcdConfig nc;
    CcModel *nm = NULL;
    CcdSettings ns;
    int have_ns = 0;
    char path[PATH_MAX], e2[512];
    int rc, shape_changed = 0;
    CcdSilences *silences = NULL; /* silences.file, read before anything is applied */
    json_t *changed = json_array(), *restart = json_array();
    if (report)
        *report = NULL;
    ccd_notify_reloading(d->notify);
    memset(&nc, 0, sizeof nc);
    if ((rc = ccd_config_read(&nc, d->config_path, d->sets, d->n_sets, e2, sizeof e2)) ||
        (rc = ccd_config_validate(&nc, e2, sizeof e2))) {
        cc_errf(err, errlen, rc, "configuration refused: %s", e2);
        goto fail;
    }
    char learned[4096]; /* model.source kafka: the learned file once there is one */
    if ((rc = ccd_model_open(&nm, ccd_model_serve_path(&nc, learned, sizeof learned), path,
                             sizeof path, e2, sizeof e2))) {
        cc_errf(err, errlen, rc, "model '%s' refused: %s", path, e2);
        goto fail;
    }
    if (!ccd_model_same_io(&d->model->hp, &nm->hp)) {
        rc = cc_errf(err, errlen, -EINVAL,
                     "model '%s' refused: its KPIs, step length or horizon differ from the model "
                     "served (cells hold history of those KPIs; that change needs a restart)",
                     path);
        goto fail;
    }
    if ((rc = ccd_settings_from_config(&ns, &nc, &nm->hp, e2, sizeof e2))) {
        cc_errf(err, errlen, rc, "configuration refused: %s", e2);
        goto fail;
    }
    have_ns = 1;
    if ((rc = ccd_silences_reload_check(d, nc.silences_file, &silences, e2, sizeof e2))) {
        cc_errf(err, errlen, rc, "configuration refused: %s", e2);
        goto fail;
    }
    /* everything checked: apply between batches */
    ccd_sched_drain(d->sched);
    ccd_alerts_flush(d);
    shape_changed = !same_shape(&d->model->hp, &nm->hp);
    if ((rc = cc_engine_set_model(d->engine, nm))) {
        cc_errf(err, errlen, rc, "the engine refused model '%s'", path);
        goto fail;
    }
    if (shape_changed) {
        int rebind_failed, rebound = ccd_cells_rebind(d->cells, &rebind_failed);
        if (rebound < 0) { /* the imputed-flag rings: the cells keep the old ones */
            LOG_ERROR("reload", "out of memory resizing the cells' imputed flags");
            rebound = 0;
        }
        LOG_WARN("reload",
                 "model '%s' has another shape (P=%d N=%d M=%d D=%d H=%d L=%d FF=%d): "
                 "caches of %d cell(s) are rebuilt at their next step%s",
                 path, nm->hp.patch_len, nm->hp.n_patches, nm->hp.norm_window, nm->hp.d_model,
                 nm->hp.n_heads, nm->hp.n_layers, nm->hp.d_ff, rebound,
                 rebind_failed ? " (some were reset)" : "");
    }
    CcModel *old = d->model;
    d->model = nm;
    nm = NULL;
    cc_model_close(&old);
    if (snprintf(d->model_name, sizeof d->model_name, "%s",
                 d->model->hp.name[0] ? d->model->hp.name : path) >= (int)sizeof d->model_name)
        d->model_name[sizeof d->model_name - 1] = 0;
    ccd_utf8_fix(d->model_name); /* a path cut in a character, or not UTF-8: JSON wants it */
    ccd_model_quality_log(&d->model->hp, "reload");
    ccd_alerts_set_settings(d, &ns.anomaly);
    /* reloadable keys: swap the new values in; report the others that changed */
    int n_defs;
    const CcdConfigDef *defs = ccd_config_defs(&n_defs);
    for (int i = 0; i < n_defs; i++) {
        const CcdConfigDef *def = &defs[i];
        if (cfg_equal(def, &d->cfg, &nc))
            continue;
        if (!def->reloadable) {
            json_array_append_new(restart, json_string(def->name));
            LOG_WARN("reload", "%s changed but needs a restart: keeping the running value",
                     def->name);
            continue;
        }
        char tmp[64];
        size_t sz = field_size(def->type);
        memcpy(tmp, (char *)&d->cfg + def->offset, sz);
        memcpy((char *)&d->cfg + def->offset, (char *)&nc + def->offset, sz);
        memcpy((char *)&nc + def->offset, tmp, sz);
        json_array_append_new(changed, json_string(def->name));
        LOG_INFO("reload", "%s changed", def->name);
    }
    ccd_config_free(&nc);
    ccd_settings_free(&ns);
    ccd_topology_reload(d); /* the file may have changed without its path */
    ccd_silences_reload_apply(d, &silences, 1);
    ccd_incidents_reconfigure(d);
    /* the keys in effect (the running values of the keys that need a restart) to the
     * modules that read them at setup */
    if ((rc = ccd_settings_from_config(&ns, &d->cfg, &d->model->hp, e2, sizeof e2)) == 0) {
        ccd_log_level = ns.log_level;
        ccd_sched_set_batching(d->sched, ns.batch_steps, ns.batch_ms);
        ccd_cells_set_settings(d->cells, &ns.cells);
        if ((rc = ccd_reopen_decoder(d, &ns.kpi, e2, sizeof e2)))
            LOG_ERROR("reload", "ingest field mapping: %s (the previous mapping stays)", e2);
        ccd_settings_free(&ns);
    } else {
        LOG_ERROR("reload", "%s (the previous ingest and batching settings stay)", e2);
    }
    d->reloads_ok++;
    LOG_INFO("reload", "reloaded: model '%s' from %s%s; %zu key(s) changed, %zu need a restart",
             d->model_name, path, shape_changed ? " (new shape)" : "", json_array_size(changed),
             json_array_size(restart));
    if (report)
        *report = json_pack("{s:b, s:s, s:s, s:b, s:o, s:o}", "reloaded", 1, "model", d->model_name,
                            "model_path", path, "shape_changed", shape_changed, "changed", changed,
                            "restart_needed", restart);
    else {
        json_decref(changed);
        json_decref(restart);
    }
    ccd_notify_ready(d->notify, "reloaded");
    return 0;
fail:
    ccd_silences_reload_apply(d, &silences, 0);
    if (have_ns)
        ccd_settings_free(&ns);
    cc_model_close(&nm);
    ccd_config_free(&nc);
    json_decref(changed);
    json_decref(restart);
    d->reloads_failed++;
    LOG_ERROR("reload", "%s; still serving model '%s' with the previous configuration", err,
              d->model_name);
    ccd_notify_ready(d->notify, "reload refused; previous model and configuration kept");
    ccd_notify_status(d->notify, "reload refused: %s", err);
    return rc;
}

int ccd_h_admin_reload(CcdReq *r)
{
    Ccd *d = r->d;
    int st = ccd_require_admin(r);
    if (st)
        return st;
    json_t *rep = NULL;
    char err[768];
    LOG_INFO("reload", "POST /v1/admin/reload");
    int rc = ccd_reload(d, &rep, err, sizeof err);
    if (rc)
        return ccd_problem(r, 422, "reload-refused",
                           "%s; the previous model and configuration keep serving", err);
    return ccd_json(r, 200, rep);
}

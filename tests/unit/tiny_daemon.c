/*
 * tiny_daemon.c — the daemon's state on the tiny golden model for the unit tests that link
 * daemon/ modules (tiny_daemon.h).
 */
#include "tiny_daemon.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "alerts.h"
#include "cells.h"
#include "config.h"
#include "testlib.h"

void tiny_daemon_open(Ccd *d, CcdSettings *st)
{
    char err[256];
    assert_int_equal(ccd_config_init(&d->cfg), 0);
    assert_int_equal(cc_model_open_file(&d->model, TL_TINY_MODEL, err, sizeof err), 0);
    assert_int_equal(ccd_settings_from_config(st, &d->cfg, &d->model->hp, err, sizeof err), 0);
    assert_int_equal(cc_engine_open(&d->engine, d->model, &st->engine, NULL, 0), 0);
    assert_int_equal(ccd_cells_open(&d->cells, d->engine, &st->cells), 0);
    assert_int_equal(ccd_alerts_open(d, &st->anomaly, "", err, sizeof err), 0);
}

void tiny_daemon_close(Ccd *d, CcdSettings *st)
{
    ccd_alerts_close(d);
    ccd_cells_close(&d->cells);
    cc_engine_close(&d->engine);
    ccd_settings_free(st);
    cc_model_close(&d->model);
    ccd_config_free(&d->cfg);
}

/* test_engine_oom.c — every allocation failure in the engine (open, cells, the step's
 * batch list, a cell's growing ring and first caches, a model swap to other shapes) returns -ENOMEM
 * and leaves nothing behind (LeakSanitizer checks the latter in the ASan build). See failalloc.h.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "cc_engine.h"
#include "failalloc.h"
#include "testlib.h"

static CcModel *model(int d_model)
{
    CcHparams hp;
    tl_hparams_tiny(&hp);
    hp.n_features = 3, hp.d_model = d_model, hp.n_layers = 2;
    CcModel *m = NULL;
    tl_model_open(&m, &hp, 1);
    return m;
}

/* Opens an engine (2 threads) and 3 cells, steps them 20 times, swaps to a model of other
 * shapes and rebinds; returns 0 or the first negative code, cleaning up either way. */
static int scenario(const CcModel *m, const CcModel *m2)
{
    CcEngineSettings s;
    cc_engine_default_settings(&s);
    s.n_threads = 2;
    s.keep_attention = 1;
    CcEngine *e = NULL;
    CcCell *cells[3] = {0};
    int ret = cc_engine_open(&e, m, &s, NULL, 0);
    for (int i = 0; i < 3 && !ret; i++)
        ret = cc_cell_open(&cells[i], e);
    float v[3] = {1, 2, 3};
    for (int t = 0; t < 20 && !ret; t++) {
        CcStepInput in[3];
        for (int i = 0; i < 3; i++)
            in[i] = (CcStepInput){cells[i], 100 + t, v};
        int st[3];
        ret = cc_engine_step(e, in, 3, st);
        for (int i = 0; i < 3 && !ret; i++) /* a cell's ring or caches: refused alone */
            ret = st[i];
    }
    if (!ret)
        ret = cc_engine_set_model(e, m2);
    for (int i = 0; i < 3 && !ret; i++)
        ret = cc_cell_rebind(cells[i], e);
    for (int i = 0; i < 3; i++)
        cc_cell_close(&cells[i]);
    cc_engine_close(&e);
    return ret;
}

static void test_every_allocation_failure(void **state)
{
    (void)state;
    CcModel *m = model(8), *m2 = model(16);
    long k;
    for (k = 0;; k++) {
        failalloc_arm(k);
        int ret = scenario(m, m2);
        failalloc_disarm();
        if (!failalloc_failed()) {
            assert_int_equal(ret, 0);
            break;
        }
        if (ret != -ENOMEM)
            fail_msg("allocation %ld failed: got %d, want -ENOMEM", k, ret);
    }
    printf("engine: %ld allocation failure points, each -ENOMEM\n", k);
    assert_true(k > 10);
    cc_model_close(&m);
    cc_model_close(&m2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_allocation_failure)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

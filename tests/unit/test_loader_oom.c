/*
 * test_loader_oom.c — allocation failures in the weight-file code are returned as -ENOMEM
 * with a message, never a crash or a leak (LeakSanitizer checks the latter in the ASan CI
 * build). The executable is linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc, so
 * every allocation made by the library's own code goes through the wrappers below. The k-th
 * allocation fails, for every k until the call succeeds without reaching k. jansson (a
 * shared library) is not wrapped: its parser reports some failed allocations as syntax
 * errors, which the loader cannot tell apart, so only our own allocations are failed.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <dirent.h>
#include <limits.h>
#include <unistd.h>

#include "cc_model.h"
#include "cc_safetensors.h"

#include "failalloc.h"
#include "testlib.h"

static CcModel *tiny_model(void)
{
    CcHparams hp;
    tl_hparams_tiny(&hp);
    hp.n_layers = 2;
    snprintf(hp.name, sizeof hp.name, "oom");
    cc_hparams_set_extra(&hp, "note", "x");
    CcModel *m = NULL;
    tl_model_open(&m, &hp, 3);
    return m;
}

static void test_load_buffer_oom(void **state)
{
    (void)state;
    CcModel *src = tiny_model();
    char dir[] = "/tmp/cc_test_oom_XXXXXX", path[PATH_MAX], err[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    assert_int_equal(cc_model_save(src, path, err, sizeof err), 0);
    FILE *f = fopen(path, "rb");
    uint8_t buf[1 << 16];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    long k;
    for (k = 0;; k++) {
        CcModel *m = NULL;
        failalloc_arm(k);
        int ret = cc_model_open_buffer(&m, buf, len, err, sizeof err);
        failalloc_disarm();
        if (!failalloc_failed()) {
            assert_int_equal(ret, 0);
            assert_memory_equal(m->block, src->block, src->n_params * sizeof(float));
            cc_model_close(&m);
            break;
        }
        if (ret != -ENOMEM)
            fail_msg("allocation %ld failed: got %d (%s), want -ENOMEM", k, ret, err);
        assert_null(m);
        assert_non_null(strstr(err, "out of memory"));
    }
    print_message("cc_model_open_buffer: %ld allocation failure points, all -ENOMEM\n", k);
    /* cc_model_open_file: same through the file */
    for (k = 0;; k++) {
        CcModel *m = NULL;
        failalloc_arm(k);
        int ret = cc_model_open_file(&m, path, err, sizeof err);
        failalloc_disarm();
        if (!failalloc_failed()) {
            assert_int_equal(ret, 0);
            cc_model_close(&m);
            break;
        }
        if (ret != -ENOMEM)
            fail_msg("allocation %ld failed: got %d (%s), want -ENOMEM", k, ret, err);
        assert_non_null(strstr(err, path));
    }
    unlink(path);
    rmdir(dir);
    cc_model_close(&src);
}

static void test_save_oom(void **state)
{
    (void)state;
    CcModel *m = tiny_model();
    char dir[] = "/tmp/cc_test_oom_XXXXXX", path[PATH_MAX], err[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    long k;
    for (k = 0;; k++) {
        failalloc_arm(k);
        int ret = cc_model_save(m, path, err, sizeof err);
        failalloc_disarm();
        if (!failalloc_failed()) {
            assert_int_equal(ret, 0);
            break;
        }
        if (ret != -ENOMEM)
            fail_msg("allocation %ld failed: got %d (%s), want -ENOMEM", k, ret, err);
        assert_non_null(strstr(err, "out of memory"));
        DIR *d = opendir(dir); // nothing left behind
        struct dirent *de;
        while ((de = readdir(d)))
            if (de->d_name[0] != '.')
                fail_msg("allocation %ld: '%s' left in %s", k, de->d_name, dir);
        closedir(d);
    }
    print_message("cc_model_save: %ld allocation failure points, all -ENOMEM\n", k);
    unlink(path);
    rmdir(dir);
    cc_model_close(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_buffer_oom),
        cmocka_unit_test(test_save_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

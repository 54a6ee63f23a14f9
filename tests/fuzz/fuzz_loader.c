/*
 * fuzz_loader.c — libFuzzer target for the weight-file loader: any byte string given to
 * cc_model_open_buffer() must be refused (-EINVAL) or loaded into a model that passes
 * cc_hparams_validate(), never crash, leak or read out of bounds (ASan/UBSan).
 * Build: meson setup -Dfuzz=true with CC=clang; run: .ci/fuzz.sh.
 * Seeds: tests/data/fuzz_corpus/.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cc_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    CcModel *m = NULL;
    char err[512];
    int ret = cc_model_open_buffer(&m, data, size, err, sizeof err);
    if (ret != 0 && ret != -EINVAL && ret != -ENOMEM)
        abort(); // an unexpected error class is a bug
    if (ret == 0) {
        if (!m || cc_hparams_validate(&m->hp, err, sizeof err) != 0)
            abort();
        volatile float sink = 0; // touch every parameter (ASan checks the block)
        for (size_t i = 0; i < m->n_params; i++)
            sink += m->block[i];
        (void)sink;
    } else if (m || !memchr(err, 0, sizeof err) || !err[0]) {
        abort(); // failures leave no model and always explain themselves
    }
    cc_model_close(&m);
    return 0;
}

/*
 * cc_safetensors.h — a defensive reader and a writer of the safetensors format
 * (https://github.com/huggingface/safetensors): an 8-byte little-endian header length n,
 * n bytes of JSON header, then the raw little-endian tensor data. The header is an object
 * mapping tensor names to {"dtype", "shape", "data_offsets": [begin, end)} (offsets
 * relative to the start of the data section) plus an optional "__metadata__" object of
 * string values.
 *
 * Reading (cc_st_parse) checks everything before anything is trusted, and refuses with
 * -EINVAL and a message naming the problem (and the tensor):
 *  - buffer shorter than 8 bytes, header length past the end of the buffer or absurd
 *    (> CC_ST_MAX_HEADER bytes), JSON that does not parse, a header that is not an object,
 *    duplicate keys (duplicate tensor names);
 *  - "__metadata__" that is not an object of strings;
 *  - a tensor entry that is not an object, a missing or mistyped "dtype", "shape" or
 *    "data_offsets"; a dtype other than F32, F16, BF16 (known ones such as I32 or F64 are
 *    refused by name); more than CC_ST_MAX_DIMS dimensions; negative dimensions; a shape
 *    whose element count overflows;
 *  - end < begin, an end past the data section (a truncated file), a byte size different
 *    from product(shape) x dtype size, and two tensors whose byte ranges overlap.
 * Gaps between tensors and trailing bytes after the last one are tolerated (the format's
 * reference implementation refuses them; nothing is unsafe about them).
 * The parsed view points into the caller's buffer: keep the buffer alive and unchanged
 * until cc_st_close(). Tensor data may be unaligned; cc_st_to_f32() copies it safely.
 *
 * Writing (cc_st_write_file / cc_st_write_buffer) takes F32 arrays and stores each as F32,
 * F16 or BF16 (round to nearest even), with the metadata pairs; the JSON header is padded
 * with spaces to a multiple of 8 bytes so that the data section is 8-byte aligned, as the
 * format allows. Tensors are stored contiguously in the order given.
 *
 * How cc_model_open_file() (cc_model_io.c) uses this, beyond the checks above:
 *  - metadata "format" must be exactly "cellcast-tx/3" or "cellcast-tx/2"; tx/3 requires
 *    "linear_window" (1..CC_MAX_LINEAR_WINDOW), tx/2 must not carry it; the integer
 *    hyperparameters are parsed strictly (optional '-', decimal digits, no leading zeros,
 *    spaces, '+' or exponent); "features" is a comma-separated list of names (none empty,
 *    no leading or trailing whitespace or control characters); other keys go to
 *    CcHparams.extra; a value that does not fit its CcHparams field is refused, never
 *    truncated;
 *  - hyperparameters pass cc_hparams_validate() and every tensor of the spec's table must
 *    be present with exactly its shape before the model is allocated (so the allocation is
 *    bounded by the file size); the number of names in "features" must equal the rows of
 *    channel_embed.weight;
 *  - tensors not in the table are REFUSED (not ignored): an extra tensor means the file was
 *    made for another architecture or another n_layers, and serving it would silently drop
 *    weights. cc_model_open_file has no logger to warn through, so refusing is the honest choice;
 *  - every weight must be finite (NaN/Inf refused, naming the tensor and element); tx/3:
 *    norm.floor >= 0 and calib.sigma_scale > 0 (refused naming the element and KPI);
 *  - files are read with one fread into memory (no mmap: a file truncated under our feet
 *    would raise SIGBUS); files larger than CC_ST_MAX_FILE bytes are refused.
 */
#ifndef CC_SAFETENSORS_H
#define CC_SAFETENSORS_H

#include <stdio.h>

#include "cc_common.h"

#define CC_ST_MAX_HEADER (100u << 20)      ///< header lengths above 100 MB are absurd
#define CC_ST_MAX_FILE ((uint64_t)1 << 32) ///< cc_model_open_file refuses larger files (4 GiB)
#define CC_ST_MAX_DIMS 8

typedef enum CcStDtype {
    CC_ST_F32 = 0,
    CC_ST_F16 = 1,
    CC_ST_BF16 = 2,
} CcStDtype;

/** One tensor of a parsed file. `data` points into the parsed buffer (maybe unaligned). */
typedef struct CcStTensor {
    const char *name; ///< NUL-terminated, owned by the CcSafetensors
    CcStDtype dtype;
    int ndim; ///< 0 (a scalar) .. CC_ST_MAX_DIMS
    int64_t shape[CC_ST_MAX_DIMS];
    size_t numel;        ///< product of shape (1 for a scalar)
    size_t begin, end;   ///< data_offsets, relative to the data section
    const uint8_t *data; ///< data section + begin; end - begin bytes
} CcStTensor;

/** Opaque parsed file: tensors in header order and metadata pairs. */
typedef struct CcSafetensors CcSafetensors;

/** Parses and checks a whole safetensors file held in buf[0..len). 0, -EINVAL (bad file,
 *  message in err) or -ENOMEM. On success *out is owned by the caller (cc_st_close) and
 *  points into buf, which must outlive it. */
int cc_st_parse(CcSafetensors **out, const uint8_t *buf, size_t len, char *err, size_t errlen);

void cc_st_close(CcSafetensors **st);

/** Number of tensors, and tensor i (0 <= i < count) in header order. */
int cc_st_count(const CcSafetensors *st);
const CcStTensor *cc_st_tensor(const CcSafetensors *st, int i);

/** Tensor by name, or NULL. */
const CcStTensor *cc_st_find(const CcSafetensors *st, const char *name);

/** Number of metadata pairs, and pair i's key and value (NUL-terminated, owned by st). */
int cc_st_meta_count(const CcSafetensors *st);
const char *cc_st_meta_key(const CcSafetensors *st, int i);
const char *cc_st_meta_value(const CcSafetensors *st, int i);

/** Metadata value for key, or NULL when absent. */
const char *cc_st_meta_get(const CcSafetensors *st, const char *key);

/** Converts the tensor's numel elements to float into dst (F16/BF16 exactly widened). */
void cc_st_to_f32(const CcStTensor *t, float *dst);

/** Name of a dtype ("F32", "F16", "BF16"); size in bytes of one element. */
const char *cc_st_dtype_name(CcStDtype dt);
size_t cc_st_dtype_size(CcStDtype dt);

/** A tensor to write: numel = product(shape) floats at data, stored as dtype. */
typedef struct CcStWriteTensor {
    const char *name;
    const float *data;
    int ndim;
    int64_t shape[CC_ST_MAX_DIMS];
    CcStDtype dtype; ///< storage type in the file (default CC_ST_F32 = 0)
} CcStWriteTensor;

/** Writes n tensors and n_meta metadata pairs (keys[i] -> values[i]; none may be
 *  "__metadata__" or a tensor name) to f. 0, -EINVAL (bad description, message in err),
 *  -EIO (write error) or -ENOMEM. Does not fflush or close f. */
int cc_st_write_file(FILE *f, const CcStWriteTensor *tensors, int n, const char *const *keys,
                     const char *const *values, int n_meta, char *err, size_t errlen);

/** Same into a malloc'd buffer: *out (free() it) of *outlen bytes. */
int cc_st_write_buffer(uint8_t **out, size_t *outlen, const CcStWriteTensor *tensors, int n,
                       const char *const *keys, const char *const *values, int n_meta, char *err,
                       size_t errlen);

#endif

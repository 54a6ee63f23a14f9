/*
 * cc_kpi.h — decoding of KPI messages (proto/kpi.schema.json) into per-step records.
 * Pure lib/: no Kafka, no sockets; the same decoder serves Kafka and `POST /v1/kpis`.
 *
 * A message is one JSON object (a record) or a JSON array of records:
 *
 *   {"cell": "enb-17/3", "ts": "2024-05-01T10:00:00Z", "kpis": {"dl_prb": 41.5, ...}}
 *   [{"cell": "A1", "ts": 1714557600, "dl_prb": 41.5, "ul_prb": 12}, ...]
 *
 * Record members (names configurable in CcKpiSettings):
 *  - cell id (`cell`): a string of 1..64 characters from [A-Za-z0-9._:/-], or a
 *    non-negative integer ≤ 2^53, which is used as its decimal text ("17").
 *  - timestamp (`ts`): an RFC 3339 date-time string (`T`, `t` or one space between date
 *    and time; fraction of seconds allowed and floored; `Z`/`z` or ±HH:MM offset required),
 *    or a JSON number: unix seconds when 0 ≤ v < 1e11, unix milliseconds when
 *    1e11 ≤ v < 253402300800000 (year 9999); fractions are floored. The same 1e11
 *    threshold as cc_data.h: 1e11 s is the year 5138, 1e11 ms is March 1973, so the two
 *    ranges cannot be confused for any date a KPI can carry.
 *  - KPI values: if the record has a `kpis` member it must be an object and only its
 *    members are KPI values; otherwise every top-level member other than the cell id and
 *    timestamp is a candidate KPI value. Only fields named in the field mapping feed the
 *    model; the others are ignored and counted (`unmapped_fields`).
 *    A value is a JSON number (multiplied by the mapping's scale) or null (= not measured
 *    this step; counted in `null_values`, the feature is absent from the record).
 *    The strings "NaN", "Infinity", "-Infinity", "inf", "-inf" (any case) are refused as
 *    non_finite; any other string, a boolean, an array or an object is bad_value_type.
 *
 * Step rule: step = ts / S with CC_KPI_ALIGN_FLOOR (default): a sample stamped anywhere
 * in [p·S, (p+1)·S) belongs to step p (PM counters are stamped with the begin of their
 * granularity period). CC_KPI_ALIGN_NEAREST rounds to the nearest step (cc_data.h's rule
 * for CSV files); CC_KPI_ALIGN_EXACT refuses a ts that is not a multiple of S
 * (misaligned_ts). The record keeps the original ts (in seconds).
 *
 * Validation: a record is refused as a whole (no partial record) with the first reason
 * found, in this order: not_object, missing_cell, bad_cell_id, missing_ts, bad_ts,
 * misaligned_ts, then per mapped value bad_value_type, non_finite, absurd_value, and
 * finally no_kpis when no mapped feature has a value. absurd_value: after scaling, outside
 * the feature's [min, max] (settings) or |x| > max_abs (default 1e15) or not representable
 * as a finite float. Whole-message errors: oversize (longer than max_message_bytes, not
 * parsed), not_json, not_object (neither object nor array), empty (empty array),
 * too_many_records (array longer than max_records; no element is decoded).
 * One bad element of an array never drops the good ones.
 *
 * Several fields mapped to the same feature are aliases; when one record carries more than
 * one of them, the one listed first in the mapping wins. Numbers are read as doubles,
 * correctly rounded (jansson's JSON_DECODE_INT_AS_REAL), so big integers do not fail; a
 * literal too large for a double (1e400) is a JSON error of jansson's, reported as not_json.
 * A member name given twice in one object: the last one counts (jansson's rule).
 *
 * Speed: well-formed messages of valid records (the normal case) are decoded by a one-pass
 * scanner without a JSON tree (~0.5 µs for a record of 8 KPIs vs ~10 µs through jansson);
 * any other message takes the reference path (jansson) with identical results
 * (CcKpiSettings.jansson_only forces the reference path).
 *
 * Out of memory: cc_kpi_decode returns -ENOMEM (never aborts); the batch is then empty.
 * Thread-safety: one decoder per thread (it owns the output arrays).
 */
#ifndef CC_KPI_H
#define CC_KPI_H

#include <stddef.h>
#include <stdint.h>

#include "cc_common.h"
#include "cc_model.h"

#define CC_KPI_CELL_ID_MAX 64
#define CC_KPI_MSG_MAX 160

/** Why a message or an element of it was refused. Names (cc_kpi_reason_name) are stable:
 *  they are Prometheus label values and dead-letter headers. */
enum CcKpiReason {
    CC_KPI_OK = 0,
    CC_KPI_OVERSIZE,         ///< "oversize"
    CC_KPI_NOT_JSON,         ///< "not_json"
    CC_KPI_NOT_OBJECT,       ///< "not_object"
    CC_KPI_EMPTY,            ///< "empty"
    CC_KPI_TOO_MANY_RECORDS, ///< "too_many_records"
    CC_KPI_MISSING_CELL,     ///< "missing_cell"
    CC_KPI_BAD_CELL_ID,      ///< "bad_cell_id"
    CC_KPI_MISSING_TS,       ///< "missing_ts"
    CC_KPI_BAD_TS,           ///< "bad_ts"
    CC_KPI_MISALIGNED_TS,    ///< "misaligned_ts"
    CC_KPI_BAD_VALUE_TYPE,   ///< "bad_value_type"
    CC_KPI_NON_FINITE,       ///< "non_finite"
    CC_KPI_ABSURD_VALUE,     ///< "absurd_value"
    CC_KPI_NO_KPIS,          ///< "no_kpis"
    CC_KPI_N_REASONS
};

enum CcKpiAlign {
    CC_KPI_ALIGN_FLOOR = 0,   ///< step = floor(ts / S)
    CC_KPI_ALIGN_NEAREST = 1, ///< step = round(ts / S), halves up
    CC_KPI_ALIGN_EXACT = 2,   ///< ts must be a multiple of S, else misaligned_ts
};

/** One entry of the field mapping: message field → model feature. */
typedef struct CcKpiMapEntry {
    const char *field;        ///< field name in the message (required)
    const char *feature_name; ///< target feature by name (looked up in feature_names), or NULL
    int feature;              ///< target feature index when feature_name is NULL
    double scale;             ///< value multiplied by this; 0 means 1 (default 1)
} CcKpiMapEntry;

typedef struct CcKpiSettings {
    int n_features;                   ///< F, 1..CC_MAX_FEATURES (default 8)
    int64_t step_seconds;             ///< S (default 3600)
    enum CcKpiAlign align;            ///< step rule (default CC_KPI_ALIGN_FLOOR)
    const char *const *feature_names; ///< (F) model feature names, or NULL (default NULL).
                                      ///< Each name maps to itself with scale 1 unless a
                                      ///< map entry uses that field name.
    const CcKpiMapEntry *map;         ///< explicit mapping entries (default none)
    int n_map;
    const double *min, *max;  ///< (F) per-feature bounds after scaling, or NULL
                              ///< (default NULL = only max_abs)
    double max_abs;           ///< |x| above this is absurd (default 1e15)
    const char *cell_field;   ///< (default "cell")
    const char *ts_field;     ///< (default "ts")
    const char *kpis_field;   ///< (default "kpis")
    size_t max_message_bytes; ///< (default 1 MiB)
    int max_records;          ///< records per message (default 100000)
    int jansson_only;         ///< 1: decode every message on the reference path
                              ///< (jansson); 0 (default): a fast scanner decodes
                              ///< messages whose elements are all valid records
                              ///< and hands the rest to the reference path. The
                              ///< results are the same (test_kpi, fuzz_kpi).
} CcKpiSettings;

typedef struct CcKpiRecord {
    char cell_id[CC_KPI_CELL_ID_MAX + 1];
    int element;                   ///< index in the message's array (0 for an object)
    int64_t ts;                    ///< unix seconds (floored)
    int64_t step;                  ///< per the step rule
    uint64_t present;              ///< bit f set: values[f] holds a value
    float values[CC_MAX_FEATURES]; ///< (F) scaled values; 0 where absent
} CcKpiRecord;

typedef struct CcKpiError {
    enum CcKpiReason reason;
    int element; ///< array index, or -1 for the whole message
    int64_t ts;  ///< the refused record's time when it was decoded before the refusal, else -1
                 ///< (a host tells when records of KPIs its model lacks arrive: no_kpis)
    char message[CC_KPI_MSG_MAX]; ///< human-readable, names the field and value
} CcKpiError;

/** Result of one cc_kpi_decode; arrays owned by the decoder, valid until its next call. */
typedef struct CcKpiBatch {
    const CcKpiRecord *records;
    int n_records;
    const CcKpiError *errors; ///< one per refused element (or one for the message)
    int n_errors;
    int n_elements;           ///< records in the message (1 for an object)
    uint64_t unmapped_fields; ///< fields seen that no mapping entry names
    uint64_t null_values;     ///< mapped fields that were null
} CcKpiBatch;

/** Totals since open. */
typedef struct CcKpiStats {
    uint64_t messages, records, bytes;
    uint64_t invalid[CC_KPI_N_REASONS]; ///< refused elements (or messages) by reason
    uint64_t unmapped_fields, null_values;
    uint64_t fast; ///< messages decoded by the fast scanner
} CcKpiStats;

typedef struct CcKpiDecoder CcKpiDecoder;

void cc_kpi_default_settings(CcKpiSettings *s);

/** Builds a decoder (copies everything it needs from s). 0, -EINVAL (message in err:
 *  unknown feature name, index out of range, duplicate field, bad bounds), -ENOMEM. */
int cc_kpi_open(CcKpiDecoder **out, const CcKpiSettings *s, char *err, size_t errlen);
void cc_kpi_close(CcKpiDecoder **d);

/** Decodes one message. Invalid content is reported in out->errors, not by the return
 *  value: 0, or -ENOMEM (out is then empty). */
int cc_kpi_decode(CcKpiDecoder *d, const void *buf, size_t len, CcKpiBatch *out);

void cc_kpi_stats(const CcKpiDecoder *d, CcKpiStats *out);

/** Stable short name of a reason ("not_json", ...); "ok" for CC_KPI_OK, "unknown" outside. */
const char *cc_kpi_reason_name(enum CcKpiReason r);

/** 1 if s is a valid cell id per the rule above. */
int cc_kpi_valid_cell_id(const char *s, size_t len);

#endif

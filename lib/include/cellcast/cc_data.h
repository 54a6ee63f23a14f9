/*
 * cc_data.h — KPI history from CSV: loading, the missing-data policy, time splits.
 *
 * A CcDataset holds one or more series (one per cell), all with the same F features and
 * step length S. Series s covers the absolute steps p0 .. p0+T-1 (p = unix seconds / S),
 * one row per step with no holes: steps absent from the file are inserted.
 *
 * Two CSV layouts (the first line is always a header):
 *   long  `ts,cell_id,<kpi…>`   many cells, rows of different cells interleaved in any order;
 *   wide  `<time>,<kpi…>`       one series (the layout of the files in ../shared/data).
 * RFC 4180 quoting ("a,b", "say ""x"""), CRLF or LF line ends, a UTF-8 BOM, blank lines
 * (skipped, anywhere) are accepted. A value that is empty, `NaN`, `nan`, `NA`, `N/A`,
 * `null`, `None`, `-` or `#N/A` (any case) is missing; anything else must parse completely
 * as a finite number. A malformed row stops the load with `file:line:column: what` in the
 * error buffer. A column without a name is refused only when it would be a feature (the
 * time index of pandas' to_csv(), InfluxDB's first column are fine). InfluxDB's annotation
 * lines (`#datatype,…`, `#group,…`, `#default,…`) before the header are skipped.
 *
 * Delimiter (`delimiter` 0 = detected): of `,` `;` tab (counted outside quotes), one that
 * splits the header line and the first data line into as many fields, the most frequent
 * in the header among those (a tie goes to that order; if none is consistent, the most
 * frequent; none in the header: `,`). With a
 * delimiter other than `,`, a value with one decimal comma (`1,5`, as spreadsheets write
 * `;` files) is read as `1.5`. A header that comes out as one column but contains another
 * candidate delimiter (`,` `;` tab `|`) is refused with a message that names it.
 *
 * Up to CC_DATA_MAX_FEATURES (256) feature columns are loaded. This is the dataset's own
 * limit: a model takes at most CC_MAX_FEATURES (cc_model.h) KPIs, so training on a wider
 * file needs `features`; baselines (tools/eval.c) work on every column.
 *
 * Timestamps (`time_format` NULL = auto, decided per value):
 *   - an integer or decimal number: unix seconds, or milliseconds when |v| ≥ 1e11 (the year
 *     5138 in seconds), microseconds from 1e14, nanoseconds from 1e17;
 *   - ISO-8601 / RFC 3339: `2018-03-28T15:56:00Z`, `…T15:56:00.250+02:00`, `2018-03-28`;
 *   - `YYYY-MM-DD HH:MM[:SS[.fff]]` (ETTh1, Barcelona);
 *   - `a/b/YYYY H:MM[:SS][ AM|PM]`: month first (US, the lte-hourly files) or day first, decided on
 *     the whole file: a row with a > 12 makes it day first, b > 12 month first (both:
 *     refused); with a and b ≤ 12 everywhere, the reading whose times span less (read the
 *     wrong way, consecutive days jump by months); equal spans: refused. cc_data_parse_time
 *     alone reads month first;
 *   - `D.M.YYYY H:MM[:SS]` (day first, as German or Russian spreadsheets write it);
 *   - otherwise a strptime(3) format given in `time_format` (e.g. "%d.%m.%Y %H:%M").
 * Times without a zone are UTC (local times across a DST change give one duplicate step
 * in autumn and one missing step in spring: export with offsets or in UTC). A time that is
 * not a multiple of S is rounded to the nearest step (counted as `misaligned`).
 *
 * Row index (`time_index`): a time column of plain non-negative integers can be a row
 * index rather than unix seconds; its time is then index × S seconds (row 0 = the epoch,
 * 1970-01-01T00:00Z, a Thursday, for the calendar features), and S must be given.
 * CC_TIME_INDEX_AUTO (default) takes the column as an index when no time_format is given,
 * every value is a plain
 * integer below CC_DATA_INDEX_AUTO_MAX (1e8 s is March 1973: no KPI history starts that
 * early) and the most common difference between a cell's successive values is 1 (a
 * 1-second step in 1970 is no KPI feed either); a missing S is then an error that says so,
 * instead of a step of 1 s under which a day is 86400 rows and the seasonal baselines are
 * silently empty. CC_TIME_INDEX_YES forces it (every value must be such an integer),
 * CC_TIME_INDEX_NO reads integers as unix seconds as before.
 *
 * Missing-data policy (every case is counted in CcDataReport, nothing is dropped silently):
 *   1. Steps absent from the file inside a series are inserted, all features missing.
 *   2. Two rows of the same cell on the same step: the later row in the file wins
 *      (`duplicates`). Rows out of time order are sorted (`out_of_order`).
 *   3. Every missing value (empty/NaN in the file, or an inserted step) has mask 0.
 *      Targets with mask 0 must be excluded from losses and metrics.
 *   4. The model needs finite inputs, so `x` is imputed where mask is 0:
 *      CC_IMPUTE_CARRY (default): the last observed value of that feature is carried
 *      forward — causal, what a live feed can do; values before the first observation
 *      take the first observed value. CC_IMPUTE_LINEAR: linear interpolation between the
 *      observed neighbours (ends carried). A feature never observed in a series is 0.
 *   5. With `max_gap_steps` > 0, a hole longer than that many steps ends the series and
 *      the next observation starts a new one (same cell id; `segments_split`).
 */
#ifndef CC_DATA_H
#define CC_DATA_H

#include "cc_common.h"
#include "cc_model.h"

#define CC_CELL_ID_MAX 64

/** Most feature columns a dataset holds (the model's own limit is CC_MAX_FEATURES). */
#define CC_DATA_MAX_FEATURES 256

/** Integer times below this are taken as a row index by CC_TIME_INDEX_AUTO (see above). */
#define CC_DATA_INDEX_AUTO_MAX 100000000

enum CcDataFormat {
    CC_DATA_AUTO = 0, ///< long if the header has the cell column, else wide
    CC_DATA_LONG = 1,
    CC_DATA_WIDE = 2,
};

enum CcImpute {
    CC_IMPUTE_CARRY = 0,  ///< last observation carried forward (causal)
    CC_IMPUTE_LINEAR = 1, ///< linear interpolation between observed neighbours
};

enum CcTimeIndex {
    CC_TIME_INDEX_AUTO = 0, ///< small consecutive integers are a row index (see above)
    CC_TIME_INDEX_YES = 1,  ///< the time column is a row index: time = index × S
    CC_TIME_INDEX_NO = 2,   ///< integers are unix seconds (or ms)
};

typedef struct CcDataSettings {
    enum CcDataFormat format; ///< (default CC_DATA_AUTO)
    const char *time_column; ///< header name of the time column; NULL = first column (default NULL)
    const char *cell_column; ///< header name of the cell column in long format; NULL = "cell_id",
                             ///< a long file when present; a name given must be in the header
                             ///< unless the format is wide (default NULL)
    char delimiter;          ///< field separator; 0 = detected from the header (default 0)
    enum CcTimeIndex time_index; ///< (default CC_TIME_INDEX_AUTO)
    const char *time_format;     ///< strptime format; NULL = auto (see above) (default NULL)
    const char *features;        ///< comma-separated feature columns to keep, in this order;
                          ///< NULL = every column but time and cell, header order (default NULL)
    const char *cell_id;  ///< id of the series of a wide file; NULL = file name without
                          ///< directory and extension (default NULL)
    int64_t step_seconds; ///< S; 0 = detected (default 0): the median of the positive time
                          ///< deltas of a cell's time-sorted rows within 5% of the most common
                          ///< one, in whole seconds (whole minutes from 60 s when within the 5%:
                          ///< collectors' few seconds of jitter)
    enum CcImpute impute; ///< (default CC_IMPUTE_CARRY)
    int max_gap_steps;    ///< split a series at holes longer than this; 0 = never (default 0)
    size_t read_chunk;    ///< bytes cc_data_open_file reads at a time (a record longer than
                          ///< that is read whole); 0 = 1 MiB (default 0)
} CcDataSettings;

/** One cell's series: T consecutive steps from absolute step p0. */
typedef struct CcSeries {
    char cell_id[CC_CELL_ID_MAX];
    int64_t p0;    ///< absolute step of row 0 (unix seconds of row 0 = p0 * S)
    int T;         ///< rows (steps)
    float *x;      // (T, F) values, finite (missing ones imputed per the policy)
    uint8_t *mask; // (T, F) 1 = observed in the file, 0 = missing (imputed in x)
} CcSeries;

typedef struct CcDataset {
    int n_features;                                           ///< F
    char features[CC_DATA_MAX_FEATURES][CC_FEATURE_NAME_MAX]; ///< column names, order of x
    int64_t step_seconds;                                     ///< S
    int n_series;
    CcSeries *series; // (n_series)
    char source[512]; ///< path(s) it was loaded from
} CcDataset;

/** What the loader saw and did. Totals over the whole file. */
typedef struct CcDataReport {
    int64_t rows_read;                       ///< data rows parsed (header and blank lines excluded)
    int64_t blank_lines;                     ///< empty lines skipped
    int64_t nan_cells[CC_DATA_MAX_FEATURES]; ///< missing values in the file, per feature
    int64_t imputed_cells[CC_DATA_MAX_FEATURES]; ///< values imputed, per feature (NaNs + inserted)
    int64_t missing_steps;                       ///< steps absent from the file, inserted
    int64_t duplicates;        ///< rows repeating an earlier (cell, step); the later one kept
    int64_t duplicates_differ; ///< of those, rows whose values differ from the one before
    int64_t out_of_order;      ///< rows earlier than the previous row of their cell
    int64_t misaligned;        ///< times not a multiple of S, rounded to the nearest step
    int64_t segments_split;    ///< extra series made by max_gap_steps
    int64_t sparse_series;     ///< series with fewer than half their steps in the file: most
                               ///< often a coarser step than S (a long file of series at
                               ///< different steps), their rows padded by imputation
    char sparse_first[CC_CELL_ID_MAX];       ///< the first of them
    char skipped_label[CC_FEATURE_NAME_MAX]; ///< a 0/1 column named `label` (any case) left
                                             ///< out of the features (not given), or ""
    double sparse_first_share;               ///< its share of steps present
    int64_t step_seconds;                    ///< S used (detected or given)
    int step_detected;                       ///< 1 when S was detected from the data
    int time_index; ///< 1 when the time column was read as a row index (× S)
    int day_first;  ///< 1 when a/b/YYYY times were read as D/M/YYYY
    char delimiter; ///< the field separator used (given or detected)
} CcDataReport;

/** The largest |time| a row may have, in unix seconds (9999-12-31T23:59:59Z), or as a row
 *  index: beyond it a time is refused (the step is detected in int64 milliseconds). */
#define CC_DATA_TIME_MAX 253402300799.0

/** Row index range [begin, end) of a series. */
typedef struct CcRange {
    int begin, end;
} CcRange;

void cc_data_default_settings(CcDataSettings *s);

/**
 * Loads one CSV file. report may be NULL. *out is owned by the caller (cc_data_close).
 * 0; -EIO (cannot open/read); -EINVAL (malformed: `file:line:col: what` in err);
 * -ENOMEM; -ERANGE (more than CC_DATA_MAX_FEATURES columns, a series longer than INT_MAX/F).
 */
int cc_data_open_file(CcDataset **out, const char *path, const CcDataSettings *s,
                      CcDataReport *report, char *err, size_t errlen);

/** Same from a buffer; `name` is used in messages and as default cell id. */
int cc_data_open_buffer(CcDataset **out, const char *buf, size_t len, const char *name,
                        const CcDataSettings *s, CcDataReport *report, char *err, size_t errlen);

void cc_data_close(CcDataset **ds);

/**
 * Appends `next` to `ds` in time: each series of `next` is joined to the series of `ds`
 * with the same cell id (which must end before it starts; a hole between them is
 * inserted as missing steps and imputed per `impute`), or added as a new series.
 * Features (names and order) and S must match. `next` is not modified. Used to put a
 * test file after its train file. *join_row (may be NULL) gets, for series 0 of `next`,
 * the row of the result where it starts. 0, -EINVAL, -ENOMEM.
 */
int cc_data_append(CcDataset *ds, const CcDataset *next, enum CcImpute impute, int *join_row,
                   char *err, size_t errlen);

/**
 * Reorders/subsets the columns to `names` (n of them), e.g. a model's feature list.
 * 0, -EINVAL (a name not in the dataset: named in err), -ENOMEM.
 */
int cc_data_select(CcDataset *ds, const char *const *names, int n, char *err, size_t errlen);

/** Column of a feature name, or -1. */
int cc_data_feature_index(const CcDataset *ds, const char *name);

/**
 * Time split of a T-row series into train / validation / test row ranges.
 * spec:
 *   NULL or ""                 = "0.7,0.1" (last 20% test);
 *   "a,b"                      = fractions: train [0, ⌊aT⌋), val [⌊aT⌋, ⌊(a+b)T⌋), test to T;
 *   "rows:A-B,C-D,E-F"         = explicit row ranges (ETTh1: rows:0-8640,8640-11520,11520-14400).
 * A range may be empty. Rows before a range stay usable as history (look-back).
 * 0 or -EINVAL (bad syntax, out of order, past T: message in err).
 */
int cc_data_split(const char *spec, int T, CcRange out[3], char *err, size_t errlen);

/**
 * The ETT benchmark's standard split (Informer's borders): 12 months of train, 4 of
 * validation, 4 of test, a month = 30 days, in rows of an hourly (ETTh1/2: 8640, 11520,
 * 14400) or a 15-minute (ETTm1/2: 34560, 46080, 57600) series. out[i] = {0, train end},
 * {train end, val end}, {val end, test end}. 0, or -EINVAL for another step.
 */
int cc_data_ett_split(int64_t step_seconds, CcRange out[3]);

/**
 * Per-feature mean and population std of the observed (mask 1) values of rows
 * range of series s. mean/std have F entries; a feature with no observation gets 0/1,
 * std 0 is replaced by 1.
 */
void cc_data_stats(const CcDataset *ds, int s, CcRange range, double *mean, double *std);

/** x ← (x − mean)/std for every row and feature of every series (ETT protocol z-scoring). */
void cc_data_standardize(CcDataset *ds, const double *mean, const double *std);

/** Unix seconds of row i of series s. */
static inline int64_t cc_data_row_ts(const CcDataset *ds, int s, int i)
{
    return (ds->series[s].p0 + i) * ds->step_seconds;
}

/**
 * Parses one timestamp to unix seconds (double: may carry milliseconds) with the rules
 * above; fmt NULL = auto. 0 or -EINVAL. Exposed for tests and the CLI's --from.
 */
int cc_data_parse_time(const char *s, size_t len, const char *fmt, double *out);

/** One-paragraph human summary of a report (rows, NaNs per feature, inserted steps…). */
void cc_data_report_format(const CcDataReport *r, const CcDataset *ds, char *buf, size_t buflen);

#endif

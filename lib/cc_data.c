/*
 * cc_data.c — CSV loader for KPI history (long and wide layouts), timestamps, the
 * missing-data policy of cc_data.h, splits and standardisation.
 *
 * The loader reads the file in chunks (a window that holds the current record; the whole
 * text is never held), parses it row by row into a flat table (cell, time, F values) and
 * then builds one hole-free series per cell:
 * detect S → map times to steps → sort → drop duplicates → insert missing steps → impute.
 * The values are held in blocks, moved into the series' order once the step is known and
 * freed block by block as the series are built: the peak is about the dataset it returns
 * plus 16 bytes per record (the rows' times, cells and order).
 */
#include "cc_data.h"
#include "cc_time.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_COLUMNS 1024
#define FIELD_MAX 4096
#define READ_CHUNK_DEFAULT (1u << 20)
#define VALUE_BLOCK_BYTES (1u << 20) /* the rows' values are held in blocks of about this */

void cc_data_default_settings(CcDataSettings *s)
{
    memset(s, 0, sizeof *s);
    s->format = CC_DATA_AUTO;
    s->impute = CC_IMPUTE_CARRY;
}

/* ---------------------------------------------------------------------------------- */
/* Timestamps                                                                          */

/* Reads 1..maxd digits at *p; returns -1 if none. */
static int64_t read_uint(const char **p, const char *end, int mind, int maxd)
{
    int64_t v = 0;
    int n = 0;
    while (*p < end && n < maxd && isdigit((unsigned char)**p)) {
        v = v * 10 + (**p - '0');
        (*p)++;
        n++;
    }
    return n >= mind ? v : -1;
}

static int valid_ymdhms(int64_t y, int64_t mo, int64_t d, int64_t h, int64_t mi, double sec)
{
    return y >= 1 && y <= 9999 && mo >= 1 && mo <= 12 && d >= 1 &&
           cc_civil_valid(y, (int)mo, (int)d) && h >= 0 && h <= 24 && mi >= 0 && mi <= 59 &&
           sec >= 0 && sec < 61 && !(h == 24 && (mi || sec > 0));
}

/* Optional clock part "HH:MM[:SS[.fff]]" starting at *p. */
static int parse_clock(const char **p, const char *end, int mind_h, int64_t *h, int64_t *mi,
                       double *sec)
{
    *h = read_uint(p, end, mind_h, 2);
    if (*h < 0 || *p >= end || **p != ':')
        return -1;
    (*p)++;
    *mi = read_uint(p, end, 2, 2);
    if (*mi < 0)
        return -1;
    *sec = 0;
    if (*p < end && **p == ':') {
        (*p)++;
        int64_t s = read_uint(p, end, 2, 2);
        if (s < 0)
            return -1;
        *sec = (double)s;
        if (*p < end && (**p == '.' || **p == ',')) {
            (*p)++;
            double scale = 0.1;
            if (*p >= end || !isdigit((unsigned char)**p))
                return -1;
            while (*p < end && isdigit((unsigned char)**p)) {
                *sec += scale * (**p - '0');
                scale *= 0.1;
                (*p)++;
            }
        }
    }
    return 0;
}

/* ISO-8601 / RFC 3339 and "YYYY-MM-DD HH:MM[:SS]". */
static int parse_iso(const char *p, const char *end, double *out)
{
    int64_t y = read_uint(&p, end, 4, 4);
    if (y < 0 || p >= end || *p != '-')
        return -1;
    p++;
    int64_t mo = read_uint(&p, end, 2, 2);
    if (mo < 0 || p >= end || *p != '-')
        return -1;
    p++;
    int64_t d = read_uint(&p, end, 2, 2);
    if (d < 0)
        return -1;
    int64_t h = 0, mi = 0;
    double sec = 0, off = 0;
    if (p < end && (*p == 'T' || *p == 't' || *p == ' ')) {
        p++;
        if (parse_clock(&p, end, 2, &h, &mi, &sec))
            return -1;
        if (p < end && (*p == 'Z' || *p == 'z')) {
            p++;
        } else if (p < end && (*p == '+' || *p == '-')) {
            int sign = *p == '-' ? -1 : 1;
            p++;
            int64_t oh = read_uint(&p, end, 2, 2), om = 0;
            if (oh < 0 || oh > 23)
                return -1;
            if (p < end && *p == ':')
                p++;
            if (p < end && isdigit((unsigned char)*p)) {
                om = read_uint(&p, end, 2, 2);
                if (om < 0 || om > 59)
                    return -1;
            }
            off = sign * (double)(oh * 3600 + om * 60);
        }
    }
    if (p != end || !valid_ymdhms(y, mo, d, h, mi, sec))
        return -1;
    *out =
        (double)(cc_days_from_civil(y, (int)mo, (int)d) * 86400 + h * 3600 + mi * 60) + sec - off;
    return 0;
}

/* "M/D/YYYY[ H:MM[:SS]]" (month first) or "D/M/YYYY …" (day_first), the date parts
 * separated by sep. */
static int parse_dmy(const char *p, const char *end, int day_first, char sep, double *out)
{
    int64_t a = read_uint(&p, end, 1, 2);
    if (a < 0 || p >= end || *p != sep)
        return -1;
    p++;
    int64_t b = read_uint(&p, end, 1, 2);
    if (b < 0 || p >= end || *p != sep)
        return -1;
    p++;
    int64_t y = read_uint(&p, end, 4, 4);
    if (y < 0)
        return -1;
    int64_t mo = day_first ? b : a, d = day_first ? a : b;
    int64_t h = 0, mi = 0;
    double sec = 0;
    if (p < end && *p == ' ') {
        while (p < end && *p == ' ')
            p++;
        if (parse_clock(&p, end, 1, &h, &mi, &sec))
            return -1;
        /* US spreadsheets: "10/16/2018 12:00:00 AM" */
        const char *q = p;
        while (q < end && *q == ' ')
            q++;
        if (end - q == 2 && (q[1] == 'M' || q[1] == 'm') && strchr("AaPp", q[0])) {
            if (h < 1 || h > 12)
                return -1;
            h = h % 12 + (q[0] == 'P' || q[0] == 'p' ? 12 : 0);
            p = end;
        }
    }
    if (p != end || !valid_ymdhms(y, mo, d, h, mi, sec))
        return -1;
    *out = (double)(cc_days_from_civil(y, (int)mo, (int)d) * 86400 + h * 3600 + mi * 60) + sec;
    return 0;
}

/* Both readings of an "a/b/YYYY" time (NAN where one is not a valid date); -1 when the
 * text is not of that form at all, so the file's order can be decided on every row. */
static int slash_times(const char *s, size_t len, double *md, double *dm)
{
    const char *p = s, *end = s + len;
    while (p < end && isspace((unsigned char)*p))
        p++;
    while (end > p && isspace((unsigned char)end[-1]))
        end--;
    if (!memchr(p, '/', (size_t)(end - p)))
        return -1;
    if (parse_dmy(p, end, 0, '/', md))
        *md = NAN;
    if (parse_dmy(p, end, 1, '/', dm))
        *dm = NAN;
    return 0;
}

static int parse_unix(const char *p, const char *end, double *out)
{
    char buf[64];
    size_t n = (size_t)(end - p);
    if (n == 0 || n >= sizeof buf)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)p[i]) && p[i] != '.' && p[i] != '-' && p[i] != '+' &&
            p[i] != 'e' && p[i] != 'E')
            return -1;
    memcpy(buf, p, n);
    buf[n] = 0;
    char *e;
    double v = strtod(buf, &e);
    if (*e || !isfinite(v))
        return -1;
    /* 1e11 s is the year 5138: larger values are ms, µs (InfluxDB, Grafana) or ns */
    if (fabs(v) >= 1e17)
        v /= 1e9;
    else if (fabs(v) >= 1e14)
        v /= 1e6;
    else if (fabs(v) >= 1e11)
        v /= 1e3;
    *out = v;
    return 0;
}

int cc_data_parse_time(const char *s, size_t len, const char *fmt, double *out)
{
    const char *p = s, *end = s + len;
    while (p < end && isspace((unsigned char)*p))
        p++;
    while (end > p && isspace((unsigned char)end[-1]))
        end--;
    if (p == end)
        return -EINVAL;
    if (fmt && *fmt) {
        char buf[256];
        size_t n = (size_t)(end - p);
        if (n >= sizeof buf)
            return -EINVAL;
        memcpy(buf, p, n);
        buf[n] = 0;
        struct tm tm;
        memset(&tm, 0, sizeof tm);
        tm.tm_mday = 1;
        const char *r = strptime(buf, fmt, &tm);
        if (!r)
            return -EINVAL;
        while (*r && isspace((unsigned char)*r))
            r++;
        if (*r)
            return -EINVAL;
        long gmtoff = tm.tm_gmtoff;
        int64_t y = (int64_t)tm.tm_year + 1900;
        if (tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 ||
            !cc_civil_valid(y, tm.tm_mon + 1, tm.tm_mday))
            return -EINVAL;
        *out = (double)(cc_days_from_civil(y, tm.tm_mon + 1, tm.tm_mday) * 86400 +
                        (int64_t)tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec - gmtoff);
        return 0;
    }
    if (end - p >= 5 && isdigit((unsigned char)p[0]) && isdigit((unsigned char)p[1]) &&
        isdigit((unsigned char)p[2]) && isdigit((unsigned char)p[3]) && p[4] == '-')
        return parse_iso(p, end, out) ? -EINVAL : 0;
    if (memchr(p, '/', (size_t)(end - p)))
        return parse_dmy(p, end, 0, '/', out) ? -EINVAL : 0;
    if (parse_dmy(p, end, 1, '.', out) == 0)
        return 0;
    return parse_unix(p, end, out) ? -EINVAL : 0;
}

/* ---------------------------------------------------------------------------------- */
/* CSV tokenizer                                                                       */

typedef struct Csv {
    const char *buf, *end, *p; /* the text in hand: all of a buffer, a window of a file */
    const char *name;
    /* a file is read through a window: own[0 .. end) holds the text from the start of the
     * record being read on; csv_more shifts it down and appends the next chunk */
    FILE *fp;
    char *own;
    size_t own_cap, chunk;
    int eof;      /* no more text than [buf, end): a buffer, or the file read to its end */
    int hit_end;  /* the last csv_record ran into `end` (its outcome may change with more) */
    char delim;   /* field separator */
    int64_t line; /* line of the current position (1-based) */
    const char *line_start; /* start of the current line */
    /* current record */
    int nf;
    int64_t rec_line;
    char *fields; /* NUL-separated field texts */
    size_t fields_cap, fields_len;
    size_t off[MAX_COLUMNS];
    size_t flen[MAX_COLUMNS];
    int col[MAX_COLUMNS]; /* 1-based column (byte) where the field starts */
    int64_t fline[MAX_COLUMNS];
} Csv;

static int csv_put(Csv *c, char ch)
{
    if (c->fields_len + 1 >= c->fields_cap) {
        size_t cap = c->fields_cap ? c->fields_cap * 2 : 4096;
        char *n = realloc(c->fields, cap);
        if (!n)
            return -ENOMEM;
        c->fields = n;
        c->fields_cap = cap;
    }
    c->fields[c->fields_len++] = ch;
    return 0;
}

/* Appends the file's next chunk to the window, keeping the text from `keep` (and from the
 * current position and line start, if earlier) and moving it to the window's start. Reads
 * at least as much as it keeps, so that a record longer than a chunk costs a linear time.
 * 1 = text added, 0 = end of input (c->eof set), <0 error. */
static int csv_more(Csv *c, const char *keep, char *err, size_t errlen)
{
    if (c->eof)
        return 0;
    if (c->p < keep)
        keep = c->p;
    if (c->line_start && c->line_start < keep)
        keep = c->line_start;
    size_t kept = (size_t)(c->end - keep), want = kept > c->chunk ? kept : c->chunk;
    size_t dp = (size_t)(c->p - keep), dl = c->line_start ? (size_t)(c->line_start - keep) : 0;
    if (c->own_cap - kept < want) { /* room for two reads: not a new window every chunk */
        char *n = malloc(kept + 2 * want);
        if (!n)
            return -ENOMEM;
        memcpy(n, keep, kept);
        free(c->own);
        c->own = n;
        c->own_cap = kept + 2 * want;
    } else if (kept) {
        memmove(c->own, keep, kept);
    }
    size_t got = fread(c->own + kept, 1, want, c->fp);
    c->buf = c->own;
    c->end = c->own + kept + got;
    c->p = c->own + dp;
    if (c->line_start)
        c->line_start = c->own + dl;
    if (got)
        return 1;
    if (ferror(c->fp))
        return cc_errf(err, errlen, -EIO, "%s: read error", c->name);
    c->eof = 1;
    return 0;
}

/* Reads one record from the text in hand (see csv_next); sets c->hit_end when it ran into
 * the end of that text, where more text could change what it read. */
static int csv_record(Csv *c, int64_t *blank, char *err, size_t errlen)
{
    c->hit_end = 0;
    for (;;) {
        if (c->p >= c->end) {
            c->hit_end = 1;
            return 0;
        }
        /* blank line: only \r before \n (or end) */
        const char *q = c->p;
        while (q < c->end && (*q == '\r' || *q == ' ' || *q == '\t'))
            q++;
        if (q >= c->end && !c->eof) {
            c->hit_end = 1;
            return 0;
        }
        if (q >= c->end || *q == '\n') {
            if (q < c->end || q > c->p)
                (*blank)++;
            c->p = q < c->end ? q + 1 : q;
            c->line++;
            c->line_start = c->p;
            continue;
        }
        break;
    }
    c->nf = 0;
    c->fields_len = 0;
    c->rec_line = c->line;
    for (;;) {
        if (c->nf >= MAX_COLUMNS)
            return cc_errf(err, errlen, -ERANGE, "%s:%lld: more than %d columns", c->name,
                           (long long)c->line, MAX_COLUMNS);
        int k = c->nf++;
        c->off[k] = c->fields_len;
        c->col[k] = (int)(c->p - c->line_start) + 1;
        c->fline[k] = c->line;
        /* leading spaces before a quote are allowed */
        const char *s = c->p;
        while (s < c->end && (*s == ' ' || (*s == '\t' && c->delim != '\t')))
            s++;
        if (s < c->end && *s == '"') {
            int64_t qline = c->line;
            int qcol = (int)(s - c->line_start) + 1;
            c->p = s + 1;
            for (;;) {
                if (c->p >= c->end) {
                    c->hit_end = 1; /* the message only at the end of the text: no retry then */
                    if (!c->eof)
                        return -EINVAL;
                    return cc_errf(err, errlen, -EINVAL, "%s:%lld:%d: unterminated quoted field",
                                   c->name, (long long)qline, qcol);
                }
                char ch = *c->p++;
                if (ch == '"') {
                    if (c->p < c->end && *c->p == '"') {
                        c->p++;
                        if (csv_put(c, '"'))
                            return -ENOMEM;
                        continue;
                    }
                    break;
                }
                if (ch == '\n') {
                    c->line++;
                    c->line_start = c->p;
                }
                if (csv_put(c, ch))
                    return -ENOMEM;
            }
            while (c->p < c->end && (*c->p == ' ' || (*c->p == '\t' && c->delim != '\t')))
                c->p++;
            if (c->p < c->end && *c->p == '\r' && (c->p + 1 == c->end || c->p[1] == '\n'))
                c->p++;
            if (c->p < c->end && *c->p != c->delim && *c->p != '\n')
                return cc_errf(err, errlen, -EINVAL,
                               "%s:%lld:%d: unexpected character after closing quote", c->name,
                               (long long)c->line, (int)(c->p - c->line_start) + 1);
        } else {
            while (c->p < c->end && *c->p != c->delim && *c->p != '\n') {
                if (*c->p == '\r' && (c->p + 1 == c->end || c->p[1] == '\n')) {
                    c->p++;
                    continue;
                }
                if (*c->p == '"')
                    return cc_errf(err, errlen, -EINVAL,
                                   "%s:%lld:%d: quote inside an unquoted field", c->name,
                                   (long long)c->line, (int)(c->p - c->line_start) + 1);
                if (csv_put(c, *c->p))
                    return -ENOMEM;
                c->p++;
            }
        }
        c->flen[k] = c->fields_len - c->off[k];
        if (csv_put(c, 0))
            return -ENOMEM;
        if (c->p >= c->end) {
            c->hit_end = 1;
            return 1;
        }
        if (*c->p == '\n') {
            c->p++;
            c->line++;
            c->line_start = c->p;
            return 1;
        }
        c->p++; /* the delimiter */
    }
}

/* Reads one record. Returns 1 = record, 0 = end of input, <0 error (message in err).
 * Blank lines are skipped and counted in *blank. A record that runs into the end of the
 * window is read again from its start once the next chunk is in: every outcome is the one
 * the whole text in memory gives. */
static int csv_next(Csv *c, int64_t *blank, char *err, size_t errlen)
{
    for (;;) {
        const char *p = c->p, *line_start = c->line_start;
        int64_t line = c->line, blanks = *blank;
        int ret = csv_record(c, blank, err, errlen);
        if (!c->hit_end || c->eof || ret == -ENOMEM)
            return ret;
        c->p = p;
        c->line_start = line_start;
        c->line = line;
        *blank = blanks;
        if ((ret = csv_more(c, c->p, err, errlen)) < 0)
            return ret;
    }
}

static const char *csv_field(const Csv *c, int k, size_t *len)
{
    const char *s = c->fields + c->off[k];
    size_t n = c->flen[k];
    while (n && isspace((unsigned char)*s)) {
        s++;
        n--;
    }
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    *len = n;
    return s;
}

static int is_missing_token(const char *s, size_t n)
{
    static const char *const tok[] = {"", "nan", "na", "n/a", "null", "none", "-", "-nan", "#n/a"};
    for (size_t i = 0; i < sizeof tok / sizeof *tok; i++)
        if (strlen(tok[i]) == n && strncasecmp(s, tok[i], n) == 0)
            return 1;
    return 0;
}

static int has_digit(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (isdigit((unsigned char)s[i]))
            return 1;
    return 0;
}

/* Makes the window hold at least n bytes from c->p, or all that is left. 0 or <0. */
static int csv_need(Csv *c, size_t n, char *err, size_t errlen)
{
    int ret = 1;
    while ((size_t)(c->end - c->p) < n && (ret = csv_more(c, c->p, err, errlen)) > 0)
        ;
    return ret < 0 ? ret : 0;
}

/* InfluxDB's annotated CSV starts with #datatype, #group and #default lines before the
 * header: skipped (and counted as lines). */
static int skip_annotations(Csv *c, char *err, size_t errlen)
{
    static const char *const ann[] = {"#datatype,", "#group,", "#default,"};
    for (int again = 1; again;) {
        again = 0;
        for (size_t i = 0; i < sizeof ann / sizeof *ann; i++) {
            size_t n = strlen(ann[i]);
            int ret = csv_need(c, n, err, errlen);
            if (ret)
                return ret;
            if ((size_t)(c->end - c->p) < n || memcmp(c->p, ann[i], n))
                continue;
            const char *nl;
            while (!(nl = memchr(c->p, '\n', (size_t)(c->end - c->p))) &&
                   (ret = csv_more(c, c->p, err, errlen)) > 0)
                ;
            if (ret < 0)
                return ret;
            c->p = nl ? nl + 1 : c->end;
            c->line++;
            again = 1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------------------- */
/* Delimiter and time index                                                            */

/* Counts , ; tab outside quotes in the first non-blank line from *p; moves *p past it. */
static void count_delimiters(const char **p, const char *end, int64_t n[3])
{
    static const char cand[3] = {',', ';', '\t'};
    const char *q = *p;
    int quoted = 0;
    while (q < end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
        q++;
    for (; q < end && (quoted || *q != '\n'); q++) {
        if (*q == '"')
            quoted = !quoted;
        for (int k = 0; k < 3 && !quoted; k++)
            n[k] += *q == cand[k];
    }
    *p = q;
}

/* The delimiter of a file: of , ; tab, one that splits the header and the first data line
 * into the same number of fields (a ';' file with decimal commas, a ',' file with a ';' in
 * a column name), the most frequent in the header among those, a tie going to that order;
 * none in the header: ','. */
static char detect_delimiter(const char *p, const char *end, const char **stop)
{
    static const char cand[3] = {',', ';', '\t'};
    int64_t h[3] = {0, 0, 0}, r[3] = {0, 0, 0};
    count_delimiters(&p, end, h);
    count_delimiters(&p, end, r);
    *stop = p;
    int any_row = r[0] || r[1] || r[2], best = -1;
    for (int pass = 0; pass < 2 && best < 0; pass++)
        for (int k = 0; k < 3; k++)
            if (h[k] > 0 && (pass == 1 || !any_row || h[k] == r[k]) && (best < 0 || h[k] > h[best]))
                best = k;
    return best < 0 ? ',' : cand[best];
}

/* A header name `label` in any case: the usual name of a 0/1 row label (NAB, Kaggle). */
static int is_label_name(const char *h)
{
    static const char want[] = "label";
    for (int i = 0; i < 6; i++)
        if (tolower((unsigned char)h[i]) != want[i])
            return 0;
    return 1;
}

/* How a delimiter is written in messages and on the command line. */
static const char *delim_name(char d, char *buf, size_t n)
{
    if (d == '\t')
        return "tab";
    snprintf(buf, n, "'%c'", d);
    return buf;
}

/* A one-column header that holds another usual delimiter: the file is split at the wrong
 * character (a ';' file read with ','), which would otherwise surface as a name too long
 * or no feature columns. 0 or -EINVAL with the message. */
static int check_one_column_header(const char *name, const char *f, size_t n, char delim,
                                   int detected, char *err, size_t errlen)
{
    static const char cand[] = ",;\t|";
    for (const char *d = cand; *d; d++) {
        if (*d == delim || !memchr(f, *d, n))
            continue;
        char a[8], b[8];
        const char *dn = delim_name(*d, b, sizeof b);
        return cc_errf(err, errlen, -EINVAL,
                       "%s:1: the header is one column when split at %s (%s) and it contains "
                       "%s: is %s the delimiter? try --delimiter %s",
                       name, delim_name(delim, a, sizeof a), detected ? "detected" : "given", dn,
                       dn, dn);
    }
    return 0;
}

/* A plain non-negative integer (digits only, at most 15: exact in a double). 0 or -1. */
static int parse_index(const char *f, size_t n, int64_t *out)
{
    int64_t v = 0;
    if (n == 0 || n > 15)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)f[i]))
            return -1;
        v = v * 10 + (f[i] - '0');
    }
    *out = v;
    return 0;
}

/* ---------------------------------------------------------------------------------- */
/* Cell id table                                                                       */

typedef struct CellTab {
    char (*id)[CC_CELL_ID_MAX];
    int n, cap;
    int *slot; /* open addressing: index+1 or 0 */
    int nslot;
} CellTab;

static int celltab_find_or_add(CellTab *t, const char *s)
{
    if (t->n * 2 >= t->nslot) {
        int ns = t->nslot ? t->nslot * 2 : 64;
        int *sl = calloc((size_t)ns, sizeof *sl);
        if (!sl)
            return -ENOMEM;
        for (int i = 0; i < t->n; i++) {
            uint64_t h = cc_fnv1a_str(t->id[i]) & (uint64_t)(ns - 1);
            while (sl[h])
                h = (h + 1) & (uint64_t)(ns - 1);
            sl[h] = i + 1;
        }
        free(t->slot);
        t->slot = sl;
        t->nslot = ns;
    }
    uint64_t h = cc_fnv1a_str(s) & (uint64_t)(t->nslot - 1);
    while (t->slot[h]) {
        if (strcmp(t->id[t->slot[h] - 1], s) == 0)
            return t->slot[h] - 1;
        h = (h + 1) & (uint64_t)(t->nslot - 1);
    }
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 16;
        void *n = realloc(t->id, (size_t)cap * sizeof *t->id);
        if (!n)
            return -ENOMEM;
        t->id = n;
        t->cap = cap;
    }
    snprintf(t->id[t->n], CC_CELL_ID_MAX, "%s", s);
    t->slot[h] = t->n + 1;
    return t->n++;
}

/* ---------------------------------------------------------------------------------- */
/* Imputation                                                                          */

static void impute_series(CcSeries *s, int F, enum CcImpute how, int64_t *count)
{
    for (int f = 0; f < F; f++) {
        int first = -1;
        for (int i = 0; i < s->T; i++)
            if (s->mask[(size_t)i * F + f]) {
                first = i;
                break;
            }
        if (first < 0) {
            for (int i = 0; i < s->T; i++)
                s->x[(size_t)i * F + f] = 0.0f;
            if (count)
                count[f] += s->T;
            continue;
        }
        int last = first; /* last observed row */
        for (int i = 0; i < s->T; i++) {
            size_t k = (size_t)i * F + f;
            if (s->mask[k]) {
                if (how == CC_IMPUTE_LINEAR && i > last + 1) {
                    float a = s->x[(size_t)last * F + f], b = s->x[k];
                    for (int j = last + 1; j < i; j++)
                        s->x[(size_t)j * F + f] =
                            a + (b - a) * (float)(j - last) / (float)(i - last);
                }
                last = i;
                continue;
            }
            if (count)
                count[f]++;
            if (i < first)
                s->x[k] = s->x[(size_t)first * F + f];
            else
                s->x[k] = s->x[(size_t)last * F + f]; /* carry (linear overwrites later) */
        }
    }
}

/* ---------------------------------------------------------------------------------- */
/* Loader                                                                              */

/* One record, 16 bytes: its time, then (assign_steps) its step, which is also the sort key;
 * the day-first reading of a/b/YYYY times is kept beside the rows only while needed. */
typedef struct Row {
    double ts; /* unix seconds; from assign_steps on the step (exact: |step| <= 9e15) */
    int cell;
    int order; /* the row's place in the file; from sort_values on its place in the sort */
} Row;

static int64_t row_step(const Row *r) { return (int64_t)r->ts; }

/* The first row whose a/b/YYYY time reads only one way. */
typedef struct SlashSeen {
    int64_t line;
    char text[32];
} SlashSeen;

/* By cell, time (to detect the step; later the step), file order. */
static int cmp_row(const void *a, const void *b)
{
    const Row *x = a, *y = b;
    if (x->cell != y->cell)
        return x->cell < y->cell ? -1 : 1;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Which part of the file's a/b/YYYY dates is the month. The first row that can only be
 * read one way (a 13..31 in that place) decides; every row must then read that way. A file
 * where both readings are valid everywhere (days 1..12 only) takes the reading that spans
 * less time: consecutive rows read the wrong way jump by months. 0 month first, 1 day
 * first, or -EINVAL (mixed, or both readings equally compact). */
static int slash_order(Row *rows, const double *alt, size_t nrows, const char *name,
                       const SlashSeen *mf, const SlashSeen *df, char *err, size_t errlen)
{
    if (mf->line && df->line)
        return cc_errf(err, errlen, -EINVAL,
                       "%s:%lld: time '%s' is day/month/year but line %lld ('%s') is "
                       "month/day/year: give the time format (--time-format)",
                       name, (long long)df->line, df->text, (long long)mf->line, mf->text);
    int day_first = df->line != 0;
    if (!mf->line && !df->line) {
        double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
        for (size_t i = 0; i < nrows; i++) {
            double t[2] = {rows[i].ts, isnan(alt[i]) ? rows[i].ts : alt[i]};
            for (int k = 0; k < 2; k++) {
                lo[k] = t[k] < lo[k] ? t[k] : lo[k];
                hi[k] = t[k] > hi[k] ? t[k] : hi[k];
            }
        }
        if (hi[0] - lo[0] == hi[1] - lo[1]) {
            for (size_t i = 0; i < nrows; i++)
                if (!isnan(alt[i]) && alt[i] != rows[i].ts)
                    return cc_errf(err, errlen, -EINVAL,
                                   "%s: a/b/YYYY dates with a and b both 1..12 read as well "
                                   "month first as day first: give the time format "
                                   "(--time-format, e.g. '%%d/%%m/%%Y %%H:%%M')",
                                   name);
        }
        day_first = hi[1] - lo[1] < hi[0] - lo[0];
    }
    for (size_t i = 0; i < nrows && day_first; i++)
        if (!isnan(alt[i]))
            rows[i].ts = alt[i];
    return day_first;
}

/* Counts rows earlier than the previous row of their cell (file order), then sorts the rows
 * by cell and time and collects the positive differences of successive times (ms): after
 * sorting, so that a shuffled export gives the same step as a sorted one. */
static int time_deltas(Row *rows, size_t nrows, int ncells, int64_t *out_of_order, int64_t **deltas,
                       size_t *ndeltas)
{
    double *last = malloc((size_t)(ncells > 0 ? ncells : 1) * sizeof *last);
    int64_t *d = malloc((nrows ? nrows : 1) * sizeof *d);
    if (!last || !d) {
        free(last);
        free(d);
        return -ENOMEM;
    }
    for (int i = 0; i < ncells; i++)
        last[i] = -INFINITY;
    for (size_t i = 0; i < nrows; i++) {
        *out_of_order += rows[i].ts < last[rows[i].cell];
        last[rows[i].cell] = rows[i].ts;
    }
    free(last);
    qsort(rows, nrows, sizeof *rows, cmp_row);
    size_t n = 0;
    for (size_t i = 1; i < nrows; i++) {
        int64_t dt = llround(rows[i].ts * 1000.0) - llround(rows[i - 1].ts * 1000.0);
        if (rows[i].cell == rows[i - 1].cell && dt > 0)
            d[n++] = dt;
    }
    *deltas = d;
    *ndeltas = n;
    return 0;
}

/* The step S in whole seconds from the sorted positive deltas (ms) and their most common
 * value `mode`. Collectors stamp rows a few seconds around the step (3597, 3602, …), so the
 * step is the median of the deltas within 5% of the mode, rounded to whole seconds and, from
 * a minute up, to whole minutes when that is within the same 5%. 0 when the median is not
 * within 5% of whole seconds either (a 1.5 s feed: the step must be given). */
static int64_t step_from_deltas(const int64_t *d, size_t n, int64_t mode)
{
    int64_t tol = mode / 20;
    size_t a = 0, b = n;
    while (a < n && d[a] < mode - tol)
        a++;
    while (b > a && d[b - 1] > mode + tol)
        b--;
    int64_t med = d[a + (b - a) / 2], S = (med + 500) / 1000;
    if (S <= 0 || llabs(S * 1000 - med) > tol)
        return 0;
    int64_t m = (S + 30) / 60 * 60;
    if (S >= 60 && llabs(m * 1000 - med) <= tol)
        S = m;
    return S;
}

static void base_name(const char *path, char *out, size_t n)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    snprintf(out, n, "%s", b);
    char *dot = strrchr(out, '.');
    if (dot && dot != out)
        *dot = 0;
}

static int add_series(CcDataset *ds, int *cap, const char *id, int64_t p0, int T)
{
    if (ds->n_series == *cap) {
        int nc = *cap ? *cap * 2 : 4;
        CcSeries *n = realloc(ds->series, (size_t)nc * sizeof *n);
        if (!n)
            return -ENOMEM;
        ds->series = n;
        *cap = nc;
    }
    CcSeries *s = &ds->series[ds->n_series];
    memset(s, 0, sizeof *s);
    snprintf(s->cell_id, sizeof s->cell_id, "%s", id);
    s->p0 = p0;
    s->T = T;
    size_t n = (size_t)T * (size_t)ds->n_features;
    s->x = malloc(n ? n * sizeof *s->x : 1);
    s->mask = calloc(n ? n : 1, 1);
    ds->n_series++;
    if (!s->x || !s->mask)
        return -ENOMEM;
    return 0;
}

void cc_data_close(CcDataset **pds)
{
    if (!pds || !*pds)
        return;
    CcDataset *ds = *pds;
    for (int i = 0; i < ds->n_series; i++) {
        free(ds->series[i].x);
        free(ds->series[i].mask);
    }
    free(ds->series);
    free(ds);
    *pds = NULL;
}

/* Everything one load carries from phase to phase: cc_data_open_buffer runs the phases in
 * order (header, rows, label column, time reading, step, series) and each reads and fills
 * this context, so that a phase is a short function instead of a stretch of one long one. */
typedef struct Load {
    const CcDataSettings *sp;
    const char *name;
    char *err;
    size_t errlen;
    CcDataReport rep;
    Csv *c;
    CcDataset *ds;
    int series_cap;
    /* header */
    int ncols;
    char (*hdr)[CC_FEATURE_NAME_MAX]; /* the header's names ("" for an unnamed column) */
    int tcol, ccol;                   /* time column; cell column or -1 (wide) */
    int F, label_col;                 /* features; the `label` feature or -1 */
    int colmap[CC_DATA_MAX_FEATURES]; /* feature j -> column */
    char wide_id[CC_CELL_ID_MAX];     /* the cell of a wide file */
    char tname[CC_FEATURE_NAME_MAX];  /* the time column's name, for messages */
    /* rows */
    CellTab cells;
    Row *rows;
    float **vblock;                    /* the rows' values: row i's F are row_vals(L, i) */
    size_t nblocks, blocks_cap, vrows; /* blocks, their room, rows per block (2^vshift) */
    int vshift;
    size_t vfreed; /* blocks before this one are freed (build_series) */
    double *alt;   /* (nrows) day-first readings of a/b/YYYY times (NAN: none), or NULL */
    size_t nrows, rows_cap;
    /* time reading */
    int all_index; /* every time is a plain non-negative integer */
    int64_t idx_min, idx_max;
    size_t n_slash; /* a/b/YYYY times, whose order is decided on the whole file */
    SlashSeen slash_month_first, slash_day_first;
    int64_t *deltas; /* positive differences of successive times of a cell (ms) */
    size_t ndeltas;
    int64_t mode_delta; /* the most common of them, 0 if none */
} Load;

/* Opens the text: BOM, leading annotation lines and the delimiter (given or detected) come
 * before the header and decide how every record is split. */
static int load_begin(Load *L, const char *buf, size_t len)
{
    Csv *c = L->c;
    c->buf = buf;
    c->end = buf + len;
    c->p = buf;
    c->name = L->name;
    c->line = 1;
    int ret = csv_need(c, 3, L->err, L->errlen);
    if (ret)
        return ret;
    if (c->end - c->p >= 3 && (unsigned char)c->p[0] == 0xEF && (unsigned char)c->p[1] == 0xBB &&
        (unsigned char)c->p[2] == 0xBF)
        c->p += 3;
    if ((ret = skip_annotations(c, L->err, L->errlen)))
        return ret;
    c->line_start = c->p;
    char d = L->sp->delimiter;
    if (d == '"' || d == '\r' || d == '\n')
        return cc_errf(L->err, L->errlen, -EINVAL,
                       "%s: the delimiter cannot be a quote or a line end", L->name);
    if (!d) {
        /* the header and the first data line (quotes may span lines) must be in hand */
        const char *stop;
        while ((d = detect_delimiter(c->p, c->end, &stop)),
               stop >= c->end && (ret = csv_more(c, c->p, L->err, L->errlen)) > 0)
            ;
        if (ret < 0)
            return ret;
    }
    c->delim = d;
    L->rep.delimiter = c->delim;
    return 0;
}

/* Reads the header record into L->hdr: names must fit and be unique, so that a column can
 * be found by name (time, cell, features) and named in messages. */
static int read_header_names(Load *L)
{
    Csv *c = L->c;
    int ret = csv_next(c, &L->rep.blank_lines, L->err, L->errlen);
    if (ret < 0)
        return ret;
    if (ret == 0)
        return cc_errf(L->err, L->errlen, -EINVAL, "%s: empty file (no header)", L->name);
    L->ncols = c->nf;
    if (L->ncols == 1) {
        size_t n;
        const char *f = csv_field(c, 0, &n);
        ret =
            check_one_column_header(L->name, f, n, c->delim, !L->sp->delimiter, L->err, L->errlen);
        if (ret)
            return ret;
    }
    L->hdr = calloc((size_t)L->ncols, sizeof *L->hdr);
    if (!L->hdr)
        return -ENOMEM;
    for (int k = 0; k < L->ncols; k++) {
        size_t n;
        const char *f = csv_field(c, k, &n);
        /* an unnamed column (pandas' to_csv() of a time index, InfluxDB's annotation column)
         * is refused only if it is to be a feature: its name is needed then */
        if (n == 0)
            continue;
        if (n >= CC_FEATURE_NAME_MAX)
            return cc_errf(L->err, L->errlen, -EINVAL,
                           "%s:%lld:%d: header column %d name too long (%zu bytes, at most %d)",
                           L->name, (long long)c->fline[k], c->col[k], k + 1, n,
                           CC_FEATURE_NAME_MAX - 1);
        memcpy(L->hdr[k], f, n);
        L->hdr[k][n] = 0;
        for (int j = 0; j < k; j++)
            if (strcmp(L->hdr[j], L->hdr[k]) == 0)
                return cc_errf(L->err, L->errlen, -EINVAL, "%s:%lld:%d: duplicate column '%s'",
                               L->name, (long long)c->fline[k], c->col[k], L->hdr[k]);
    }
    return 0;
}

/* Finds the time column (the first unless named) and the cell column (named, or
 * `cell_id`; none in a wide file): every other column may be a feature. */
static int find_time_and_cell_columns(Load *L)
{
    const CcDataSettings *sp = L->sp;
    L->tcol = 0;
    L->ccol = -1;
    if (sp->time_column && *sp->time_column) {
        L->tcol = -1;
        for (int k = 0; k < L->ncols; k++)
            if (strcmp(L->hdr[k], sp->time_column) == 0)
                L->tcol = k;
        if (L->tcol < 0)
            return cc_errf(L->err, L->errlen, -EINVAL, "%s:1: no time column '%s' in the header",
                           L->name, sp->time_column);
    }
    const char *cellname = sp->cell_column && *sp->cell_column ? sp->cell_column : "cell_id";
    if (sp->format != CC_DATA_WIDE) {
        for (int k = 0; k < L->ncols; k++)
            if (k != L->tcol && strcmp(L->hdr[k], cellname) == 0)
                L->ccol = k;
        if (L->ccol < 0 && sp->format == CC_DATA_LONG)
            return cc_errf(L->err, L->errlen, -EINVAL,
                           "%s:1: long format needs a '%s' column in the header", L->name,
                           cellname);
        if (L->ccol < 0 && sp->cell_column && *sp->cell_column)
            return cc_errf(L->err, L->errlen, -EINVAL,
                           "%s:1: no cell column '%s' in the header (other than the time column)",
                           L->name, cellname);
    }
    snprintf(L->tname, sizeof L->tname, "%s", L->hdr[L->tcol]);
    return 0;
}

/* Adds column k as the next feature; the feature count is bounded by the dataset's arrays. */
static int add_feature(Load *L, int k, const char *too_many)
{
    if (L->F == CC_DATA_MAX_FEATURES)
        return cc_errf(L->err, L->errlen, -ERANGE, "%s: more than %d %s", L->name,
                       CC_DATA_MAX_FEATURES, too_many);
    L->colmap[L->F] = k;
    snprintf(L->ds->features[L->F], CC_FEATURE_NAME_MAX, "%s", L->hdr[k]);
    L->F++;
    return 0;
}

/* The features named in settings (comma-separated, in that order): each must be a column
 * of the header other than time and cell, and named once. */
static int select_named_features(Load *L)
{
    const char *p = L->sp->features;
    while (*p) {
        const char *q = strchr(p, ',');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        while (n && isspace((unsigned char)*p)) {
            p++;
            n--;
        }
        while (n && isspace((unsigned char)p[n - 1]))
            n--;
        int found = -1;
        for (int k = 0; k < L->ncols; k++)
            if (strlen(L->hdr[k]) == n && strncmp(L->hdr[k], p, n) == 0)
                found = k;
        if (found < 0 || found == L->tcol || found == L->ccol)
            return cc_errf(
                L->err, L->errlen, -EINVAL, "%s:1: feature '%.*s' %s", L->name, (int)n, p,
                found < 0 ? "is not a column of the header" : "is the time or cell column");
        for (int j = 0; j < L->F && L->F < CC_DATA_MAX_FEATURES; j++)
            if (L->colmap[j] == found)
                return cc_errf(L->err, L->errlen, -EINVAL, "%s: feature '%s' selected twice",
                               L->name, L->hdr[found]);
        int ret = add_feature(L, found, "features");
        if (ret)
            return ret;
        if (!q)
            break;
        p = q + 1;
    }
    return 0;
}

/* Every column but time and cell is a feature, and needs a name. A `label` column is
 * remembered: it is dropped after the rows if it holds 0/1 only (drop_label_column). */
static int select_all_features(Load *L)
{
    for (int k = 0; k < L->ncols; k++) {
        if (k == L->tcol || k == L->ccol)
            continue;
        if (!L->hdr[k][0])
            return cc_errf(L->err, L->errlen, -EINVAL,
                           "%s:%lld:%d: header column %d name is empty (a KPI needs a name; "
                           "or choose the KPI columns with --features)",
                           L->name, (long long)L->c->fline[k], L->c->col[k], k + 1);
        if (is_label_name(L->hdr[k]) && L->label_col < 0)
            L->label_col = L->F;
        int ret = add_feature(L, k, "feature columns; choose some with features");
        if (ret)
            return ret;
    }
    return 0;
}

/* The header phase: names, time and cell columns, features, and the cell id of a wide
 * file (given, or the file's base name). */
static int read_header(Load *L)
{
    int ret = read_header_names(L);
    if (!ret)
        ret = find_time_and_cell_columns(L);
    if (ret)
        return ret;
    L->label_col = -1;
    ret = L->sp->features && *L->sp->features ? select_named_features(L) : select_all_features(L);
    if (ret)
        return ret;
    if (L->F == 0)
        return cc_errf(L->err, L->errlen, -EINVAL, "%s:1: no feature columns", L->name);
    L->ds->n_features = L->F;
    for (L->vshift = 0;
         ((size_t)2 << L->vshift) * (size_t)L->F * sizeof(float) <= VALUE_BLOCK_BYTES;)
        L->vshift++;
    L->vrows = (size_t)1 << L->vshift;
    if (L->sp->cell_id && *L->sp->cell_id)
        snprintf(L->wide_id, sizeof L->wide_id, "%s", L->sp->cell_id);
    else
        base_name(L->name, L->wide_id, sizeof L->wide_id);
    return 0;
}

/* Reads one row's time into r->ts (and r->alt for an a/b/YYYY date, whose order is decided
 * on the whole file later), noting whether it is a plain row index (decided with the step). */
static int read_row_time(Load *L, Row *r)
{
    const CcDataSettings *sp = L->sp;
    Csv *c = L->c;
    int tcol = L->tcol;
    size_t n;
    const char *f = csv_field(c, tcol, &n);
    int64_t idx;
    int is_index = parse_index(f, n, &idx) == 0;
    double alt = NAN;
    L->all_index &= is_index;
    if (is_index) {
        L->idx_min = idx < L->idx_min ? idx : L->idx_min;
        L->idx_max = idx > L->idx_max ? idx : L->idx_max;
    }
    if (sp->time_index == CC_TIME_INDEX_YES) {
        if (!is_index)
            return cc_errf(L->err, L->errlen, -EINVAL,
                           "%s:%lld:%d: time index '%.*s' is not a non-negative integer", L->name,
                           (long long)c->fline[tcol], c->col[tcol], (int)(n > 64 ? 64 : n), f);
        r->ts = (double)idx; /* × S in decide_step */
    } else if (!sp->time_format && slash_times(f, n, &r->ts, &alt) == 0 &&
               !(isnan(r->ts) && isnan(alt))) {
        /* an a/b/YYYY date: which part is the month is decided on the whole file */
        SlashSeen *o = isnan(r->ts) ? &L->slash_day_first
                       : isnan(alt) ? &L->slash_month_first
                                    : NULL;
        if (o && !o->line) {
            o->line = c->fline[tcol];
            snprintf(o->text, sizeof o->text, "%.*s", (int)(n > 31 ? 31 : n), f);
        }
        L->n_slash++;
        if (!L->alt) { /* the first a/b/YYYY time: earlier rows have no second reading */
            L->alt = malloc(L->rows_cap * sizeof *L->alt);
            if (!L->alt)
                return -ENOMEM;
            for (size_t i = 0; i < L->nrows; i++)
                L->alt[i] = NAN;
        }
    } else if (n == 0) {
        return cc_errf(L->err, L->errlen, -EINVAL,
                       "%s:%lld:%d: no time in the time column '%s' (another column? give "
                       "--time-column NAME)",
                       L->name, (long long)c->fline[tcol], c->col[tcol], L->tname);
    } else if (cc_data_parse_time(f, n, sp->time_format, &r->ts)) {
        /* on the first row, a value with no digit-and-separator shape of a time is more
         * likely another column (cell ids first) than a time format */
        int other = L->nrows == 0 && !(sp->time_column && *sp->time_column) && !sp->time_format;
        return cc_errf(L->err, L->errlen, -EINVAL, "%s:%lld:%d: cannot parse time '%.*s' (%s%s)%s",
                       L->name, (long long)c->fline[tcol], c->col[tcol], (int)(n > 64 ? 64 : n), f,
                       sp->time_format ? "format "
                                       : "auto: unix s/ms/us/ns, ISO-8601, "
                                         "YYYY-MM-DD HH:MM:SS, M/D/YYYY or D/M/YYYY H:MM, "
                                         "D.M.YYYY H:MM; else give a time format",
                       sp->time_format ? sp->time_format : "",
                       other ? "; is the time in another column than the first? give "
                               "--time-column NAME (and --cell-column NAME for the cell ids)"
                             : "");
    }
    /* Past the year 9999 (a stray digit, or a unit the magnitude rule cannot tell) a time
     * is refused here: the step detection works in int64 milliseconds. */
    if (fabs(r->ts) > CC_DATA_TIME_MAX || fabs(alt) > CC_DATA_TIME_MAX)
        return cc_errf(L->err, L->errlen, -EINVAL,
                       "%s:%lld:%d: time '%.*s' is out of range (beyond the year 9999)", L->name,
                       (long long)c->fline[tcol], c->col[tcol], (int)(n > 64 ? 64 : n), f);
    if (L->alt)
        L->alt[L->nrows] = alt;
    return 0;
}

/* Reads one row's cell (the cell column, or the wide file's one cell) into r->cell: the
 * cell table numbers the cells in order of first appearance. */
static int read_row_cell(Load *L, Row *r)
{
    if (L->ccol < 0) {
        r->cell = celltab_find_or_add(&L->cells, L->wide_id);
        return r->cell < 0 ? r->cell : 0;
    }
    Csv *c = L->c;
    size_t n;
    const char *f = csv_field(c, L->ccol, &n);
    if (n == 0 || n >= CC_CELL_ID_MAX)
        return cc_errf(L->err, L->errlen, -EINVAL, "%s:%lld:%d: cell id %s", L->name,
                       (long long)c->fline[L->ccol], c->col[L->ccol], n ? "too long" : "is empty");
    char id[CC_CELL_ID_MAX];
    memcpy(id, f, n);
    id[n] = 0;
    r->cell = celltab_find_or_add(&L->cells, id);
    return r->cell < 0 ? r->cell : 0;
}

/* Reads one row's feature values into v (NAN for a missing token, counted): a value must
 * be a number (a decimal comma accepted when the delimiter is not a comma) finite in float. */
static int read_row_values(Load *L, float *v)
{
    Csv *c = L->c;
    for (int j = 0; j < L->F; j++) {
        int k = L->colmap[j];
        size_t n;
        const char *f = csv_field(c, k, &n);
        if (is_missing_token(f, n)) {
            v[j] = NAN;
            L->rep.nan_cells[j]++;
            continue;
        }
        char nb[128];
        char *e = NULL;
        double d = 0;
        if (n < sizeof nb) {
            memcpy(nb, f, n);
            nb[n] = 0;
            char *comma = c->delim != ',' ? strchr(nb, ',') : NULL;
            if (comma && !strchr(comma + 1, ',') && !strchr(nb, '.'))
                *comma = '.'; /* a decimal comma */
            d = strtod(nb, &e);
        }
        if (n >= sizeof nb || *e || e == nb) {
            /* on the first row a text column is most often the cell ids under another
             * name than cell_id (only when no cell column was found) */
            char hint[CC_FEATURE_NAME_MAX + 160] = "";
            if (L->nrows == 0 && L->ccol < 0)
                snprintf(hint, sizeof hint,
                         " (the cell ids? give --cell-column %s; another text column? "
                         "choose the KPI columns with --features)",
                         L->ds->features[j]);
            else if (L->nrows == 0 && !has_digit(f, n))
                snprintf(hint, sizeof hint,
                         " (a text column? choose the KPI columns with --features)");
            return cc_errf(L->err, L->errlen, -EINVAL,
                           "%s:%lld:%d: column '%s': not a number: '%.*s'%s", L->name,
                           (long long)c->fline[k], c->col[k], L->ds->features[j],
                           (int)(n > 40 ? 40 : n), f, hint);
        }
        if (!isfinite(d) || fabs(d) > 3.4e38)
            return cc_errf(L->err, L->errlen, -EINVAL,
                           "%s:%lld:%d: column '%s': value '%.*s' is not finite in float", L->name,
                           (long long)c->fline[k], c->col[k], L->ds->features[j],
                           (int)(n > 40 ? 40 : n), f);
        v[j] = (float)d;
    }
    return 0;
}

/* Row i's values: F floats in block i / vrows (F is the current feature count: the blocks
 * keep vrows rows when drop_label_column narrows them). */
static float *row_vals(const Load *L, size_t i)
{
    return L->vblock[i >> L->vshift] + (i & (L->vrows - 1)) * (size_t)L->F;
}

/* Makes room for row nrows: a value block when the last is full, and the rows (and alt),
 * whose capacity doubles; pages past the rows read are never touched, so they cost address
 * space, not memory, and fit_rows gives them back once the rows are in. */
static int grow_rows(Load *L)
{
    if (L->nrows >= (size_t)INT_MAX)
        return cc_errf(L->err, L->errlen, -ERANGE, "%s: too many rows", L->name);
    if (L->nrows == L->nblocks * L->vrows) {
        if (L->nblocks == L->blocks_cap) {
            size_t nc = L->blocks_cap ? L->blocks_cap * 2 : 64;
            float **nb = realloc(L->vblock, nc * sizeof *nb);
            if (!nb)
                return -ENOMEM;
            L->vblock = nb;
            L->blocks_cap = nc;
        }
        L->vblock[L->nblocks] = malloc(L->vrows * (size_t)L->F * sizeof **L->vblock);
        if (!L->vblock[L->nblocks])
            return -ENOMEM;
        L->nblocks++;
    }
    if (L->nrows < L->rows_cap)
        return 0;
    size_t nc = L->rows_cap ? L->rows_cap * 2 : 1024;
    Row *nr = realloc(L->rows, nc * sizeof *nr);
    if (!nr)
        return -ENOMEM;
    L->rows = nr;
    if (L->alt) {
        double *na = realloc(L->alt, nc * sizeof *na);
        if (!na)
            return -ENOMEM;
        L->alt = na;
    }
    L->rows_cap = nc;
    return 0;
}

/* Shrinks the rows and the last value block to the rows read (a failed shrink keeps the
 * larger block). */
static void fit_rows(Load *L)
{
    size_t n = L->nrows ? L->nrows : 1;
    Row *nr = realloc(L->rows, n * sizeof *nr);
    if (nr)
        L->rows = nr;
    L->rows_cap = n < L->rows_cap ? n : L->rows_cap;
    if (L->nblocks) {
        size_t used = L->nrows - (L->nblocks - 1) * L->vrows;
        float *nb = realloc(L->vblock[L->nblocks - 1], used * (size_t)L->F * sizeof *nb);
        if (nb)
            L->vblock[L->nblocks - 1] = nb;
    }
}

/* The rows phase: every record after the header into (time, cell, values), in file order. */
static int read_rows(Load *L)
{
    Csv *c = L->c;
    for (;;) {
        int ret = csv_next(c, &L->rep.blank_lines, L->err, L->errlen);
        if (ret <= 0)
            return ret;
        if (c->nf != L->ncols)
            return cc_errf(L->err, L->errlen, -EINVAL, "%s:%lld: expected %d fields, found %d",
                           L->name, (long long)c->rec_line, L->ncols, c->nf);
        if ((ret = grow_rows(L)))
            return ret;
        Row *r = &L->rows[L->nrows];
        if ((ret = read_row_time(L, r)) || (ret = read_row_cell(L, r)))
            return ret;
        r->order = (int)L->nrows;
        if ((ret = read_row_values(L, row_vals(L, L->nrows))))
            return ret;
        L->nrows++;
    }
}

/* A column named `label` (any case) that holds 0/1 only (missing allowed) marks rows
 * (anomaly labels): not a KPI unless named in features. Dropped here, the report says. */
static void drop_label_column(Load *L)
{
    int F = L->F, lc = L->label_col;
    if (lc < 0 || F <= 1)
        return;
    for (size_t i = 0; i < L->nrows; i++) {
        float lv = row_vals(L, i)[lc];
        if (!(isnan(lv) || lv == 0 || lv == 1))
            return;
    }
    snprintf(L->rep.skipped_label, sizeof L->rep.skipped_label, "%s", L->ds->features[lc]);
    for (size_t i = 0; i < L->nrows; i++) {
        /* within its block, row r moves from r·F to r·(F - 1): front to back is safe */
        const float *src = L->vblock[i / L->vrows] + (i % L->vrows) * (size_t)F;
        float *dst = L->vblock[i / L->vrows] + (i % L->vrows) * (size_t)(F - 1);
        memmove(dst, src, (size_t)lc * sizeof *dst);
        memmove(dst + lc, src + lc + 1, (size_t)(F - 1 - lc) * sizeof *dst);
    }
    for (int j = lc; j < F - 1; j++) {
        memcpy(L->ds->features[j], L->ds->features[j + 1], CC_FEATURE_NAME_MAX);
        L->rep.nan_cells[j] = L->rep.nan_cells[j + 1];
        L->colmap[j] = L->colmap[j + 1];
    }
    L->rep.nan_cells[F - 1] = 0;
    L->F = F - 1;
    L->ds->n_features = L->F;
}

/* The time-reading phase: the day-first decision for a/b/YYYY dates, then the rows sorted
 * by cell and time with the differences of successive times and their most common value,
 * from which decide_step tells a row index from unix times and detects the step. */
static int read_times(Load *L)
{
    if (L->n_slash) {
        int ret = slash_order(L->rows, L->alt, L->nrows, L->name, &L->slash_month_first,
                              &L->slash_day_first, L->err, L->errlen);
        if (ret < 0)
            return ret;
        L->rep.day_first = ret;
    }
    free(L->alt);
    L->alt = NULL;
    int ret =
        time_deltas(L->rows, L->nrows, L->cells.n, &L->rep.out_of_order, &L->deltas, &L->ndeltas);
    if (ret)
        return ret;
    /* Step length: the most common positive time difference of a cell's rows (ms) */
    L->mode_delta = 0;
    if (L->ndeltas) {
        qsort(L->deltas, L->ndeltas, sizeof *L->deltas, cmp_i64);
        int64_t run = 0, best_run = 0;
        for (size_t i = 0; i < L->ndeltas; i++) {
            run = (i > 0 && L->deltas[i] == L->deltas[i - 1]) ? run + 1 : 1;
            if (run > best_run) {
                best_run = run;
                L->mode_delta = L->deltas[i];
            }
        }
    }
    return 0;
}

/* The step S: given, or detected from the deltas. A time column of small consecutive
 * integers (or one declared an index) is a row index and needs S given: its times become
 * index × S. */
static int decide_step(Load *L)
{
    const CcDataSettings *sp = L->sp;
    int64_t S = sp->step_seconds;
    if (sp->time_index == CC_TIME_INDEX_YES ||
        (sp->time_index == CC_TIME_INDEX_AUTO && !sp->time_format && L->all_index &&
         L->idx_max < CC_DATA_INDEX_AUTO_MAX && L->mode_delta == 1000)) {
        if (S <= 0) {
            if (sp->time_index == CC_TIME_INDEX_YES)
                return cc_errf(L->err, L->errlen, -EINVAL,
                               "%s: the time column '%s' is a row index: give the seconds per "
                               "row (--step S)",
                               L->name, L->tname);
            return cc_errf(L->err, L->errlen, -EINVAL,
                           "%s: the time column '%s' holds small consecutive integers "
                           "(%lld..%lld), a row index rather than unix seconds: give the "
                           "seconds per row (--step S), or --time-index no to read them as "
                           "unix seconds",
                           L->name, L->tname, (long long)L->idx_min, (long long)L->idx_max);
        }
        for (size_t i = 0; i < L->nrows; i++)
            L->rows[i].ts *= (double)S;
        L->rep.time_index = 1;
    } else if (S <= 0) {
        if (L->ndeltas == 0)
            return cc_errf(L->err, L->errlen, -EINVAL,
                           "%s: cannot detect the step from a single time per cell; give it",
                           L->name);
        S = step_from_deltas(L->deltas, L->ndeltas, L->mode_delta);
        if (S <= 0)
            return cc_errf(L->err, L->errlen, -EINVAL,
                           "%s: most common time step %.3f s is not whole seconds; give the step "
                           "(--step S)",
                           L->name, L->mode_delta / 1000.0);
        L->rep.step_detected = 1;
    }
    L->ds->step_seconds = S;
    L->rep.step_seconds = S;
    return 0;
}

/* Maps each time to its step (rounded; off-grid times counted) and sorts the rows by cell
 * and step, so that each cell's rows are one run and duplicates sit side by side. */
static int assign_steps(Load *L)
{
    double S = (double)L->ds->step_seconds;
    for (size_t i = 0; i < L->nrows; i++) {
        Row *r = &L->rows[i];
        double rq = floor(r->ts / S + 0.5);
        if (fabs(rq) > 9e15)
            return cc_errf(L->err, L->errlen, -ERANGE, "%s: time out of range", L->name);
        if (fabs(r->ts - rq * S) > 1e-3)
            L->rep.misaligned++;
        r->ts = rq; /* the step from here on */
    }
    qsort(L->rows, L->nrows, sizeof *L->rows, cmp_row);
    return 0;
}

/* One series from the sorted rows [u, v) of one cell (gaps within max_gap): values at their
 * step (the last of equal steps wins; duplicates counted), missing steps imputed and
 * counted, a mostly-empty series noted in the report. */
static int build_segment(Load *L, size_t u, size_t v, int64_t p0, int64_t plast)
{
    const Row *rows = L->rows;
    int F = L->F;
    CcDataReport *rep = &L->rep;
    const char *id = L->cells.id[rows[u].cell];
    int64_t T = plast - p0 + 1, nu = 0;
    for (size_t i = u; i < v; i++)
        if (i == u || rows[i].ts != rows[i - 1].ts)
            nu++;
    if (T > (int64_t)INT_MAX / F || T > 16 * nu + 100000)
        return cc_errf(L->err, L->errlen, -ERANGE,
                       "%s: cell '%s' spans %lld steps of %lld s for %lld rows: wrong "
                       "step, stray timestamp, or set a max gap",
                       L->name, id, (long long)T, (long long)L->ds->step_seconds, (long long)nu);
    int ret = add_series(L->ds, &L->series_cap, id, p0, (int)T);
    if (ret)
        return ret;
    CcSeries *s = &L->ds->series[L->ds->n_series - 1];
    for (size_t i = u; i < v; i++) {
        size_t row = (size_t)(row_step(&rows[i]) - p0);
        const float *src = row_vals(L, i);
        if (i > u && rows[i].ts == rows[i - 1].ts) {
            rep->duplicates++;
            const float *prev = row_vals(L, i - 1);
            for (int j = 0; j < F; j++)
                if (src[j] != prev[j] && !(isnan(src[j]) && isnan(prev[j]))) {
                    rep->duplicates_differ++;
                    break;
                }
        }
        for (int j = 0; j < F; j++) {
            s->x[row * F + j] = src[j];
            s->mask[row * F + j] = !isnan(src[j]);
        }
    }
    rep->missing_steps += T - nu;
    if (T >= 8 && 2 * nu < T && rep->sparse_series++ == 0) {
        snprintf(rep->sparse_first, sizeof rep->sparse_first, "%s", s->cell_id);
        rep->sparse_first_share = (double)nu / (double)T;
    }
    impute_series(s, F, L->sp->impute, rep->imputed_cells);
    return 0;
}

/* Moves each row's values to the row's place in the sorted order (rows[i].order = i after),
 * following the permutation's cycles in place: the series are then built from the values
 * front to back, and each block is freed once passed. */
static void copy_values(float *dst, const float *src, int F)
{
    for (int f = 0; f < F; f++)
        dst[f] = src[f];
}

static void sort_values(Load *L)
{
    float tmp[CC_DATA_MAX_FEATURES];
    const int F = L->F;
    Row *rows = L->rows;
    for (size_t i = 0; i < L->nrows; i++) {
        if ((size_t)rows[i].order == i)
            continue;
        copy_values(tmp, row_vals(L, i), F);
        for (size_t j = i;;) {
            size_t k = (size_t)rows[j].order;
            rows[j].order = (int)j;
            if (k == i) {
                copy_values(row_vals(L, j), tmp, F);
                break;
            }
            __builtin_prefetch(&rows[rows[k].order]); /* the cycle's next step but one */
            copy_values(row_vals(L, j), row_vals(L, k), F);
            j = k;
        }
    }
}

/* The series phase: each cell's rows split where a gap exceeds max_gap_steps (counted),
 * each part one series (build_segment). */
static int build_series(Load *L)
{
    const Row *rows = L->rows;
    size_t nrows = L->nrows;
    for (size_t a = 0; a < nrows;) {
        size_t b = a;
        while (b < nrows && rows[b].cell == rows[a].cell)
            b++;
        for (size_t u = a; u < b;) {
            /* segment: from u, extend while gaps ≤ max_gap */
            int64_t p0 = row_step(&rows[u]), plast = p0;
            size_t v = u + 1;
            while (v < b) {
                int64_t gap = row_step(&rows[v]) - plast - 1;
                if (L->sp->max_gap_steps > 0 && gap > L->sp->max_gap_steps)
                    break;
                plast = row_step(&rows[v]);
                v++;
            }
            if (u > a)
                L->rep.segments_split++;
            int ret = build_segment(L, u, v, p0, plast);
            if (ret)
                return ret;
            u = v;
        }
        a = b;
        /* the value blocks wholly before the next cell's rows are done with */
        for (; L->vfreed < L->nblocks && (L->vfreed + 1) * L->vrows <= b; L->vfreed++) {
            free(L->vblock[L->vfreed]);
            L->vblock[L->vfreed] = NULL;
        }
    }
    return 0;
}

/* Runs the phases in order; the first error stops the load and frees what was built. */
static int load_run(Load *L, const char *buf, size_t len)
{
    int ret;
    if ((ret = load_begin(L, buf, len)) || (ret = read_header(L)) || (ret = read_rows(L)))
        return ret;
    L->rep.rows_read = (int64_t)L->nrows;
    if (L->nrows == 0)
        return cc_errf(L->err, L->errlen, -EINVAL, "%s: no data rows after the header", L->name);
    /* the text is no longer needed: only the rows and the dataset from here on */
    free(L->c->own);
    L->c->own = NULL;
    free(L->c->fields);
    L->c->fields = NULL;
    fit_rows(L);
    drop_label_column(L);
    if ((ret = read_times(L)) || (ret = decide_step(L)))
        return ret;
    free(L->deltas);
    L->deltas = NULL;
    if ((ret = assign_steps(L)))
        return ret;
    sort_values(L);
    return build_series(L);
}

/* One load of a buffer (fp NULL) or of a file read through a window of `chunk` bytes. */
static int load_open(CcDataset **out, FILE *fp, size_t chunk, const char *buf, size_t len,
                     const char *name, const CcDataSettings *sp, CcDataReport *report, char *err,
                     size_t errlen)
{
    CcDataSettings defs;
    if (!sp) {
        cc_data_default_settings(&defs);
        sp = &defs;
    }
    *out = NULL;
    Load *L = calloc(1, sizeof *L);
    if (!L)
        return -ENOMEM;
    L->sp = sp;
    L->name = name;
    L->err = err;
    L->errlen = errlen;
    L->all_index = 1;
    L->idx_min = INT64_MAX;
    L->idx_max = -1;
    int ret = -ENOMEM;
    L->c = calloc(1, sizeof *L->c);
    L->ds = L->c ? calloc(1, sizeof *L->ds) : NULL;
    if (!L->ds)
        goto error;
    snprintf(L->ds->source, sizeof L->ds->source, "%s", name);
    L->c->eof = fp == NULL;
    if (fp) {
        L->c->fp = fp;
        L->c->chunk = chunk ? chunk : READ_CHUNK_DEFAULT;
        L->c->own = malloc(L->c->chunk);
        if (!L->c->own)
            goto error;
        L->c->own_cap = L->c->chunk;
        buf = L->c->own;
        len = 0;
    }
    ret = load_run(L, buf, len);
    if (ret)
        goto error;
    if (report)
        *report = L->rep;
    *out = L->ds;
    L->ds = NULL;
error:
    if (L->c) {
        free(L->c->fields);
        free(L->c->own);
    }
    free(L->c);
    free(L->hdr);
    free(L->cells.id);
    free(L->cells.slot);
    free(L->rows);
    for (size_t i = 0; i < L->nblocks; i++)
        free(L->vblock[i]);
    free(L->vblock);
    free(L->alt);
    free(L->deltas);
    cc_data_close(&L->ds);
    free(L);
    return ret;
}

int cc_data_open_buffer(CcDataset **out, const char *buf, size_t len, const char *name,
                        const CcDataSettings *sp, CcDataReport *report, char *err, size_t errlen)
{
    return load_open(out, NULL, 0, buf, len, name, sp, report, err, errlen);
}

int cc_data_open_file(CcDataset **out, const char *path, const CcDataSettings *s,
                      CcDataReport *report, char *err, size_t errlen)
{
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return cc_errf(err, errlen, -EIO, "%s: %s", path, strerror(errno));
    int ret = load_open(out, fp, s ? s->read_chunk : 0, NULL, 0, path, s, report, err, errlen);
    fclose(fp);
    return ret;
}

/* ---------------------------------------------------------------------------------- */
/* Combination, selection, splits, statistics                                          */

int cc_data_append(CcDataset *ds, const CcDataset *next, enum CcImpute impute, int *join_row,
                   char *err, size_t errlen)
{
    const int F = ds->n_features;
    if (next->n_features != F || next->step_seconds != ds->step_seconds)
        return cc_errf(err, errlen, -EINVAL, "%s: features or step differ from %s", next->source,
                       ds->source);
    for (int f = 0; f < F; f++)
        if (strcmp(ds->features[f], next->features[f]))
            return cc_errf(err, errlen, -EINVAL, "%s: feature %d is '%s', expected '%s'",
                           next->source, f, next->features[f], ds->features[f]);
    for (int i = 0; i < next->n_series; i++) {
        const CcSeries *b = &next->series[i];
        int target = -1;
        for (int j = 0; j < ds->n_series; j++)
            if (strcmp(ds->series[j].cell_id, b->cell_id) == 0)
                target = j;
        if (target < 0 && next->n_series == 1 && ds->n_series == 1)
            target = 0; /* wide files: train/test of one series, names differ */
        if (target < 0) {
            CcSeries *ns = realloc(ds->series, (size_t)(ds->n_series + 1) * sizeof *ns);
            if (!ns)
                return -ENOMEM;
            ds->series = ns;
            CcSeries *s = &ds->series[ds->n_series];
            *s = *b;
            size_t n = (size_t)b->T * F;
            s->x = malloc(n * sizeof *s->x + 1);
            s->mask = malloc(n + 1);
            if (!s->x || !s->mask) {
                free(s->x);
                free(s->mask);
                return -ENOMEM;
            }
            memcpy(s->x, b->x, n * sizeof *s->x);
            memcpy(s->mask, b->mask, n);
            ds->n_series++;
            if (i == 0 && join_row)
                *join_row = 0;
            continue;
        }
        CcSeries *a = &ds->series[target];
        int64_t end = a->p0 + a->T;
        if (b->p0 < end) { /* name the times: a file cut inside one step's rows lands here */
            char t_next[CC_RFC3339_LEN] = "", t_last[CC_RFC3339_LEN] = "";
            cc_time_format_rfc3339(b->p0 * ds->step_seconds, t_next, sizeof t_next);
            cc_time_format_rfc3339((end - 1) * ds->step_seconds, t_last, sizeof t_last);
            return cc_errf(err, errlen, -EINVAL,
                           "%s: cell '%s' starts at step %lld (%s), not after the last step %lld "
                           "(%s) of %s: the second file must continue after the first (rows of "
                           "one step split between them?)",
                           next->source, b->cell_id, (long long)b->p0, t_next, (long long)(end - 1),
                           t_last, ds->source);
        }
        int64_t T = b->p0 + b->T - a->p0;
        if (T > INT_MAX / F)
            return cc_errf(err, errlen, -ERANGE, "cell '%s': series too long", b->cell_id);
        float *x = realloc(a->x, (size_t)T * F * sizeof *x);
        if (!x)
            return -ENOMEM;
        a->x = x;
        uint8_t *m = realloc(a->mask, (size_t)T * F);
        if (!m)
            return -ENOMEM;
        a->mask = m;
        size_t hole0 = (size_t)a->T * F, off = (size_t)(b->p0 - a->p0) * F;
        memset(m + hole0, 0, off - hole0);
        for (size_t k = hole0; k < off; k++)
            x[k] = 0;
        /* re-impute from raw: restore NaN where masked, then impute the whole series */
        memcpy(x + off, b->x, (size_t)b->T * F * sizeof *x);
        memcpy(m + off, b->mask, (size_t)b->T * F);
        if (i == 0 && join_row)
            *join_row = (int)(b->p0 - a->p0);
        a->T = (int)T;
        impute_series(a, F, impute, NULL);
    }
    size_t l = strlen(ds->source), nl = strlen(next->source);
    if (l + nl + 2 <= sizeof ds->source) {
        ds->source[l] = '+';
        memcpy(ds->source + l + 1, next->source, nl + 1);
    }
    return 0;
}

int cc_data_feature_index(const CcDataset *ds, const char *name)
{
    for (int f = 0; f < ds->n_features; f++)
        if (strcmp(ds->features[f], name) == 0)
            return f;
    return -1;
}

int cc_data_select(CcDataset *ds, const char *const *names, int n, char *err, size_t errlen)
{
    int idx[CC_DATA_MAX_FEATURES];
    if (n <= 0 || n > CC_DATA_MAX_FEATURES)
        return cc_errf(err, errlen, -EINVAL, "bad feature count %d", n);
    for (int j = 0; j < n; j++) {
        idx[j] = cc_data_feature_index(ds, names[j]);
        if (idx[j] < 0)
            return cc_errf(err, errlen, -EINVAL, "%s: no feature '%s' in the data", ds->source,
                           names[j]);
    }
    const int F = ds->n_features;
    /* allocate everything first so that a failure leaves the dataset unchanged */
    float **nx = calloc((size_t)ds->n_series + 1, sizeof *nx);
    uint8_t **nm = calloc((size_t)ds->n_series + 1, sizeof *nm);
    int ret = 0;
    if (!nx || !nm) {
        ret = -ENOMEM;
        goto done;
    }
    for (int s = 0; s < ds->n_series; s++) {
        size_t T = (size_t)ds->series[s].T;
        nx[s] = malloc(T * n * sizeof **nx + 1);
        nm[s] = malloc(T * n + 1);
        if (!nx[s] || !nm[s]) {
            ret = -ENOMEM;
            goto done;
        }
    }
    for (int s = 0; s < ds->n_series; s++) {
        CcSeries *se = &ds->series[s];
        size_t T = (size_t)se->T;
        for (size_t i = 0; i < T; i++)
            for (int j = 0; j < n; j++) {
                nx[s][i * n + j] = se->x[i * F + idx[j]];
                nm[s][i * n + j] = se->mask[i * F + idx[j]];
            }
        free(se->x);
        free(se->mask);
        se->x = nx[s];
        se->mask = nm[s];
        nx[s] = NULL;
        nm[s] = NULL;
    }
    char tmp[CC_DATA_MAX_FEATURES][CC_FEATURE_NAME_MAX];
    for (int j = 0; j < n; j++)
        memcpy(tmp[j], ds->features[idx[j]], CC_FEATURE_NAME_MAX);
    memcpy(ds->features, tmp, sizeof tmp[0] * (size_t)n);
    ds->n_features = n;
done:
    for (int s = 0; s < ds->n_series && nx && nm; s++) {
        free(nx[s]);
        free(nm[s]);
    }
    free(nx);
    free(nm);
    return ret;
}

static int parse_int_at(const char **p, long long *v)
{
    char *e;
    errno = 0;
    long long x = strtoll(*p, &e, 10);
    if (e == *p || errno)
        return -1;
    *v = x;
    *p = e;
    return 0;
}

int cc_data_ett_split(int64_t step_seconds, CcRange out[3])
{
    if (step_seconds != 3600 && step_seconds != 900)
        return -EINVAL;
    const int month = (int)(30 * 86400 / step_seconds);
    out[0] = (CcRange){0, 12 * month};
    out[1] = (CcRange){12 * month, 16 * month};
    out[2] = (CcRange){16 * month, 20 * month};
    return 0;
}

int cc_data_split(const char *spec, int T, CcRange out[3], char *err, size_t errlen)
{
    if (!spec || !*spec)
        spec = "0.7,0.1";
    if (strncmp(spec, "rows:", 5) == 0) {
        const char *p = spec + 5;
        int prev_end = 0;
        for (int i = 0; i < 3; i++) {
            long long a, b;
            if (parse_int_at(&p, &a) || *p != '-' || (p++, parse_int_at(&p, &b)))
                return cc_errf(err, errlen, -EINVAL, "split '%s': expected rows:A-B,C-D,E-F", spec);
            if (a < 0 || b < a || b > T || a > INT_MAX)
                return cc_errf(err, errlen, -EINVAL,
                               "split '%s': range %lld-%lld outside 0..%d or reversed", spec, a, b,
                               T);
            if (a < prev_end)
                return cc_errf(err, errlen, -EINVAL, "split '%s': ranges overlap", spec);
            out[i].begin = (int)a;
            out[i].end = (int)b;
            prev_end = (int)b;
            if (i < 2) {
                if (*p != ',')
                    return cc_errf(err, errlen, -EINVAL, "split '%s': expected rows:A-B,C-D,E-F",
                                   spec);
                p++;
            }
        }
        if (*p)
            return cc_errf(err, errlen, -EINVAL, "split '%s': trailing text", spec);
        return 0;
    }
    char *e;
    double a = strtod(spec, &e);
    if (e == spec || *e != ',')
        return cc_errf(err, errlen, -EINVAL, "split '%s': expected TRAIN,VAL fractions", spec);
    const char *p = e + 1;
    double b = strtod(p, &e);
    if (e == p || *e || !(a >= 0) || !(b >= 0) || a + b > 1.0 + 1e-12)
        return cc_errf(err, errlen, -EINVAL, "split '%s': fractions must be ≥ 0 with sum ≤ 1",
                       spec);
    int i1 = (int)floor(a * T + 1e-9), i2 = (int)floor((a + b) * T + 1e-9);
    if (i2 > T)
        i2 = T;
    out[0] = (CcRange){0, i1};
    out[1] = (CcRange){i1, i2};
    out[2] = (CcRange){i2, T};
    return 0;
}

void cc_data_stats(const CcDataset *ds, int s, CcRange r, double *mean, double *std)
{
    const int F = ds->n_features;
    const CcSeries *se = &ds->series[s];
    if (r.begin < 0)
        r.begin = 0;
    if (r.end > se->T)
        r.end = se->T;
    for (int f = 0; f < F; f++) {
        double sum = 0, sq = 0;
        int64_t n = 0;
        for (int i = r.begin; i < r.end; i++) {
            size_t k = (size_t)i * F + f;
            if (!se->mask[k])
                continue;
            sum += se->x[k];
            n++;
        }
        double mu = n ? sum / (double)n : 0.0;
        for (int i = r.begin; i < r.end; i++) {
            size_t k = (size_t)i * F + f;
            if (se->mask[k])
                sq += (se->x[k] - mu) * (se->x[k] - mu);
        }
        double sd = n ? sqrt(sq / (double)n) : 1.0;
        mean[f] = mu;
        std[f] = sd > 0 ? sd : 1.0;
    }
}

void cc_data_standardize(CcDataset *ds, const double *mean, const double *std)
{
    const int F = ds->n_features;
    for (int s = 0; s < ds->n_series; s++) {
        CcSeries *se = &ds->series[s];
        for (size_t i = 0; i < (size_t)se->T; i++)
            for (int f = 0; f < F; f++)
                se->x[i * F + f] = (float)((se->x[i * F + f] - mean[f]) / std[f]);
    }
}

void cc_data_report_format(const CcDataReport *r, const CcDataset *ds, char *buf, size_t n)
{
    size_t len = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        if (len < n) {                                                                             \
            int w = snprintf(buf + len, n - len, __VA_ARGS__);                                     \
            len += w > 0 ? (size_t)w : 0;                                                          \
        }                                                                                          \
    } while (0)
    if (!n)
        return;
    buf[0] = 0;
    char db[8];
    PUT("%s: %lld rows, %d series, %d features, step %llds%s", ds->source, (long long)r->rows_read,
        ds->n_series, ds->n_features, (long long)r->step_seconds,
        r->step_detected ? " (detected)" : "");
    if (r->day_first)
        PUT(", dates day first (D/M/YYYY)");
    if (r->time_index)
        PUT(", time = row index x %llds", (long long)r->step_seconds);
    if (r->delimiter && r->delimiter != ',')
        PUT(", delimiter %s", delim_name(r->delimiter, db, sizeof db));
    if (r->skipped_label[0])
        PUT("; column '%s' (0/1) not loaded as a KPI (a row label; name it in --features to "
            "train on it)",
            r->skipped_label);
    PUT("; missing steps inserted %lld, duplicates %lld", (long long)r->missing_steps,
        (long long)r->duplicates);
    if (r->duplicates_differ)
        PUT(" (%lld with other values: the later row kept)", (long long)r->duplicates_differ);
    PUT(", out of order %lld, misaligned %lld", (long long)r->out_of_order,
        (long long)r->misaligned);
    if (r->segments_split)
        PUT(", series split at gaps %lld", (long long)r->segments_split);
    if (r->sparse_series)
        PUT("; %lld series with under half their steps in the file (first '%s': %.0f%%; "
            "another step than %llds? give them their own file, or --step)",
            (long long)r->sparse_series, r->sparse_first, 100.0 * r->sparse_first_share,
            (long long)r->step_seconds);
    int any = 0;
    for (int f = 0; f < ds->n_features; f++)
        if (r->nan_cells[f] || r->imputed_cells[f]) {
            PUT("%s%s %lld/%lld", any ? ", " : "; NaN/imputed per feature: ", ds->features[f],
                (long long)r->nan_cells[f], (long long)r->imputed_cells[f]);
            any = 1;
        }
    any = 0;
    for (int f = 0; f < ds->n_features; f++) {
        int seen = 0;
        for (int i = 0; i < ds->n_series && !seen; i++)
            for (int t = 0; t < ds->series[i].T && !seen; t++)
                seen = ds->series[i].mask[(size_t)t * ds->n_features + f];
        if (!seen) {
            PUT("%s%s", any ? ", " : "; no value at all in ", ds->features[f]);
            any = 1;
        }
    }
#undef PUT
}

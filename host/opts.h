/*
 * opts.h — the one command-line parser of cellcastd and the cellcast CLI: a table of
 * options (long name, optional short letter, typed target, range, help line) parsed in
 * one call, with the --help text generated from the same table.
 *
 * Accepted forms: `--name value`, `--name=value`, a unique prefix of a long name, `-x value`,
 * `-xvalue`, clustered short flags (`-an`), `--` (what follows is positional). A value is
 * always the next argument, even when it starts with '-' (`--lag -1`). `--help` and `-h`
 * print the help. Errors name the program, the option and the problem, on stderr.
 */
#ifndef CC_OPTS_H
#define CC_OPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum CcOptType {
    CC_OPT_SECTION, ///< not an option: `help` is a heading of the generated help
    CC_OPT_FLAG,    ///< int, set to 1
    CC_OPT_STRING,  ///< const char *, pointing into argv
    CC_OPT_INT,     ///< int; the value must be an integer (1e3 is one) in [min, max]
    CC_OPT_INT64,   ///< int64_t; likewise
    CC_OPT_DOUBLE,  ///< double, finite, in [min, max]
    CC_OPT_CALL,    ///< call(opt, value): for enumerations, lists and repeatable options
};

enum {
    CC_OPT_REQUIRED = 1,     ///< missing → error
    CC_OPT_SHOW_DEFAULT = 2, ///< the help ends with "(default <the target's value>)"
};

typedef struct CcOpt CcOpt;

/** Takes the value of a CC_OPT_CALL option; on error writes a message (without the program
 * name) into err and returns a negative errno. */
typedef int (*CcOptCall)(const CcOpt *opt, const char *value, char *err, size_t errlen);

struct CcOpt {
    const char *name; ///< long name without "--" (CC_OPT_SECTION: NULL)
    char short_name;  ///< one-letter form, 0: none
    enum CcOptType type;
    void *target;     ///< see CcOptType; CC_OPT_CALL: the callback's own state
    double min, max;  ///< numeric range; both 0: the type's whole range
    const char *arg;  ///< the value's placeholder in the help ("FILE"); NULL: "X"
    const char *help; ///< help text; '\n' starts an indented continuation line
    unsigned flags;   ///< CC_OPT_REQUIRED | CC_OPT_SHOW_DEFAULT
    CcOptCall call;   ///< CC_OPT_CALL
    int given;        ///< set by cc_opts_parse: how many times the option was given
};

typedef struct CcOptsSpec {
    const char *prog;   ///< message prefix and help name, e.g. "cellcast train"
    const char *usage;  ///< the help's first line(s) after "usage: "
    const char *about;  ///< paragraph between the usage and the options (may be NULL)
    const char *epilog; ///< text after the options (may be NULL)
    CcOpt *opts;
    int n_opts;
    int max_args; ///< positional arguments accepted (≤ CC_OPTS_MAX_ARGS)
} CcOptsSpec;

/** Most positional arguments a spec may accept. */
#define CC_OPTS_MAX_ARGS 16

/** Returned by cc_opts_parse when --help was printed (the program then exits 0). */
#define CC_OPTS_HELP 1

/**
 * Parses argv[1..argc-1] into the table's targets (argv[0] is the program or subcommand).
 * Positional arguments (at most spec->max_args, else an error) are moved, in order, to the
 * end of argv (a "--" is dropped); *first_arg (may be NULL) gets the index of the first. Returns 0,
 * CC_OPTS_HELP after printing the help on stdout, or -EINVAL after printing the error on
 * stderr (the program then exits 2).
 */
int cc_opts_parse(const CcOptsSpec *spec, int argc, char **argv, int *first_arg);

/** Writes the help generated from the table. */
void cc_opts_help(const CcOptsSpec *spec, FILE *out);

/** The table fields of a CcOptsSpec from an array: {.prog = ..., CC_OPTS_TABLE(opts)}. */
#define CC_OPTS_TABLE(t) .opts = (t), .n_opts = (int)(sizeof(t) / sizeof(t)[0])

/* Table entries; the trailing arguments are more designated initializers, e.g.
 * CC_OPTS_STR("model", &path, "FILE", "the model", .short_name = 'm', .flags = CC_OPT_REQUIRED) */
#define CC_OPTS_HEADING(text)                                                                      \
    {                                                                                              \
        .type = CC_OPT_SECTION, .help = (text)                                                     \
    }
#define CC_OPTS_FLAG(n, t, h, ...)                                                                 \
    {                                                                                              \
        .name = (n), .type = CC_OPT_FLAG, .target = (t), .help = (h), __VA_ARGS__                  \
    }
#define CC_OPTS_STR(n, t, a, h, ...)                                                               \
    {                                                                                              \
        .name = (n), .type = CC_OPT_STRING, .target = (t), .arg = (a), .help = (h), __VA_ARGS__    \
    }
#define CC_OPTS_NUM(type_, n, t, lo, hi, a, h, ...)                                                \
    {                                                                                              \
        .name = (n), .type = (type_), .target = (t), .min = (lo), .max = (hi), .arg = (a),         \
        .help = (h), __VA_ARGS__                                                                   \
    }
#define CC_OPTS_INT(n, t, lo, hi, a, h, ...)                                                       \
    CC_OPTS_NUM(CC_OPT_INT, n, t, lo, hi, a, h, __VA_ARGS__)
#define CC_OPTS_INT64(n, t, lo, hi, a, h, ...)                                                     \
    CC_OPTS_NUM(CC_OPT_INT64, n, t, lo, hi, a, h, __VA_ARGS__)
#define CC_OPTS_DBL(n, t, lo, hi, a, h, ...)                                                       \
    CC_OPTS_NUM(CC_OPT_DOUBLE, n, t, lo, hi, a, h, __VA_ARGS__)
#define CC_OPTS_CALL(n, fn, t, a, h, ...)                                                          \
    {                                                                                              \
        .name = (n), .type = CC_OPT_CALL, .call = (fn), .target = (t), .arg = (a), .help = (h),    \
        __VA_ARGS__                                                                                \
    }

#endif

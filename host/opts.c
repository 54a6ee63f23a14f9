/* opts.c — the table-driven command-line parser of cellcastd and the cellcast CLI. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "opts.h"

/* Column of the help texts in the generated help. */
#define HELP_COLUMN 24

static int is_option(const CcOpt *o) { return o->type != CC_OPT_SECTION && o->name; }

/* The option named by `name` (len characters): an exact match, else the only option of
 * which it is a prefix. NULL with *ambiguous set when several options start with it. */
static CcOpt *find_long(const CcOptsSpec *spec, const char *name, size_t len, int *ambiguous)
{
    CcOpt *hit = NULL;
    *ambiguous = 0;
    for (int i = 0; i < spec->n_opts; i++) {
        CcOpt *o = &spec->opts[i];
        if (!is_option(o) || strncmp(o->name, name, len))
            continue;
        if (strlen(o->name) == len)
            return o;
        if (hit)
            *ambiguous = 1;
        hit = o;
    }
    return *ambiguous ? NULL : hit;
}

static CcOpt *find_short(const CcOptsSpec *spec, char c)
{
    for (int i = 0; i < spec->n_opts; i++)
        if (is_option(&spec->opts[i]) && spec->opts[i].short_name == c)
            return &spec->opts[i];
    return NULL;
}

/* Error message "PROG: --NAME: 'VALUE' is not <what> in [lo, hi]" (or without the range
 * when the range is the type's whole range). */
static int bad_number(const CcOptsSpec *spec, const CcOpt *o, const char *value, const char *what)
{
    if (o->min == 0 && o->max == 0)
        fprintf(stderr, "%s: --%s: '%s' is not %s\n", spec->prog, o->name, value, what);
    else
        fprintf(stderr, "%s: --%s: '%s' is not %s in [%.15g, %.15g]\n", spec->prog, o->name, value,
                what, o->min, o->max);
    return -EINVAL;
}

static int parse_number(const char *s, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return end == s || *end || errno || !isfinite(*v) ? -EINVAL : 0;
}

static int in_range(const CcOpt *o, double v, double type_min, double type_max)
{
    double lo = o->min, hi = o->max;
    if (lo == 0 && hi == 0)
        lo = type_min, hi = type_max;
    return v >= lo && v <= hi;
}

/* Stores one value into the option's target. */
static int take_value(const CcOptsSpec *spec, CcOpt *o, const char *value)
{
    double v = 0;
    char err[512];
    switch (o->type) {
    case CC_OPT_STRING: *(const char **)o->target = value; return 0;
    case CC_OPT_DOUBLE:
        if (parse_number(value, &v) || !in_range(o, v, -HUGE_VAL, HUGE_VAL))
            return bad_number(spec, o, value, "a number");
        *(double *)o->target = v;
        return 0;
    case CC_OPT_INT:
        if (parse_number(value, &v) || v != floor(v) || !in_range(o, v, INT32_MIN, INT32_MAX))
            return bad_number(spec, o, value, "an integer");
        *(int *)o->target = (int)v;
        return 0;
    case CC_OPT_INT64: {
        /* strtoll first: every int64 is exact there, which a double is not */
        char *end;
        errno = 0;
        long long x = strtoll(value, &end, 10);
        if (end == value || *end || errno) {
            if (parse_number(value, &v) || v != floor(v) || fabs(v) >= 9007199254740992.0)
                return bad_number(spec, o, value, "an integer");
            x = (long long)v;
        }
        if (!in_range(o, (double)x, -HUGE_VAL, HUGE_VAL))
            return bad_number(spec, o, value, "an integer");
        *(int64_t *)o->target = x;
        return 0;
    }
    case CC_OPT_CALL:
        err[0] = 0;
        if (o->call(o, value, err, sizeof err) < 0) {
            fprintf(stderr, "%s: %s\n", spec->prog, err[0] ? err : "bad value");
            return -EINVAL;
        }
        return 0;
    default: return -EINVAL;
    }
}

/* One `--name[=value]` argument at argv[*i]; advances *i past a separate value. */
static int parse_long(const CcOptsSpec *spec, int argc, char **argv, int *i)
{
    const char *arg = argv[*i] + 2, *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    int ambiguous;
    CcOpt *o = find_long(spec, arg, len, &ambiguous);
    if (!o) {
        fprintf(stderr, "%s: %s option '--%.*s' (see %s --help)\n", spec->prog,
                ambiguous ? "ambiguous" : "unknown", (int)len, arg, spec->prog);
        return -EINVAL;
    }
    o->given++;
    if (o->type == CC_OPT_FLAG) {
        if (eq) {
            fprintf(stderr, "%s: option '--%s' takes no value\n", spec->prog, o->name);
            return -EINVAL;
        }
        *(int *)o->target = 1;
        return 0;
    }
    if (eq)
        return take_value(spec, o, eq + 1);
    if (*i + 1 >= argc) {
        fprintf(stderr, "%s: option '--%s' needs a value\n", spec->prog, o->name);
        return -EINVAL;
    }
    return take_value(spec, o, argv[++*i]);
}

/* One `-x[value]` or `-xyz` (flags) argument at argv[*i]. */
static int parse_short(const CcOptsSpec *spec, int argc, char **argv, int *i)
{
    for (const char *p = argv[*i] + 1; *p; p++) {
        CcOpt *o = find_short(spec, *p);
        if (!o) {
            fprintf(stderr, "%s: unknown option '-%c' (see %s --help)\n", spec->prog, *p,
                    spec->prog);
            return -EINVAL;
        }
        o->given++;
        if (o->type == CC_OPT_FLAG) {
            *(int *)o->target = 1;
            continue;
        }
        if (p[1])
            return take_value(spec, o, p + 1);
        if (*i + 1 >= argc) {
            fprintf(stderr, "%s: option '-%c' needs a value\n", spec->prog, *p);
            return -EINVAL;
        }
        return take_value(spec, o, argv[++*i]);
    }
    return 0;
}

static int is_help(const char *a) { return !strcmp(a, "--help") || !strcmp(a, "-h"); }

int cc_opts_parse(const CcOptsSpec *spec, int argc, char **argv, int *first_arg)
{
    char *args[CC_OPTS_MAX_ARGS], *extra = NULL;
    int n_args = 0, rc = 0, max_args = spec->max_args, dashdash = 0;
    if (max_args > CC_OPTS_MAX_ARGS)
        max_args = CC_OPTS_MAX_ARGS;
    for (int k = 0; k < spec->n_opts; k++)
        spec->opts[k].given = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (!dashdash && !strcmp(a, "--")) {
            dashdash = i;
        } else if (dashdash || a[0] != '-' || !a[1]) {
            if (n_args < max_args)
                args[n_args++] = argv[i];
            else if (!extra)
                extra = argv[i];
        } else if (is_help(a) && !(a[1] != '-' && find_short(spec, 'h'))) {
            cc_opts_help(spec, stdout);
            return CC_OPTS_HELP;
        } else {
            rc = a[1] == '-' ? parse_long(spec, argc, argv, &i) : parse_short(spec, argc, argv, &i);
        }
    }
    if (rc)
        return rc;
    if (extra) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", spec->prog, extra);
        return -EINVAL;
    }
    for (int k = 0; k < spec->n_opts; k++) {
        const CcOpt *o = &spec->opts[k];
        if (is_option(o) && (o->flags & CC_OPT_REQUIRED) && !o->given) {
            fprintf(stderr, "%s: --%s is required (see %s --help)\n", spec->prog, o->name,
                    spec->prog);
            return -EINVAL;
        }
    }
    /* the positional arguments to the end, in order; "--" dropped */
    int w = 1;
    for (int r = 1, a = 0; r < argc; r++) {
        if (a < n_args && argv[r] == args[a])
            a++;
        else if (r != dashdash)
            argv[w++] = argv[r];
    }
    for (int a = 0; a < n_args; a++)
        argv[w + a] = args[a];
    if (first_arg)
        *first_arg = w;
    return 0;
}

/* ---------------------------------------------------------------------------------- help */

static void print_default(const CcOpt *o, const char *sep, FILE *out)
{
    switch (o->type) {
    case CC_OPT_STRING:
        if (*(const char **)o->target)
            fprintf(out, "%s(default %s)", sep, *(const char **)o->target);
        break;
    case CC_OPT_INT: fprintf(out, "%s(default %d)", sep, *(const int *)o->target); break;
    case CC_OPT_INT64:
        fprintf(out, "%s(default %" PRId64 ")", sep, *(const int64_t *)o->target);
        break;
    case CC_OPT_DOUBLE: fprintf(out, "%s(default %g)", sep, *(const double *)o->target); break;
    default: break;
    }
}

static void help_option(const CcOpt *o, FILE *out)
{
    char head[128];
    int n;
    if (o->short_name)
        n = snprintf(head, sizeof head, "  -%c, --%s", o->short_name, o->name);
    else
        n = snprintf(head, sizeof head, "  --%s", o->name);
    if (o->type != CC_OPT_FLAG && n > 0 && (size_t)n < sizeof head)
        snprintf(head + n, sizeof head - (size_t)n, " %s", o->arg ? o->arg : "X");
    fputs(head, out);
    n = (int)strlen(head);
    const char *h = o->help ? o->help : "";
    if (n + 1 >= HELP_COLUMN && *h)
        fprintf(out, "\n%*s", HELP_COLUMN, "");
    else if (*h || (o->flags & CC_OPT_SHOW_DEFAULT))
        fprintf(out, "%*s", HELP_COLUMN - n, "");
    for (const char *nl; (nl = strchr(h, '\n')); h = nl + 1)
        fprintf(out, "%.*s\n%*s", (int)(nl - h), h, HELP_COLUMN, "");
    fputs(h, out);
    if (o->flags & CC_OPT_SHOW_DEFAULT)
        print_default(o, *h ? " " : "", out);
    fputc('\n', out);
}

void cc_opts_help(const CcOptsSpec *spec, FILE *out)
{
    fprintf(out, "usage: %s\n", spec->usage);
    if (spec->about)
        fprintf(out, "%s\n", spec->about);
    fputc('\n', out);
    for (int i = 0; i < spec->n_opts; i++) {
        const CcOpt *o = &spec->opts[i];
        if (o->type == CC_OPT_SECTION)
            fprintf(out, "%s\n", o->help);
        else
            help_option(o, out);
    }
    fprintf(out, "  -h, --help%*sthis help\n", HELP_COLUMN - 12, "");
    if (spec->epilog)
        fprintf(out, "%s", spec->epilog);
}

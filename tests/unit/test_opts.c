/* test_opts.c — host/opts.c, the command-line parser: forms of options, typed targets and
 * their ranges, required options, positional arguments, errors and the generated help. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "opts.h"

typedef struct Vals {
    const char *model, *mode;
    int all, n, sets;
    int64_t big;
    double x;
    const char *set[4];
} Vals;

static int take_mode(const CcOpt *opt, const char *value, char *err, size_t errlen)
{
    if (strcmp(value, "fast") && strcmp(value, "slow")) {
        snprintf(err, errlen, "--%s must be fast or slow", opt->name);
        return -EINVAL;
    }
    *(const char **)opt->target = value;
    return 0;
}

static int take_set(const CcOpt *opt, const char *value, char *err, size_t errlen)
{
    Vals *v = opt->target;
    if (v->sets == 4) {
        snprintf(err, errlen, "at most 4 --set");
        return -ENOSPC;
    }
    v->set[v->sets++] = value;
    return 0;
}

static Vals vals;
static CcOpt table[] = {
    CC_OPTS_HEADING("Things:"),
    CC_OPTS_STR("model", &vals.model, "FILE", "the model", .short_name = 'm',
                .flags = CC_OPT_REQUIRED),
    CC_OPTS_FLAG("all", &vals.all, "every row", .short_name = 'a'),
    CC_OPTS_INT("count", &vals.n, 1, 100, "N", "how many", .short_name = 'n',
                .flags = CC_OPT_SHOW_DEFAULT),
    CC_OPTS_INT64("count-max", &vals.big, 0, 0, "N", "a big one\nsecond line"),
    CC_OPTS_DBL("x", &vals.x, -1, 1, NULL, NULL, .flags = CC_OPT_SHOW_DEFAULT),
    CC_OPTS_CALL("mode", take_mode, &vals.mode, "fast|slow", "the mode"),
    CC_OPTS_CALL("set", take_set, &vals, "K=V", "repeatable", .short_name = 's'),
};

static const CcOptsSpec spec = {.prog = "prog",
                                .usage = "prog --model FILE [options] [ARG]",
                                .about = "Does things.",
                                .epilog = "Epilog.\n",
                                CC_OPTS_TABLE(table),
                                .max_args = 1};

/* Runs the parser on the arguments (NULL-terminated) with stderr captured in err. */
static int run(char *err, size_t errlen, int *first, ...)
{
    static char *argv[32];
    va_list ap;
    int argc = 0;
    argv[argc++] = (char *)"prog";
    va_start(ap, first);
    for (char *a; (a = va_arg(ap, char *));)
        argv[argc++] = a;
    va_end(ap);
    memset(&vals, 0, sizeof vals);
    vals.n = 7;
    vals.x = 0.5;
    fflush(stderr);
    FILE *tmp = tmpfile();
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    int rc = cc_opts_parse(&spec, argc, argv, first);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(err, 1, errlen - 1, tmp);
    err[n] = 0;
    fclose(tmp);
    return rc;
}

static void test_forms(void **state)
{
    (void)state;
    char err[1024];
    int first;
    assert_int_equal(run(err, sizeof err, &first, "--model", "a", "--count=12", "-a", "--x",
                         "-0.25", "--count-max", "9007199254740993", NULL),
                     0);
    assert_string_equal(vals.model, "a");
    assert_int_equal(vals.n, 12);
    assert_int_equal(vals.all, 1);
    assert_true(vals.x == -0.25); /* a value may start with '-' */
    assert_true(vals.big == 9007199254740993LL);
    assert_string_equal(err, "");
    /* short forms: attached value, clustered flags, unique prefixes */
    assert_int_equal(
        run(err, sizeof err, &first, "-mb", "-an", "3", "--mode", "fast", "--al", NULL), 0);
    assert_string_equal(vals.model, "b");
    assert_int_equal(vals.n, 3);
    assert_string_equal(vals.mode, "fast");
    assert_int_equal(run(err, sizeof err, &first, "--model", "c", "--count", "1e2", NULL), 0);
    assert_int_equal(vals.n, 100);
    assert_int_equal(table[3].given, 1);
    assert_int_equal(table[4].given, 0);
    /* repeatable, in order */
    assert_int_equal(run(err, sizeof err, &first, "-m", "a", "--set", "k=1", "-s", "j=2", NULL), 0);
    assert_int_equal(vals.sets, 2);
    assert_string_equal(vals.set[1], "j=2");
    assert_int_equal(table[7].given, 2);
}

static void test_positional(void **state)
{
    (void)state;
    char err[1024];
    int first = -1;
    assert_int_equal(run(err, sizeof err, &first, "pos", "--model", "a", NULL), 0);
    assert_int_equal(first, 3);
    assert_string_equal(vals.model, "a");
    /* after --, everything is positional */
    assert_int_equal(run(err, sizeof err, &first, "--model", "a", "--", "--all", NULL), 0);
    assert_int_equal(vals.all, 0);
    assert_int_equal(run(err, sizeof err, &first, "--model", "a", "p1", "p2", NULL), -EINVAL);
    assert_non_null(strstr(err, "prog: unexpected argument 'p2'"));
}

static void test_errors(void **state)
{
    (void)state;
    char err[1024];
    struct {
        const char *a1, *a2, *a3, *want;
    } cases[] = {
        {"--model", "a", "--count=0", "prog: --count: '0' is not an integer in [1, 100]"},
        {"--model", "a", "--count=2.5", "'2.5' is not an integer"},
        {"--model", "a", "--count=abc", "'abc' is not an integer"},
        {"--model", "a", "--x=2", "prog: --x: '2' is not a number in [-1, 1]"},
        {"--model", "a", "--x=nan", "is not a number"},
        {"--model", "a", "--count-max=1.5", "prog: --count-max: '1.5' is not an integer\n"},
        {"--model", "a", "--mode=medium", "prog: --mode must be fast or slow"},
        {"--model", "a", "--all=1", "prog: option '--all' takes no value"},
        {"--model", "a", "--nosuch", "prog: unknown option '--nosuch' (see prog --help)"},
        {"--model", "a", "--co", "prog: ambiguous option '--co'"},
        {"--model", "a", "-z", "prog: unknown option '-z'"},
        {"--model", "a", "--count", "prog: option '--count' needs a value"},
        {"--all", NULL, NULL, "prog: --model is required (see prog --help)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int first;
        int rc = run(err, sizeof err, &first, cases[i].a1, cases[i].a2, cases[i].a3, NULL);
        if (rc != -EINVAL || !strstr(err, cases[i].want))
            fail_msg("case %zu: rc %d, message '%s', want '%s'", i, rc, err, cases[i].want);
    }
    /* the values given before the error are kept, the default of the failed one too */
    run(err, sizeof err, NULL, "--model", "a", "--count=0", NULL);
    assert_int_equal(vals.n, 7);
}

static void test_help(void **state)
{
    (void)state;
    char buf[4096];
    FILE *f = tmpfile();
    vals.n = 7;
    vals.x = 0.5;
    cc_opts_help(&spec, f);
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    const char *want = "usage: prog --model FILE [options] [ARG]\n"
                       "Does things.\n"
                       "\n"
                       "Things:\n"
                       "  -m, --model FILE      the model\n"
                       "  -a, --all             every row\n"
                       "  -n, --count N         how many (default 7)\n"
                       "  --count-max N         a big one\n"
                       "                        second line\n"
                       "  --x X                 (default 0.5)\n"
                       "  --mode fast|slow      the mode\n"
                       "  -s, --set K=V         repeatable\n"
                       "  -h, --help            this help\n"
                       "Epilog.\n";
    assert_string_equal(buf, want);
    /* --help prints it on stdout and says so */
    char err[256];
    fflush(stdout);
    int saved = dup(1);
    FILE *devnull = fopen("/dev/null", "w");
    dup2(fileno(devnull), 1);
    int rc = run(err, sizeof err, NULL, "--count=0", "--help", NULL);
    int rc2 = run(err, sizeof err, NULL, "-h", NULL);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    fclose(devnull);
    assert_int_equal(rc, -EINVAL); /* the error comes first */
    assert_int_equal(rc2, CC_OPTS_HELP);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forms),
        cmocka_unit_test(test_positional),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_help),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

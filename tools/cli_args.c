/* Option values of the minidc commands, read strictly: the whole string must be a number in
 * range ("4x", "abc", "" and out-of-range values are refused), and the refusal names the
 * command, the option and the value on stderr. Each returns 1 on success, 0 on a bad value. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli_args.h"

int mdc_arg_ll(const char *cmd, const char *opt, const char *v, long long lo, long long hi,
               long long *out) {
    char *end = NULL;
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "minidc %s: %s needs an integer in %lld..%lld, got '%s'\n", cmd, opt, lo, hi,
                v ? v : "(nothing)");
        return 0;
    }
    *out = x;
    return 1;
}

int mdc_arg_int(const char *cmd, const char *opt, const char *v, int lo, int hi, int *out) {
    long long x;
    if (!mdc_arg_ll(cmd, opt, v, lo, hi, &x)) return 0;
    *out = (int)x;
    return 1;
}

int mdc_arg_size(const char *cmd, const char *opt, const char *v, size_t hi, size_t *out) {
    char *end = NULL;
    errno = 0;
    /* strtoull accepts "-1" as a huge number: a sign is refused before it sees it. */
    unsigned long long x = v && *v != '-' && *v != '+' ? strtoull(v, &end, 10) : 0;
    if (!v || !end || errno || end == v || *end || x > hi) {
        fprintf(stderr, "minidc %s: %s needs an integer in 0..%zu, got '%s'\n", cmd, opt, hi,
                v ? v : "(nothing)");
        return 0;
    }
    *out = (size_t)x;
    return 1;
}

int mdc_arg_double(const char *cmd, const char *opt, const char *v, double *out) {
    char *end = NULL;
    errno = 0;
    double x = v ? strtod(v, &end) : 0;
    if (!v || errno || end == v || *end) {
        fprintf(stderr, "minidc %s: %s needs a number, got '%s'\n", cmd, opt, v ? v : "(nothing)");
        return 0;
    }
    *out = x;
    return 1;
}

int mdc_arg_float(const char *cmd, const char *opt, const char *v, float *out) {
    double x;
    if (!mdc_arg_double(cmd, opt, v, &x)) return 0;
    *out = (float)x;
    return 1;
}

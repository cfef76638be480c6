/* Strict option values for the minidc commands (tools/cli_args.c). */
#ifndef MINIDC_TOOLS_CLI_ARGS_H
#define MINIDC_TOOLS_CLI_ARGS_H
#include <stddef.h>

int mdc_arg_ll(const char *cmd, const char *opt, const char *v, long long lo, long long hi,
               long long *out);
int mdc_arg_int(const char *cmd, const char *opt, const char *v, int lo, int hi, int *out);
int mdc_arg_size(const char *cmd, const char *opt, const char *v, size_t hi, size_t *out);
int mdc_arg_double(const char *cmd, const char *opt, const char *v, double *out);
int mdc_arg_float(const char *cmd, const char *opt, const char *v, float *out);

#endif

/* Strict option values for the minidc commands (tools/cli_args.c). */
#ifndef MINIDC_TOOLS_CLI_ARGS_H
#define MINIDC_TOOLS_CLI_ARGS_H
#include <stddef.h>
#include <stdio.h>

#include "minidc/model.h"

/* Print "minidc CMD: <why>" on stderr and return 0 on a bad value, 1 on success. */
int mdc_arg_ll(const char *cmd, const char *opt, const char *v, long long lo, long long hi, long long *out);
int mdc_arg_int(const char *cmd, const char *opt, const char *v, int lo, int hi, int *out);
int mdc_arg_size(const char *cmd, const char *opt, const char *v, size_t hi, size_t *out);
int mdc_arg_double(const char *cmd, const char *opt, const char *v, double *out);
int mdc_arg_float(const char *cmd, const char *opt, const char *v, float *out);
int mdc_arg_precision(const char *cmd, const char *opt, const char *v, int *out);

/* The same checks returning MDC_ERR_INVALID with the reason in mdc_detail() and printing
 * nothing, for MPI commands where only rank 0 prints (mdc_runtime_die). */
mdc_status mdc_parse_ll(const char *opt, const char *v, long long lo, long long hi, long long *out);
mdc_status mdc_parse_int(const char *opt, const char *v, int lo, int hi, int *out);
mdc_status mdc_parse_double(const char *opt, const char *v, double *out);
/* The same, for a float option: a finite nonzero value that would round to 0 or overflow to inf
 * in float is refused by its own text ("--lr 1e-300"), not later as "--lr 0". */
mdc_status mdc_parse_float(const char *opt, const char *v, float *out);
/* --precision fp32 | bf16 | fp16 (and --grad-reduce's names) into MDC_PRECISION_*. */
mdc_status mdc_parse_precision(const char *opt, const char *v, int *out);
/* A finite number in [lo, hi] (nan, inf and 1e999 are refused). */
mdc_status mdc_parse_double_range(const char *opt, const char *v, double lo, double hi, double *out);

/* The AdamW options of train (serial and --dp) and forward: every value finite, --lr > 0,
 * --beta1 and --beta2 in [0, 1), --eps > 0, --weight-decay >= 0, --grad-clip >= 0 (0 = off).
 * MDC_ERR_INVALID naming the first bad option and its value. */
mdc_status mdc_adamw_check(const mdc_adamw_config *o);

/* Exact mode's default token block for sequences of seq positions, the same on every mesh: the
 * largest divisor up to MDC_EXACT_DEFAULT_BLOCK of seq / gcd(seq, 8), so that it divides every
 * split of the sequence into 2, 4 or 8 equal parts that seq allows (tp 2-8 with SP, cp 2-4 in
 * zigzag chunks, cp 2 x tp 2 with SP): 8 for seq 64, 16 for 128, 32 from 256, 3 for 24. */
int mdc_exact_default_block(int seq);
/* The positions a block must divide on a mesh: the gcd of what each rank holds of a sequence
 * (seq / cp, / tp with SP) and, with cp > 1, one chunk of its layout (seq / 2 cp zigzag, or
 * seq / cp contiguous); 0 when the mesh does not split seq evenly. */
int mdc_exact_piece(int seq, int cp, int contiguous, int tp, int sp);

/* --exact and --exact-block: a block implies exact mode; exact mode without one takes
 * mdc_exact_default_block(seq) (it depends on no mesh). The block must divide the positions of a sequence each rank holds
 * (seq / cp, and / tp with SP; a zig-zag cp layout's chunks are checked by the cp component) and Vp / tp must be a multiple of the vocabulary block: else
 * MDC_ERR_INVALID naming the option and a size that works. */
mdc_status mdc_exact_options(int *exact, int *block, const mdc_gpt2_config *cfg, int seq, int cp, int tp, int sp);
/* One line per kind of canonical block of exact mode, for the start of a run. */
void mdc_exact_print_blocks(const mdc_gpt2_config *cfg, int block, FILE *out);

/* An output file, checked before any work: if it exists it is a regular file (not a directory,
 * device or FIFO), and its directory exists and is writable. MDC_ERR_INVALID naming the option,
 * the path and why. */
mdc_status mdc_check_output(const char *opt, const char *path);
/* MDC_ERR_INVALID if `out` is the same file as the input `in` (both may be NULL or missing). */
mdc_status mdc_check_not_input(const char *out_opt, const char *out, const char *in_opt, const char *in);

/* The mixture-of-experts options of train and forward (docs/expert-parallel.md): --experts E,
 * --topk k, --moe-every n, --router softmax|deepseek, --router-groups, --router-topk-groups,
 * --routed-scaling, --shared-experts, --first-dense, --router-aux-loss (the config's),
 * --capacity-factor f, --moe-drop position|probs, --moe-renorm (a flag), --moe-aux-loss alpha,
 * --moe-z-loss beta. Returns 1 if `opt` is one of
 * them (*used: 1 or 2 arguments taken; *st MDC_ERR_INVALID naming a bad value), 0 if not. The
 * config fields are -1 when not given. */
typedef struct {
    int E, topk, every;
    mdc_moe_opts o;
    /* DeepSeek-V3 routing and transformers' aux loss (config fields; -1: not given) */
    int router, n_group, topk_group, n_shared, first_dense;
    double routed_scale, lb_coef;
} mdc_moe_cli;
void mdc_moe_cli_default(mdc_moe_cli *c);
int mdc_moe_option(mdc_moe_cli *c, const char *opt, const char *v, int *used, mdc_status *st);
/* The given config fields into cfg. */
void mdc_moe_cli_apply(const mdc_moe_cli *c, mdc_gpt2_config *cfg);
/* The usage lines of these options. */
extern const char mdc_moe_usage[];

#endif

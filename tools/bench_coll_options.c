/* minidc bench COLL's options (tools/bench_coll.h): which collective's definition, sizes,
 * types, order and checks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_coll.h"
#include "cli_args.h"

/* The collectives `minidc bench` runs, one definition each (tools/bench_coll_<name>.c). */
static const bench_coll_def *const defs[] = {
    &bench_coll_allreduce, &bench_coll_reduce_scatter, &bench_coll_allgather, &bench_coll_alltoall,
    &bench_coll_broadcast, &bench_coll_reduce,         &bench_coll_gather,    &bench_coll_scatter,
};

/* A size of 1 byte to 1 TiB (0 would never grow by -f; a huge or non-finite one cannot be
 * allocated, or converted to size_t at all). */
static int parse_size(const char *s, size_t *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || !isfinite(v) || v < 0) return -1;
    double m = 1;
    if (*end == 'K' || *end == 'k') m = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') m = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g') m = 1024.0 * 1024 * 1024, end++;
    if (*end == 'i') end++;
    if (*end == 'B') end++;
    if (*end || v * m < 1 || v * m > 1099511627776.0) return -1;
    *out = (size_t)(v * m);
    return 0;
}

void bench_coll_usage(FILE *f) {
    fprintf(f,
            "usage: mpiexec.mpich -n P minidc bench COLL [options]   COLL: allreduce reduce_scatter\n"
            "       allgather alltoall broadcast reduce gather scatter\n"
            "  -b SIZE        smallest size (bytes, 1 to 1T; K, M, G suffixes; default 8)\n"
            "  -e SIZE        largest size (default 64M)\n"
            "  -f FACTOR      size multiplier, above 1 (default 2)\n"
            "  --algo A       force minidc's algorithm (default auto: the cost model)\n"
            "  --pick B       what auto optimizes: host (default: this machine's wall clock, the\n"
            "                 host's alpha-beta-gamma) or device (the emulated device's links, the\n"
            "                 choice a training run on --device makes)\n"
            "  --dtype T      f32 f64 f16 bf16 i32 i64 u8 (default f32; f16/bf16 have no MPICH column)\n"
            "  --op OP        sum prod min max (default sum)\n"
            "  --iters N      timed iterations per size (default 20 up to 1 MiB, 10 to 16 MiB, then 5)\n"
            "  --order O      blocks (default: rounds of iters/4 calls of one library, then of the\n"
            "                 other, each block after one untimed call) or alternate (ours, MPICH's,\n"
            "                 ours, ...: each call follows the other library's)\n"
            "  --inplace      both libraries in place (MPI_IN_PLACE: the input in the receive buffer;\n"
            "                 reduce, gather, scatter: at the root)\n"
            "  --root R       root of broadcast, reduce, gather, scatter (default 0)\n"
            "  --check        verify every call of ours (default: one verified call per size)\n"
            "  --no-mpich     skip MPICH's column\n"
            "%s",
            mdc_device_options_help());
}

int bench_coll_parse_args(bench_opts *o, int argc, char **argv, int say) {
    const char *name = argv[0];
    if (!strcmp(name, "bcast")) name = "broadcast";
    o->def = NULL;
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++)
        if (!strcmp(name, defs[i]->name)) o->def = defs[i];
    if (!o->def) {
        if (say) fprintf(stderr, "minidc bench: no collective '%s'\n", argv[0]);
        return 2;
    }
    o->minb = 8;
    o->maxb = 64u << 20;
    o->factor = 2;
    o->algo = NULL;
    o->pick = "host";
    o->t = MDC_F32;
    o->op = MDC_SUM;
    o->iters = 0;
    o->check = 0;
    o->mpich = 1;
    o->alternate = 0;
    o->inplace = 0;
    o->root = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "-b") && v) bad = parse_size(v, &o->minb), i++;
        else if (!strcmp(a, "-e") && v) bad = parse_size(v, &o->maxb), i++;
        else if (!strcmp(a, "-f") && v) bad = mdc_parse_double_range(a, v, 1, 1e6, &o->factor) || o->factor == 1, i++;
        else if (!strcmp(a, "--algo") && v) o->algo = v, i++;
        else if (!strcmp(a, "--pick") && v) o->pick = v, bad = strcmp(v, "host") && strcmp(v, "device"), i++;
        else if (!strcmp(a, "--dtype") && v) {
            int t = mdc_dtype_parse(v);
            bad = t < 0;
            o->t = (mdc_dtype)(t < 0 ? 0 : t);
            i++;
        } else if (!strcmp(a, "--op") && v) {
            int op = mdc_op_parse(v);
            bad = op < 0 || op == MDC_AVG;
            o->op = (mdc_op)(op < 0 ? 0 : op);
            i++;
        } else if (!strcmp(a, "--iters") && v) bad = mdc_parse_int(a, v, 1, 1000000, &o->iters) != MDC_OK, i++;
        else if (!strcmp(a, "--order") && v)
            o->alternate = !strcmp(v, "alternate"), bad = !o->alternate && strcmp(v, "blocks"), i++;
        else if (!strcmp(a, "--check")) o->check = 1;
        else if (!strcmp(a, "--inplace")) o->inplace = 1;
        else if (!strcmp(a, "--root") && v) bad = mdc_parse_int(a, v, 0, 1 << 20, &o->root) != MDC_OK, i++;
        else if (!strcmp(a, "--no-mpich")) o->mpich = 0;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            bench_coll_usage(stdout);
            return -1;
        } else bad = 1;
        if (bad) {
            if (say) {
                fprintf(stderr, "minidc bench %s: bad option or value: %s%s%s\n", o->def->name, a, v ? " " : "",
                        v && strncmp(a, "--c", 3) ? v : "");
                bench_coll_usage(stderr);
            }
            return 2;
        }
    }
    if (o->minb > o->maxb) {
        if (say) fprintf(stderr, "minidc bench: -b is larger than -e\n");
        return 2;
    }
    if (mdc_mpi_type(o->t) == MPI_DATATYPE_NULL) o->mpich = 0;
    return 0;
}

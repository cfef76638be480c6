/* minidc bench WHAT: benchmarks that print ratios against a reference measured in the same run.
 * Each WHAT lives in its own tools/bench_*.c. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} bench_entry;

static const bench_entry benches[] = {
    {"device", mdc_bench_device, "throttle accuracy and accounting cost per charged call"},
    {"allreduce", mdc_bench_coll, "collectives vs MPICH's own, nccl-tests columns (tools/bench_coll.c)"},
    {"reduce_scatter", mdc_bench_coll, "same, reduce_scatter (MPI_Reduce_scatter_block)"},
    {"allgather", mdc_bench_coll, "same, allgather"},
    {"alltoall", mdc_bench_coll, "same, alltoall"},
    {"broadcast", mdc_bench_coll, "same, broadcast (also: bcast)"},
    {"bcast", mdc_bench_coll, "alias of broadcast"},
    {"reduce", mdc_bench_coll, "same, reduce (--root R)"},
    {"gather", mdc_bench_coll, "same, gather"},
    {"scatter", mdc_bench_coll, "same, scatter"},
    {"train", mdc_bench_train, "GPT-2 training step: tokens/s, MFU, peak RSS (vs PyTorch via tools/bench.sh)"},
    {NULL, NULL, NULL},
};

int mdc_cmd_bench(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help")) {
        printf("usage: minidc bench WHAT [options]\n\nbenchmarks:\n");
        for (size_t i = 0; benches[i].name; i++) printf("  %-16s %s\n", benches[i].name, benches[i].help);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; benches[i].name; i++)
        if (!strcmp(argv[1], benches[i].name)) return benches[i].run(argc - 1, argv + 1);
    fprintf(stderr, "minidc bench: unknown benchmark '%s' (minidc bench --help lists them)\n", argv[1]);
    return 2;
}

/* minidc: the command-line front end. Dispatches to tools/cmd_*.c. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "minidc/kernels.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"bench", mdc_cmd_bench, "benchmarks against a reference measured in the same run"},
    {"compare", mdc_cmd_compare, "two tensor files tensor by tensor: errors, ULPs, the first that differs"},
    {"data", mdc_cmd_data, "token shards: tokenize a text file, generate a task, show a shard"},
    {"devices", mdc_cmd_devices, "the GPU preset table (HBM, bandwidths, FLOP/s, links, TDP)"},
    {"explain", mdc_cmd_explain, "a collective's schedule, summation order and cost, without MPI"},
    {"forward", mdc_cmd_forward, "forward/backward of GPT-2 weights on tokens; dump logits, loss, gradients"},
    {"predict", mdc_cmd_predict, "one training step's time, memory and energy on a datacenter computer, computed dry"},
    {"plan", mdc_cmd_plan, "the fastest meshes of a model on N GPUs that fit in memory, each predicted"},
    {"train", mdc_cmd_train, "train GPT-2: serial, or data parallel with ZeRO under mpiexec"},
    {"workload", mdc_cmd_workload, "a small data-parallel emulated workload and its device reports (MPI)"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: minidc COMMAND [options]   (COMMAND --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
    mdc_kernels_fix_blas_core(argv); /* may re-execute with OPENBLAS_CORETYPE set */
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "minidc: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}

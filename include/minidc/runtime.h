/* Start-up and shut-down of a minidc MPI program: MPI, this rank's device, the transport and
 * the world group, with the device options taken out of argv. */
#ifndef MINIDC_RUNTIME_H
#define MINIDC_RUNTIME_H

#include "minidc/collectives.h"
#include "minidc/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int rank, size;
    mdc_device_options opts;
    mdc_device *dev;
    mdc_transport *tr;
    mdc_group *world;
    char *report_schemes; /* rank 0: the schemes' figures as a JSON object's text, for the JSON
                             report's "schemes" (malloc'd, freed by mdc_runtime_finalize; NULL: none) */
} mdc_runtime;

/* MPI_Init, parse and remove device options from argv (*argc shrinks), create the device,
 * transport and world group, and make the transport the default. On a bad option every rank
 * fails the same way (options are the same everywhere), so the caller can exit without
 * waiting on anyone. */
mdc_status mdc_runtime_init(mdc_runtime *rt, int *argc, char ***argv);

/* Gathers every rank's counters, energy, peak HBM and text report to rank 0 over rt->world
 * (point-to-point on a device-less transport, so the report's own messages are not charged;
 * tag 4095 of tag space 0), then rank 0 prints a per-rank table and each rank's report to f
 * (ranks beyond 8: only rank 0's) and writes rt->opts.report_path as JSON if set. `tokens`
 * is the number of tokens the whole run processed (0: none). Every rank must call it. Other
 * ranks return after sending; a failure on rank 0 (e.g. the JSON path) is rank 0's alone. */
mdc_status mdc_runtime_report(mdc_runtime *rt, FILE *f, double tokens);

/* MINIDC_VERBOSE set, non-empty and not "0": the programs' extra lines (rank pids, the thread
 * tuner's choice) are printed. */
int mdc_runtime_verbose(void);

/* Frees what init created and calls MPI_Finalize. */
void mdc_runtime_finalize(mdc_runtime *rt);

/* Prints "minidc: rank R: <status>: <detail>" (on rank 0 only if `all_ranks_same`, since
 * then every rank has the same error), tells peers, finalizes MPI and exits with `code`
 * on this rank. */
void mdc_runtime_die(mdc_runtime *rt, mdc_status st, int all_ranks_same, int code) __attribute__((noreturn));

#ifdef __cplusplus
}
#endif
#endif

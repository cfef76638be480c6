/* Planted faults: a bug of a kind a distributed-training stack really has, put on purpose at one
 * block of one rank, for the course's "find the bug" lab (labs/lab9_find_the_bug.c) and for tests
 * of the checks that must catch it (--check-replicas, --dump-dir with minidc compare,
 * --check-serial). The run's plant comes from the environment:
 *   MINIDC_FAULT_PLANT=KIND:RANK:BLOCK  KIND one of reduction, message, dropout, kv;
 *   MINIDC_PUZZLE=K                     the lab's puzzle K (1..4): its kind is the K-th above, its
 *                                       rank and block drawn from MINIDC_PUZZLE_SEED (default 1),
 *                                       so a class can get different answers.
 * The kinds, at block BLOCK on world rank RANK:
 *   reduction  the attention projection's tensor-parallel all-reduce result is dropped: the rank
 *              goes on with its own partial sum (its replica differs from the others');
 *   message    the first message that rank sends in that all-reduce travels with one exponent bit
 *              flipped (collectives/transport_fault.c): the sum every rank gets is wrong;
 *   dropout    the rank's dropout masks in that block use the key of the next batch row;
 *   kv         the context-parallel ring attention of that rank skips the first key/value block
 *              it receives (the ring's default-mode forward). */
#ifndef MINIDC_FAULT_H
#define MINIDC_FAULT_H

#include "minidc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MDC_PLANT_NONE = 0,
    MDC_PLANT_REDUCTION,
    MDC_PLANT_MESSAGE,
    MDC_PLANT_DROPOUT,
    MDC_PLANT_KV
} mdc_plant_kind;
enum { MDC_PUZZLES = 4 };

typedef struct {
    mdc_plant_kind kind;
    int rank, block;
} mdc_plant;

/* The run's plant (read from the environment once; a malformed value is named on stderr and
 * plants nothing). */
mdc_plant mdc_plant_get(void);
/* 1 when this process (the default transport's world rank) plants `kind` at block l. */
int mdc_plant_here(mdc_plant_kind kind, int block);
/* Puzzle k (1..MDC_PUZZLES) under `seed`: its plant, and the ranks and blocks of the run it is
 * meant for (its rank and block are drawn within them). MDC_ERR_INVALID for another k. */
mdc_status mdc_puzzle_plant(int k, unsigned seed, mdc_plant *out, int *ranks, int *blocks);
const char *mdc_plant_kind_name(mdc_plant_kind k); /* "reduction", ... ("none") */
/* MINIDC_PUZZLE_SEED (default 1; a value that is not a number is named on stderr, and 1 used). */
unsigned mdc_puzzle_seed(void);

#ifdef __cplusplus
}
#endif
#endif

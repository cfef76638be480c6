/* Planted faults (include/minidc/fault.h): the run's plant from MINIDC_FAULT_PLANT or
 * MINIDC_PUZZLE, and the puzzles of the course's "find the bug" lab. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_internal.h"
#include "minidc/fault.h"
#include "minidc/splitmix.h"

static const char *const kind_names[] = {"none", "reduction", "message", "dropout", "kv"};

const char *mdc_plant_kind_name(mdc_plant_kind k) { return (unsigned)k <= MDC_PLANT_KV ? kind_names[k] : "?"; }

/* Puzzle k's kind and the mesh it runs on (docs/course/lab9-find-the-bug.md gives the commands):
 * tp 3, tp 3, dp 3 with dropout, cp 2; two blocks each. */
static const struct {
    mdc_plant_kind kind;
    int ranks, blocks;
} puzzles[MDC_PUZZLES] = {
    {MDC_PLANT_REDUCTION, 3, 2}, {MDC_PLANT_MESSAGE, 3, 2}, {MDC_PLANT_DROPOUT, 3, 2}, {MDC_PLANT_KV, 2, 2}};

mdc_status mdc_puzzle_plant(int k, unsigned seed, mdc_plant *out, int *ranks, int *blocks) {
    if (k < 1 || k > MDC_PUZZLES) return mdc_fail(MDC_ERR_INVALID, "puzzle %d: the puzzles are 1..%d", k, MDC_PUZZLES);
    uint64_t s = (uint64_t)seed * 0x9E3779B97F4A7C15ull + (uint64_t)k;
    uint64_t h = mdc_splitmix64(s);
    out->kind = puzzles[k - 1].kind;
    out->rank = (int)(h % (uint64_t)puzzles[k - 1].ranks);
    out->block = (int)((h >> 32) % (uint64_t)puzzles[k - 1].blocks);
    if (ranks) *ranks = puzzles[k - 1].ranks;
    if (blocks) *blocks = puzzles[k - 1].blocks;
    return MDC_OK;
}

unsigned mdc_puzzle_seed(void) {
    const char *v = getenv("MINIDC_PUZZLE_SEED");
    char *end = NULL;
    unsigned long s = v && *v ? strtoul(v, &end, 10) : 1;
    if (v && *v && (*end || s > 0xffffffffUL || *v == '-')) {
        fprintf(stderr, "minidc: MINIDC_PUZZLE_SEED='%s' is not a number from 0 to 4294967295: seed 1\n", v);
        s = 1;
    }
    return (unsigned)s;
}

static mdc_plant read_env(void) {
    mdc_plant p = {MDC_PLANT_NONE, -1, -1};
    const mdc_transport *t = mdc_transport_default();
    int say = !t || mdc_transport_rank(t) == 0; /* a malformed value is named once */
    const char *v = getenv("MINIDC_FAULT_PLANT"), *z = getenv("MINIDC_PUZZLE");
    if (z && *z) {
        char *end;
        long k = strtol(z, &end, 10);
        if (*end || mdc_puzzle_plant((int)k, mdc_puzzle_seed(), &p, NULL, NULL)) {
            if (say)
                fprintf(stderr, "minidc: MINIDC_PUZZLE='%s' is not a puzzle (1..%d): nothing is planted\n", z,
                        MDC_PUZZLES);
            p.kind = MDC_PLANT_NONE;
        }
        return p;
    }
    if (!v || !*v) return p;
    char kind[16];
    int used = 0;
    if (sscanf(v, "%15[a-z]:%d:%d%n", kind, &p.rank, &p.block, &used) == 3 && !v[used] && p.rank >= 0 && p.block >= 0)
        for (int k = 1; k <= MDC_PLANT_KV; k++)
            if (!strcmp(kind, kind_names[k])) p.kind = (mdc_plant_kind)k;
    if (p.kind == MDC_PLANT_NONE && say)
        fprintf(stderr,
                "minidc: MINIDC_FAULT_PLANT='%s' is not KIND:RANK:BLOCK (KIND reduction, message, dropout or kv): "
                "nothing is planted\n",
                v);
    return p;
}

mdc_plant mdc_plant_get(void) {
    static mdc_plant p;
    static int read;
    if (!read) p = read_env(), read = 1;
    return p;
}

int mdc_plant_here(mdc_plant_kind kind, int block) {
    mdc_plant p = mdc_plant_get();
    if (p.kind != kind || p.block != block) return 0;
    const mdc_transport *t = mdc_transport_default();
    return t && mdc_transport_rank(t) == p.rank;
}

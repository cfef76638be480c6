/* The algorithm registry's lookups (coll_registry.h) and the public listing of algorithms.h:
 * the descriptors are defined in the algorithms' own files and listed in MDC_I_ALGORITHMS. */
#include "coll_registry.h"

#define MDC_I_ALGO_ADDRESS(name) &mdc_i_algo_##name,
static const mdc_i_algo *const algos[] = {MDC_I_ALGORITHMS(MDC_I_ALGO_ADDRESS)};
#undef MDC_I_ALGO_ADDRESS
#define N_ALGOS (int)(sizeof algos / sizeof algos[0])

const mdc_i_algo *mdc_i_algo_at(mdc_coll c, int i) {
    if ((unsigned)c >= MDC_COLL_COUNT || i < 0) return NULL;
    for (int k = 0; k < N_ALGOS; k++)
        if (algos[k]->coll == c && i-- == 0) return algos[k];
    return NULL;
}

const mdc_i_algo *mdc_i_algo_named(mdc_coll c, const char *name) {
    int i = mdc_coll_algo_find(c, name);
    return i < 0 ? NULL : mdc_i_algo_at(c, i);
}

int mdc_coll_algo_count(mdc_coll c) {
    int n = 0;
    for (int k = 0; k < N_ALGOS; k++) n += algos[k]->coll == c;
    return n;
}

const mdc_algo_info *mdc_coll_algo_at(mdc_coll c, int i) {
    const mdc_i_algo *a = mdc_i_algo_at(c, i);
    return a ? &a->info : NULL;
}

int mdc_coll_algo_find(mdc_coll c, const char *name) {
    if (!name) return -1;
    for (int k = 0, i = 0; k < N_ALGOS; k++) {
        if (algos[k]->coll != c) continue;
        if (!strcmp(name, algos[k]->info.name)) return i;
        i++;
    }
    return -1;
}

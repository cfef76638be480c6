/* The algorithm registry's lookups (coll_registry.h) and the public listing of algorithms.h:
 * the descriptors are defined in the algorithms' own files and listed in MDC_I_ALGORITHMS. */
#include "coll_registry.h"

#define MDC_I_ALGO_ADDRESS(name) &mdc_i_algo_##name,
static const mdc_i_algo *const algos[] = {MDC_I_ALGORITHMS(MDC_I_ALGO_ADDRESS)};
#undef MDC_I_ALGO_ADDRESS
#define N_ALGOS (int)(sizeof algos / sizeof algos[0])

/* Algorithms added at run time (mdc_coll_register_allreduce): listed after the built-in ones,
 * forced by name, never picked by `auto` (no cost) and explained only by tracing (no builder). */
#define MAX_ADDED 16
static mdc_i_algo added[MAX_ADDED];
static char added_name[MAX_ADDED][32], added_summary[MAX_ADDED][96];
static int n_added;

static const mdc_i_algo *algo_k(int k) { return k < N_ALGOS ? algos[k] : &added[k - N_ALGOS]; }

const mdc_i_algo *mdc_i_algo_at(mdc_coll c, int i) {
    if ((unsigned)c >= MDC_COLL_COUNT || i < 0) return NULL;
    for (int k = 0; k < N_ALGOS + n_added; k++)
        if (algo_k(k)->coll == c && i-- == 0) return algo_k(k);
    return NULL;
}

mdc_status mdc_coll_register_allreduce(const char *name, const char *summary,
                                       mdc_status (*fn)(const void *, void *, size_t, mdc_dtype, mdc_op, mdc_group *)) {
    if (!name || !*name || strlen(name) >= sizeof added_name[0] || !fn)
        return mdc_fail(MDC_ERR_INVALID,
                        "mdc_coll_register_allreduce: needs a name of 1 to %zu characters and a function",
                        sizeof added_name[0] - 1);
    if (mdc_coll_algo_find(MDC_COLL_ALLREDUCE, name) >= 0 || !strcmp(name, "auto"))
        return mdc_fail(MDC_ERR_INVALID, "mdc_coll_register_allreduce: allreduce already has an algorithm '%s'", name);
    if (n_added == MAX_ADDED)
        return mdc_fail(MDC_ERR_INVALID, "mdc_coll_register_allreduce: at most %d algorithms are added at run time",
                        MAX_ADDED);
    snprintf(added_name[n_added], sizeof added_name[0], "%s", name);
    snprintf(added_summary[n_added], sizeof added_summary[0], "%s", summary ? summary : "added at run time");
    added[n_added] = (mdc_i_algo){
        .info = {added_name[n_added], added_name[n_added], added_summary[n_added], "(not modelled)"},
        .coll = MDC_COLL_ALLREDUCE,
        .run.allreduce = fn,
    };
    n_added++;
    return MDC_OK;
}

const mdc_i_algo *mdc_i_algo_named(mdc_coll c, const char *name) {
    int i = mdc_coll_algo_find(c, name);
    return i < 0 ? NULL : mdc_i_algo_at(c, i);
}

int mdc_coll_algo_count(mdc_coll c) {
    int n = 0;
    for (int k = 0; k < N_ALGOS + n_added; k++) n += algo_k(k)->coll == c;
    return n;
}

const mdc_algo_info *mdc_coll_algo_at(mdc_coll c, int i) {
    const mdc_i_algo *a = mdc_i_algo_at(c, i);
    return a ? &a->info : NULL;
}

int mdc_coll_algo_find(mdc_coll c, const char *name) {
    if (!name) return -1;
    for (int k = 0, i = 0; k < N_ALGOS + n_added; k++) {
        if (algo_k(k)->coll != c) continue;
        if (!strcmp(name, algo_k(k)->info.name)) return i;
        i++;
    }
    return -1;
}

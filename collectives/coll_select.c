/* Choosing an algorithm: forcing (mdc_coll_set_algo or MINIDC_ALGO_<COLL>), the
 * alpha-beta-gamma cost model over the registry's algorithms (coll_registry.h: each formula is
 * its algorithm's cost function) and the shared argument checks of the dispatchers. The
 * dispatchers (allreduce.c, ...) are the only callers of mdc_i_pick. */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "coll_registry.h"

static const char *const coll_names[MDC_COLL_COUNT] = {
    [MDC_COLL_ALLREDUCE] = "allreduce", [MDC_COLL_REDUCE_SCATTER] = "reduce_scatter",
    [MDC_COLL_ALLGATHER] = "allgather", [MDC_COLL_BCAST] = "bcast",
    [MDC_COLL_REDUCE] = "reduce",       [MDC_COLL_GATHER] = "gather",
    [MDC_COLL_SCATTER] = "scatter",     [MDC_COLL_ALLTOALL] = "alltoall",
    [MDC_COLL_ALLTOALLV] = "alltoallv", [MDC_COLL_BARRIER] = "barrier",
};

const char *mdc_coll_name(mdc_coll c) { return (unsigned)c < MDC_COLL_COUNT ? coll_names[c] : "?"; }

int mdc_coll_parse(const char *s) {
    if (!s) return -1;
    for (int i = 0; i < MDC_COLL_COUNT; i++)
        if (!strcmp(s, coll_names[i])) return i;
    if (!strcmp(s, "broadcast")) return MDC_COLL_BCAST;
    if (!strcmp(s, "reducescatter") || !strcmp(s, "reduce-scatter")) return MDC_COLL_REDUCE_SCATTER;
    return -1;
}

/* ---- forcing ---------------------------------------------------------------------------- */

static int forced[MDC_COLL_COUNT]; /* algorithm index + 1; 0 = auto */
static int nccl_allreduce;         /* allreduce "nccl": ring or tree, whichever costs less */
/* Changes whenever a setting that `auto` depends on changes (a forced algorithm, the pick
 * basis), so picks remembered by groups (mdc_i_pick_memo) made before are not reused. */
static unsigned settings_gen = 1;
static int env_read;
static size_t ring_chunk;
static int ring_chunk_set;

/* Reads MINIDC_ALGO_<COLL> once; an unknown name is reported on stderr and ignored. */
static void read_env(void) {
    if (env_read) return;
    env_read = 1;
    for (int c = 0; c < MDC_COLL_COUNT; c++) {
        char var[64] = "MINIDC_ALGO_";
        size_t k = strlen(var);
        for (const char *s = coll_names[c]; *s && k + 1 < sizeof var; s++) var[k++] = (char)toupper((unsigned char)*s);
        var[k] = '\0';
        const char *v = getenv(var);
        if (!v || !*v || !strcmp(v, "auto")) continue;
        if (c == MDC_COLL_ALLREDUCE && !strcmp(v, "nccl")) {
            nccl_allreduce = 1;
            continue;
        }
        int i = mdc_coll_algo_find((mdc_coll)c, v);
        if (i < 0) fprintf(stderr, "minidc: %s=%s: unknown algorithm, using auto\n", var, v);
        else forced[c] = i + 1;
    }
}

void mdc_coll_prefer_nccl(void) {
    mdc_coll_prefer_ring();
    if (!getenv("MINIDC_ALGO_ALLREDUCE")) mdc_coll_set_algo(MDC_COLL_ALLREDUCE, "nccl");
}

void mdc_coll_prefer_ring(void) {
    static const mdc_coll cs[3] = {MDC_COLL_ALLREDUCE, MDC_COLL_REDUCE_SCATTER, MDC_COLL_ALLGATHER};
    static const char *const env[3] = {"MINIDC_ALGO_ALLREDUCE", "MINIDC_ALGO_REDUCE_SCATTER", "MINIDC_ALGO_ALLGATHER"};
    for (int k = 0; k < 3; k++)
        if (!getenv(env[k])) mdc_coll_set_algo(cs[k], "ring");
}

mdc_status mdc_coll_set_algo(mdc_coll c, const char *algo) {
    read_env();
    settings_gen++;
    if ((unsigned)c >= MDC_COLL_COUNT) return mdc_fail(MDC_ERR_INVALID, "mdc_coll_set_algo: collective %d", (int)c);
    if (c == MDC_COLL_ALLREDUCE) nccl_allreduce = 0;
    if (!algo || !strcmp(algo, "auto")) {
        forced[c] = 0;
        return MDC_OK;
    }
    if (c == MDC_COLL_ALLREDUCE && !strcmp(algo, "nccl")) {
        forced[c] = 0, nccl_allreduce = 1;
        return MDC_OK;
    }
    int i = mdc_coll_algo_find(c, algo);
    if (i < 0) {
        char list[256] = "";
        for (int j = 0; j < mdc_coll_algo_count(c); j++) {
            strncat(list, " ", sizeof list - strlen(list) - 1);
            strncat(list, mdc_coll_algo_at(c, j)->name, sizeof list - strlen(list) - 1);
        }
        return mdc_fail(MDC_ERR_INVALID, "%s: unknown algorithm '%s' (known: auto%s)", coll_names[c], algo, list);
    }
    forced[c] = i + 1;
    return MDC_OK;
}

const char *mdc_coll_get_algo(mdc_coll c) {
    read_env();
    if (c == MDC_COLL_ALLREDUCE && nccl_allreduce) return "nccl";
    if ((unsigned)c >= MDC_COLL_COUNT || !forced[c]) return "auto";
    return mdc_coll_algo_at(c, forced[c] - 1)->name;
}

void mdc_coll_set_ring_chunk(size_t bytes) {
    ring_chunk = bytes;
    ring_chunk_set = 1;
}

size_t mdc_coll_ring_chunk(void) {
    if (!ring_chunk_set) {
        ring_chunk_set = 1;
        ring_chunk = mdc_i_env_bytes("MINIDC_RING_CHUNK", 0, (size_t)1 << 40);
    }
    return ring_chunk;
}

/* MINIDC_SLICE=bytes (k/M suffixes; 0 = never slice): the slice of mdc_i_xchg_reduce. */
static size_t slice;
static int slice_set;

void mdc_coll_set_slice(size_t bytes) {
    slice = bytes;
    slice_set = 1;
}

size_t mdc_coll_slice(void) {
    if (!slice_set) {
        slice_set = 1;
        slice = mdc_i_env_bytes("MINIDC_SLICE", MDC_DEFAULT_SLICE, (size_t)1 << 40);
    }
    return slice;
}

/* ---- cost model ------------------------------------------------------------------------- */

/* The cost of algorithm d for p ranks and `bytes`: 0 on one rank, HUGE_VAL where d's
 * restrictions say its cost does not apply, else d's own formula. */
static double algo_cost(const mdc_i_algo *d, int p, size_t bytes, const mdc_cost_params *m) {
    if (p <= 1) return 0;
    if (!d->cost) return HUGE_VAL; /* added at run time: not modelled, so `auto` never picks it */
    if (d->flags & MDC_I_NEEDS_NODES) {
        int G = m->ranks_per_node, nodes = G > 0 ? p / G : 0;
        if (G <= 1 || nodes <= 1 || G * nodes != p) return HUGE_VAL;
    }
    int p2 = mdc_i_pow2_floor(p), multi = m->ranks_per_node > 0 && m->ranks_per_node < p;
    mdc_i_cost_in x = {
        .p = p,
        .p2 = p2,
        .fold = p2 != p,
        .P = p,
        .n = (double)bytes,
        .lg = mdc_i_lg_ceil(p),
        .lg2 = mdc_i_lg_ceil(p2),
        .f = (p - 1.0) / p,
        .a = multi ? m->alpha_inter : m->alpha,
        .b = multi ? m->beta_inter : m->beta,
        .g = m->gamma,
        .cp = 2.0 / 3.0 * m->gamma,
        .m = m,
    };
    return d->cost(&x);
}

double mdc_coll_cost_params(mdc_coll c, const char *algo, int p, size_t bytes, const mdc_cost_params *m) {
    const mdc_i_algo *d = mdc_i_algo_named(c, algo);
    return d ? algo_cost(d, p, bytes, m) : -1;
}

double mdc_coll_cost(mdc_coll c, const char *algo, int p, size_t bytes, double alpha, double beta, double gamma) {
    mdc_cost_params m = {alpha, beta, gamma, alpha, beta, p};
    return mdc_coll_cost_params(c, algo, p, bytes, &m);
}

void mdc_coll_group_params(const mdc_group *g, mdc_cost_params *out) {
    int p = mdc_group_size(g), per = 0;
    int nodes = mdc_i_group_nodes(g, &per);
    out->ranks_per_node = nodes == 1 ? p : nodes > 1 ? per : 1;
    mdc_device *dev = mdc_transport_device(mdc_group_transport(g));
    if (dev) {
        const mdc_device_spec *s = mdc_device_get_spec(dev);
        out->alpha = s->nvlink_latency;
        out->beta = s->nvlink_bw > 0 ? 1.0 / s->nvlink_bw : 1e-9;
        out->alpha_inter = s->net_latency;
        out->beta_inter = s->net_bw > 0 ? 1.0 / s->net_bw : 1e-9;
        out->gamma = s->hbm_bw > 0 ? 3.0 / s->hbm_bw : 1e-10;
    } else {
        int rpn = out->ranks_per_node;
        mdc_coll_host_params(p, out);
        out->ranks_per_node = rpn;
    }
}

/* What `auto` optimizes: 0 = the group's links (the emulated device's when there is one),
 * 1 = this host's wall clock (mdc_coll_set_pick / MINIDC_PICK=host|device). */
static int pick_host = -1;

void mdc_coll_set_pick(const char *basis) {
    pick_host = basis && !strcmp(basis, "host");
    settings_gen++;
}

const char *mdc_coll_get_pick(void) {
    if (pick_host < 0) {
        const char *v = getenv("MINIDC_PICK");
        pick_host = v && !strcmp(v, "host");
        if (v && *v && !pick_host && strcmp(v, "device"))
            fprintf(stderr, "minidc: MINIDC_PICK='%s' is neither host nor device; using device\n", v);
    }
    return pick_host ? "host" : "device";
}

void mdc_coll_host_params(int p, mdc_cost_params *out) {
    out->alpha = out->alpha_inter = 2e-6;
    out->beta = out->beta_inter = 1.0 / 8e9;
    out->gamma = 1.0 / 4e9;
    out->ranks_per_node = p; /* every rank is on this host: one link class */
}

/* "nccl" (NCCL's choice for an allreduce): ring or tree by their costs on the group's links, the
 * tree only where it can run: over a group predict folds in part it cannot be timed, and a
 * folded group's replay is bounded by the schedule's size. */
static int nccl_candidate(const mdc_i_algo *d, size_t bytes, const mdc_group *g) {
    if (!strcmp(d->info.name, "ring")) return 1;
    if (strcmp(d->info.name, "tree")) return 0;
    int replay = mdc_i_replay_wanted(g, d);
    double chunks = (double)bytes / (double)mdc_i_pipeline_chunk(mdc_coll_ring_chunk(), 1) + 2;
    return replay == 0 || (replay > 0 && 4 * chunks * mdc_group_size(g) < (double)MDC_SCHEDULE_MAX_MSGS);
}

/* The index of the algorithm to run; the group remembers it for the next call of that size. */
static int pick_index(mdc_coll c, size_t bytes, const mdc_group *g) {
    read_env();
    if (forced[c]) return forced[c] - 1;
    int n = mdc_coll_algo_count(c);
    if (n == 1) return 0;
    mdc_i_pick_memo *memo = mdc_i_group_memo(g, c);
    if (memo && memo->gen == settings_gen && memo->bytes == bytes) return memo->pick;
    mdc_cost_params m;
    int host = !strcmp(mdc_coll_get_pick(), "host");
    if (host) mdc_coll_host_params(mdc_group_size(g), &m);
    else mdc_coll_group_params(g, &m);
    int best = 0;
    double bc = HUGE_VAL;
    for (int i = 0; i < n; i++) {
        const mdc_i_algo *d = mdc_i_algo_at(c, i);
        if (c == MDC_COLL_ALLREDUCE && nccl_allreduce && !nccl_candidate(d, bytes, g)) continue;
        double x = algo_cost(d, mdc_group_size(g), bytes, &m);
        /* Equal costs go to the first listed, unless the later one wins ties on the host. */
        int tie_to_this = host && (d->flags & MDC_I_HOST_WINS_TIE);
        if (x >= 0 && (x < bc || (x == bc && tie_to_this))) {
            bc = x;
            best = i;
        }
    }
    /* Crowded cores make steps that wait for a peer's turn expensive, which the model cannot
     * see: an algorithm may claim such calls (host_crowded_min). */
    for (int i = 0; host && i < n; i++) {
        size_t min = mdc_i_algo_at(c, i)->host_crowded_min;
        if (min && bytes >= min && mdc_i_ranks_per_core(mdc_group_transport(g)) >= 3) {
            best = i;
            break;
        }
    }
    if (memo) *memo = (mdc_i_pick_memo){bytes, settings_gen, best};
    return best;
}

const mdc_i_algo *mdc_i_pick(mdc_coll c, size_t bytes, const mdc_group *g) {
    return mdc_i_algo_at(c, pick_index(c, bytes, g));
}

const char *mdc_coll_choose(mdc_coll c, size_t bytes, const mdc_group *g) {
    if ((unsigned)c >= MDC_COLL_COUNT || !g) return "?";
    return mdc_i_pick(c, bytes, g)->info.name;
}

/* ---- dispatcher support ----------------------------------------------------------------- */

mdc_status mdc_i_after(mdc_group *g, mdc_status st) {
    if (st == MDC_ERR_MISMATCH) mdc_transport_abort_peers(mdc_group_transport(g), mdc_detail());
    return st;
}

static int world_of(const mdc_group *g) { return mdc_transport_rank(mdc_group_transport(g)); }

mdc_status mdc_i_check_group(const char *what, const mdc_group *g) {
    if (!g) return mdc_fail(MDC_ERR_INVALID, "%s: NULL group", what);
    return MDC_OK;
}

mdc_status mdc_i_check_count(const char *what, const mdc_group *g, const char *arg, size_t count, mdc_dtype t,
                             size_t times) {
    size_t esz = mdc_dtype_size(t);
    size_t limit = (size_t)PTRDIFF_MAX / (esz ? esz : 1) / (times ? times : 1);
    if (count > limit)
        return mdc_fail(MDC_ERR_INVALID, "%s: rank %d: %s = %zu (%lld as a signed value) is negative or too large",
                        what, world_of(g), arg, count, (long long)count);
    return MDC_OK;
}

mdc_status mdc_i_check_dtype_op(const char *what, const mdc_group *g, mdc_dtype t, int op) {
    if ((unsigned)t >= MDC_DTYPE_END)
        return mdc_fail(MDC_ERR_INVALID, "%s: rank %d: unknown dtype %d", what, world_of(g), (int)t);
    if (op != -1 && (unsigned)op >= MDC_OP_COUNT)
        return mdc_fail(MDC_ERR_INVALID, "%s: rank %d: unknown op %d", what, world_of(g), op);
    if (t >= MDC_EXACT && op != -1 && op != MDC_SUM) /* exact types only add */
        return mdc_fail(MDC_ERR_INVALID, "%s: rank %d: op %s is not defined on dtype %s (only sum)", what, world_of(g),
                        mdc_op_name((mdc_op)op), mdc_dtype_name(t));
    return MDC_OK;
}

mdc_status mdc_i_check_root(const char *what, const mdc_group *g, int root) {
    if (root < 0 || root >= mdc_group_size(g))
        return mdc_fail(MDC_ERR_INVALID, "%s: rank %d: root %d outside the group's 0..%d", what, world_of(g), root,
                        mdc_group_size(g) - 1);
    return MDC_OK;
}

mdc_status mdc_i_check_buf(const char *what, const mdc_group *g, const char *arg, const void *buf, size_t count) {
    if (!buf && count)
        return mdc_fail(MDC_ERR_INVALID, "%s: rank %d: %s is NULL with %zu elements", what, world_of(g), arg, count);
    return MDC_OK;
}

/* Choosing an algorithm: the per-collective listing, forcing (mdc_coll_set_algo or
 * MINIDC_ALGO_<COLL>), the alpha-beta-gamma cost model and the shared argument checks of the
 * dispatchers. The dispatchers (allreduce.c, ...) are the only callers of mdc_i_pick. */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "coll_internal.h"

static const char *const coll_names[MDC_COLL_COUNT] = {
    [MDC_COLL_ALLREDUCE] = "allreduce", [MDC_COLL_REDUCE_SCATTER] = "reduce_scatter",
    [MDC_COLL_ALLGATHER] = "allgather", [MDC_COLL_BCAST] = "bcast", [MDC_COLL_REDUCE] = "reduce",
    [MDC_COLL_GATHER] = "gather", [MDC_COLL_SCATTER] = "scatter", [MDC_COLL_ALLTOALL] = "alltoall",
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

#define A(n, f, s, c) {n, f, s, c}
static const mdc_algo_info allreduce_algos[] = {
    A("ring", "mdc_allreduce_ring", "reduce-scatter + allgather around the ring, NCCL order, chunked by the ring chunk",
      "2(p-1) a + 2(p-1)/p n b + (p-1)/p n g"),
    A("recursive_doubling", "mdc_allreduce_recursive_doubling", "lg p exchanges of the whole vector with rank XOR 2^k (fold for p != 2^k)",
      "lg p (a + n b + n g)"),
    A("rabenseifner", "mdc_allreduce_rabenseifner", "recursive-halving reduce-scatter + recursive-doubling allgather (fold for p != 2^k)",
      "2 lg p a + 2(p-1)/p n b + (p-1)/p n g"),
    A("reduce_bcast", "mdc_allreduce_reduce_bcast", "binomial reduce to rank 0 + binomial broadcast",
      "2 lg p (a + n b) + lg p n g"),
    A("hierarchical", "mdc_allreduce_hierarchical", "ring reduce-scatter in the node, ring allreduce across nodes, ring allgather in the node",
      "2(G-1) a + 2(G-1)/G n b + 2(N-1) a' + 2(N-1)/(NG) n b' + ((G-1)/G + (N-1)/(NG)) n g"),
};
static const mdc_algo_info reduce_scatter_algos[] = {
    A("ring", "mdc_reduce_scatter_ring", "p-1 steps around the ring, NCCL order (block c starts at c+1, ends at c)",
      "(p-1) a + (p-1)/p n (b + g)"),
    A("recursive_halving", "mdc_reduce_scatter_recursive_halving", "lg p steps, halving the range exchanged (fold for p != 2^k)",
      "lg p a + (p-1)/p n (b + g) + n/p c"),
    A("pairwise", "mdc_reduce_scatter_pairwise", "p-1 steps: send block r+s to r+s, receive from r-s",
      "(p-1) a + (p-1)/p n (b + g)"),
};
static const mdc_algo_info allgather_algos[] = {
    A("ring", "mdc_allgather_ring", "p-1 steps around the ring, blocks received in place", "(p-1) a + (p-1)/p n b"),
    A("recursive_doubling", "mdc_allgather_recursive_doubling", "lg p exchanges with rank XOR 2^k, doubling the range (fold for p != 2^k)",
      "lg p a + (p-1)/p n b"),
    A("bruck", "mdc_allgather_bruck", "ceil(lg p) steps at distance 2^k on a rotated buffer", "lg p a + (p-1)/p n b + (p+1)/p n c"),
    A("direct", "mdc_allgather_direct", "one step: every rank sends its block to every other rank at once",
      "(p-1) a + (p-1)/p n b"),
};
static const mdc_algo_info bcast_algos[] = {
    A("binomial", "mdc_bcast_binomial", "binomial tree from the root, whole buffer per step", "lg p (a + n b)"),
    A("scatter_allgather", "mdc_bcast_scatter_allgather", "binomial scatter of p blocks + ring allgather (van de Geijn)",
      "(lg p + p-1) a + 2(p-1)/p n b"),
    A("pipeline", "mdc_bcast_pipeline", "chain from the root in chunks of the ring chunk (default 1 MiB), NCCL's ring broadcast",
      "(p-2+m)(a + n/m b), m = chunks"),
};
static const mdc_algo_info reduce_algos[] = {
    A("binomial", "mdc_reduce_binomial", "binomial tree to the root, whole buffer per step", "lg p (a + n b + n g)"),
    A("rs_gather", "mdc_reduce_rs_gather", "ring reduce-scatter + binomial gather to the root (Rabenseifner)",
      "(p-1 + lg p) a + 2(p-1)/p n b + (p-1)/p n g"),
};
static const mdc_algo_info gather_algos[] = {
    A("binomial", "mdc_gather_binomial", "binomial tree to the root, subtrees concatenated", "lg p a + (p-1)/p n b"),
};
static const mdc_algo_info scatter_algos[] = {
    A("binomial", "mdc_scatter_binomial", "binomial tree from the root, subtrees split", "lg p a + (p-1)/p n b"),
};
static const mdc_algo_info alltoall_algos[] = {
    A("pairwise", "mdc_alltoall_pairwise", "p-1 steps: send to r+s, receive from r-s", "(p-1) a + (p-1)/p n b + n/p c"),
    A("bruck", "mdc_alltoall_bruck", "ceil(lg p) steps at distance 2^k, packed blocks", "lg p a + n/2 lg p b + (2 + lg p) n c"),
};
static const mdc_algo_info alltoallv_algos[] = {
    A("pairwise", "mdc_alltoallv_pairwise", "p-1 steps: send to r+s, receive from r-s", "(p-1) a + (p-1)/p n b + n/p c"),
};
static const mdc_algo_info barrier_algos[] = {
    A("dissemination", "mdc_barrier_dissemination", "ceil(lg p) rounds: signal r+2^k, wait for r-2^k", "lg p a"),
};
#undef A

#define N(x) (int)(sizeof x / sizeof x[0])
static const struct {
    const mdc_algo_info *list;
    int n;
} tables[MDC_COLL_COUNT] = {
    [MDC_COLL_ALLREDUCE] = {allreduce_algos, N(allreduce_algos)},
    [MDC_COLL_REDUCE_SCATTER] = {reduce_scatter_algos, N(reduce_scatter_algos)},
    [MDC_COLL_ALLGATHER] = {allgather_algos, N(allgather_algos)},
    [MDC_COLL_BCAST] = {bcast_algos, N(bcast_algos)},
    [MDC_COLL_REDUCE] = {reduce_algos, N(reduce_algos)},
    [MDC_COLL_GATHER] = {gather_algos, N(gather_algos)},
    [MDC_COLL_SCATTER] = {scatter_algos, N(scatter_algos)},
    [MDC_COLL_ALLTOALL] = {alltoall_algos, N(alltoall_algos)},
    [MDC_COLL_ALLTOALLV] = {alltoallv_algos, N(alltoallv_algos)},
    [MDC_COLL_BARRIER] = {barrier_algos, N(barrier_algos)},
};
#undef N

int mdc_coll_algo_count(mdc_coll c) { return (unsigned)c < MDC_COLL_COUNT ? tables[c].n : 0; }

const mdc_algo_info *mdc_coll_algo_at(mdc_coll c, int i) {
    if ((unsigned)c >= MDC_COLL_COUNT || i < 0 || i >= tables[c].n) return NULL;
    return &tables[c].list[i];
}

int mdc_coll_algo_find(mdc_coll c, const char *name) {
    if (!name) return -1;
    for (int i = 0; i < mdc_coll_algo_count(c); i++)
        if (!strcmp(name, tables[c].list[i].name)) return i;
    return -1;
}

/* ---- forcing ---------------------------------------------------------------------------- */

static int forced[MDC_COLL_COUNT]; /* algorithm index + 1; 0 = auto */
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
        int i = mdc_coll_algo_find((mdc_coll)c, v);
        if (i < 0)
            fprintf(stderr, "minidc: %s=%s: unknown algorithm, using auto\n", var, v);
        else
            forced[c] = i + 1;
    }
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
    if (!algo || !strcmp(algo, "auto")) {
        forced[c] = 0;
        return MDC_OK;
    }
    int i = mdc_coll_algo_find(c, algo);
    if (i < 0) {
        char list[256] = "";
        for (int j = 0; j < tables[c].n; j++) {
            strncat(list, " ", sizeof list - strlen(list) - 1);
            strncat(list, tables[c].list[j].name, sizeof list - strlen(list) - 1);
        }
        return mdc_fail(MDC_ERR_INVALID, "%s: unknown algorithm '%s' (known: auto%s)", coll_names[c], algo, list);
    }
    forced[c] = i + 1;
    return MDC_OK;
}

const char *mdc_coll_get_algo(mdc_coll c) {
    read_env();
    if ((unsigned)c >= MDC_COLL_COUNT || !forced[c]) return "auto";
    return tables[c].list[forced[c] - 1].name;
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

static double lg_ceil(int p) {
    int k = 0;
    while ((1 << k) < p) k++;
    return k;
}

double mdc_coll_cost_params(mdc_coll c, const char *algo, int p, size_t bytes, const mdc_cost_params *m) {
    int i = mdc_coll_algo_find(c, algo);
    if (i < 0) return -1;
    if (p <= 1) return 0;
    double n = (double)bytes, P = p, lg = lg_ceil(p);
    int p2 = mdc_i_pow2_floor(p), fold = p2 != p;
    double lg2 = lg_ceil(p2), f = (P - 1) / P;
    int multi = m->ranks_per_node > 0 && m->ranks_per_node < p;
    double a = multi ? m->alpha_inter : m->alpha, b = multi ? m->beta_inter : m->beta, g = m->gamma;
    double cp = 2.0 / 3.0 * g; /* local copy per byte: reads and writes it (a reduction: 3 bytes) */
    const char *name = tables[c].list[i].name;
    switch (c) {
    case MDC_COLL_ALLREDUCE:
        if (!strcmp(name, "ring")) return 2 * (P - 1) * a + 2 * f * n * b + f * n * g;
        if (!strcmp(name, "recursive_doubling"))
            return lg2 * (a + n * b + n * g) + (fold ? 2 * (a + n * b) + n * g : 0);
        if (!strcmp(name, "rabenseifner")) {
            double f2 = (double)(p2 - 1) / p2;
            return 2 * lg2 * a + 2 * f2 * n * b + f2 * n * g + (fold ? 2 * (a + n * b) + n * g : 0);
        }
        if (!strcmp(name, "reduce_bcast")) return 2 * lg * (a + n * b) + lg * n * g;
        if (!strcmp(name, "hierarchical")) {
            int G = m->ranks_per_node, Nn = G > 0 ? p / G : 0;
            if (G <= 1 || Nn <= 1 || G * Nn != p) return HUGE_VAL;
            double fg = (G - 1.0) / G, fn = (Nn - 1.0) / ((double)Nn * G);
            return 2 * (G - 1) * m->alpha + 2 * fg * n * m->beta + 2 * (Nn - 1) * m->alpha_inter +
                   2 * fn * n * m->beta_inter + (fg + fn) * n * g;
        }
        break;
    case MDC_COLL_REDUCE_SCATTER:
        /* Halving reduces into scratch (its ranges are not the caller's block) and copies the
         * block out at the end; ring and pairwise reduce straight into place. */
        if (!strcmp(name, "recursive_halving"))
            return lg2 * a + f * n * (b + g) + n / P * cp + (fold ? 2 * a + n * b + n * g : 0);
        return (P - 1) * a + f * n * (b + g);
    case MDC_COLL_ALLGATHER:
        if (!strcmp(name, "ring")) return (P - 1) * a + f * n * b;
        if (!strcmp(name, "recursive_doubling")) return lg2 * a + f * n * b + (fold ? 2 * a + n * b : 0);
        if (!strcmp(name, "direct")) return (P - 1) * a + f * n * b;
        return lg * a + f * n * b + (P + 1) / P * n * cp; /* Bruck: own block in, every block out */
    case MDC_COLL_BCAST:
        if (!strcmp(name, "binomial")) return lg * (a + n * b);
        if (!strcmp(name, "pipeline")) {
            double chunks = ceil(n / (double)mdc_i_pipeline_chunk(mdc_coll_ring_chunk(), 1));
            if (chunks < 1) chunks = 1;
            return (P - 2 + chunks) * (a + n / chunks * b);
        }
        return (lg + P - 1) * a + 2 * f * n * b;
    case MDC_COLL_REDUCE:
        if (!strcmp(name, "binomial")) return lg * (a + n * b + n * g);
        return (P - 1 + lg) * a + 2 * f * n * b + f * n * g;
    case MDC_COLL_GATHER:
    case MDC_COLL_SCATTER: return lg * a + f * n * b;
    case MDC_COLL_ALLTOALL:
        /* Bruck: rotate in, pack and unpack about n/2 per step, rotate out. */
        if (!strcmp(name, "bruck")) return lg * a + n / 2 * lg * b + (2 + lg) * n * cp;
        return (P - 1) * a + f * n * b + n / P * cp; /* the own block is copied, not sent */
    case MDC_COLL_ALLTOALLV: return (P - 1) * a + f * n * b + n / P * cp;
    case MDC_COLL_BARRIER: return lg * a;
    default: break;
    }
    return -1;
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

#define HOST_DIRECT_MIN ((size_t)1 << 20) /* bytes: the allgather's direct exchange from here */

int mdc_i_pick(mdc_coll c, size_t bytes, const mdc_group *g) {
    read_env();
    if (forced[c]) return forced[c] - 1;
    if (tables[c].n == 1) return 0;
    mdc_i_pick_memo *memo = mdc_i_group_memo(g, c);
    if (memo && memo->gen == settings_gen && memo->bytes == bytes) return memo->pick;
    mdc_cost_params m;
    int host = !strcmp(mdc_coll_get_pick(), "host");
    if (host)
        mdc_coll_host_params(mdc_group_size(g), &m);
    else
        mdc_coll_group_params(g, &m);
    int best = 0;
    double bc = HUGE_VAL;
    for (int i = 0; i < tables[c].n; i++) {
        const char *name = tables[c].list[i].name;
        double x = mdc_coll_cost_params(c, name, mdc_group_size(g), bytes, &m);
        /* Equal costs go to the first listed, except on the host's clock for the reduce-scatter:
         * ring and pairwise cost the same (the same messages and bytes), but pairwise sends
         * inputs, so no step waits for a neighbour's previous step, and it reduces into its own
         * block; with ranks sharing cores it was 10-25% faster here (docs/performance.md, item
         * 18). The device's choice keeps the ring (NCCL's order). */
        int tie_to_this = host && c == MDC_COLL_REDUCE_SCATTER && !strcmp(name, "pairwise");
        if (x >= 0 && (x < bc || (x == bc && tie_to_this))) {
            bc = x;
            best = i;
        }
    }
    /* On the host's clock, with three or more ranks to a core, the allgather of 1 MiB or more
     * goes direct: the model cannot tell it from the others (every rank receives the same
     * bytes), but its messages depend on no earlier step, and with ranks taking turns on a
     * core each dependent step costs a wait for a peer's turn: 8 ranks on 2 cores, 64 MiB,
     * 49.5-52.2 ms against 62.2-72.3 for recursive doubling, 1 MiB 570-703 us against
     * 739-847; at 4 ranks (2 to a core) within noise (docs/performance.md, item 24). */
    if (host && c == MDC_COLL_ALLGATHER && bytes >= HOST_DIRECT_MIN &&
        mdc_i_ranks_per_core(mdc_group_transport(g)) >= 3) {
        int d = mdc_coll_algo_find(c, "direct");
        if (d >= 0) best = d;
    }
    if (memo) *memo = (mdc_i_pick_memo){bytes, settings_gen, best};
    return best;
}

const char *mdc_coll_choose(mdc_coll c, size_t bytes, const mdc_group *g) {
    if ((unsigned)c >= MDC_COLL_COUNT || !g) return "?";
    return tables[c].list[mdc_i_pick(c, bytes, g)].name;
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

mdc_status mdc_i_check_count(const char *what, const mdc_group *g, const char *arg, size_t count,
                             mdc_dtype t, size_t times) {
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
        return mdc_fail(MDC_ERR_INVALID, "%s: rank %d: op %s is not defined on dtype %s (only sum)", what,
                        world_of(g), mdc_op_name((mdc_op)op), mdc_dtype_name(t));
    return MDC_OK;
}

mdc_status mdc_i_check_root(const char *what, const mdc_group *g, int root) {
    if (root < 0 || root >= mdc_group_size(g))
        return mdc_fail(MDC_ERR_INVALID, "%s: rank %d: root %d outside the group's 0..%d", what,
                        world_of(g), root, mdc_group_size(g) - 1);
    return MDC_OK;
}

mdc_status mdc_i_check_buf(const char *what, const mdc_group *g, const char *arg, const void *buf, size_t count) {
    if (!buf && count)
        return mdc_fail(MDC_ERR_INVALID, "%s: rank %d: %s is NULL with %zu elements", what, world_of(g), arg, count);
    return MDC_OK;
}

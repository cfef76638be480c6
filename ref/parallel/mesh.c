/* The device mesh (include/minidc/mesh.h): coordinates, groups and pipeline neighbours, all
 * computed locally from the axis sizes. A group of a kind holds every rank whose coordinates
 * agree with this rank's on the axes the kind does not vary, in rank order; tag space
 * 1 + kind keeps the kinds apart (tag space 0 is the runtime's world group). */
#include <stdlib.h>
#include <string.h>

#include "minidc/mesh.h"

struct mdc_mesh {
    int n[MDC_AXES], c[MDC_AXES], rank, size, kv, etp; /* tp ranks per kv head (MDC_MESH_KV), per expert (ETP) */
    mdc_transport *tr;
    mdc_group *g[MDC_MESH_GROUPS];
};

static const char *const axis_names[MDC_AXES] = {"tp", "cp", "ep", "dp", "pp"};
const char *mdc_axis_name(mdc_axis a) { return a >= 0 && a < MDC_AXES ? axis_names[a] : "?"; }

/* the axes a kind varies, as a bit mask */
static unsigned varies(mdc_mesh_group_kind k) {
    switch (k) {
    case MDC_MESH_TP: return 1u << MDC_AXIS_TP;
    case MDC_MESH_CP: return 1u << MDC_AXIS_CP;
    case MDC_MESH_EP: return 1u << MDC_AXIS_EP;
    case MDC_MESH_DP: return 1u << MDC_AXIS_DP;
    case MDC_MESH_KV:
    case MDC_MESH_ETP:
    case MDC_MESH_ETP_SHARD: return 1u << MDC_AXIS_TP;
    case MDC_MESH_PP:
    case MDC_MESH_EMBED: return 1u << MDC_AXIS_PP;
    case MDC_MESH_DENSE: return 1u << MDC_AXIS_DP | 1u << MDC_AXIS_CP | 1u << MDC_AXIS_EP;
    case MDC_MESH_EXPERT: return 1u << MDC_AXIS_DP | 1u << MDC_AXIS_CP;
    case MDC_MESH_TP_CP: return 1u << MDC_AXIS_TP | 1u << MDC_AXIS_CP;
    default: return (1u << MDC_AXES) - 1;
    }
}

/* the traffic class of a kind's messages (predict's breakdown of communication time) */
static mdc_traffic traffic(mdc_mesh_group_kind k) {
    switch (k) {
    case MDC_MESH_TP:
    case MDC_MESH_KV:
    case MDC_MESH_ETP:
    case MDC_MESH_ETP_SHARD:
    case MDC_MESH_TP_CP: return MDC_TRAFFIC_TP;
    case MDC_MESH_CP: return MDC_TRAFFIC_CP;
    case MDC_MESH_EP: return MDC_TRAFFIC_EP;
    case MDC_MESH_DP:
    case MDC_MESH_DENSE:
    case MDC_MESH_EXPERT: return MDC_TRAFFIC_DP;
    case MDC_MESH_PP:
    case MDC_MESH_EMBED: return MDC_TRAFFIC_PP;
    default: return MDC_TRAFFIC_OTHER;
    }
}

static void coords(const mdc_mesh *m, int rank, int *c) {
    for (int a = 0; a < MDC_AXES; a++) c[a] = rank % m->n[a], rank /= m->n[a];
}

/* members of kind k around this rank, in rank order; returns the count */
static int members(const mdc_mesh *m, mdc_mesh_group_kind k, int *out) {
    unsigned v = varies(k);
    int cnt = 0, c[MDC_AXES];
    for (int r = 0; r < m->size; r++) {
        coords(m, r, c);
        int same = 1;
        for (int a = 0; a < MDC_AXES; a++)
            if (!(v >> a & 1u) && c[a] != m->c[a]) same = 0;
        if (k == MDC_MESH_EMBED && c[MDC_AXIS_PP] != 0 && c[MDC_AXIS_PP] != m->n[MDC_AXIS_PP] - 1) same = 0;
        if (k == MDC_MESH_KV && c[MDC_AXIS_TP] / m->kv != m->c[MDC_AXIS_TP] / m->kv) same = 0;
        if (k == MDC_MESH_ETP && c[MDC_AXIS_TP] / m->etp != m->c[MDC_AXIS_TP] / m->etp) same = 0;
        if (k == MDC_MESH_ETP_SHARD && c[MDC_AXIS_TP] % m->etp != m->c[MDC_AXIS_TP] % m->etp) same = 0;
        if (same) out[cnt++] = r;
    }
    return cnt;
}

mdc_status mdc_mesh_create(mdc_mesh **out, mdc_transport *tr, const mdc_mesh_dims *d) {
    *out = NULL;
    int n[MDC_AXES] = {d->tp, d->cp, d->ep, d->dp, d->pp};
    long long prod = 1;
    for (int a = 0; a < MDC_AXES; a++) {
        if (n[a] < 1)
            return mdc_fail(MDC_ERR_INVALID, "--%s %d: every mesh size must be at least 1", axis_names[a], n[a]);
        prod *= n[a];
        if (prod > (1 << 24)) break;
    }
    int size = mdc_transport_size(tr);
    if (prod != size)
        return mdc_fail(MDC_ERR_INVALID,
                        "the mesh --tp %d x --cp %d x --ep %d x --dp %d x --pp %d = %lld ranks, but the job "
                        "has %d (mpiexec.mpich -n %lld)",
                        n[0], n[1], n[2], n[3], n[4], prod, size, prod);
    mdc_mesh *m = calloc(1, sizeof *m);
    int *ranks = malloc((size_t)size * sizeof(int));
    if (!m || !ranks) {
        free(m), free(ranks);
        return mdc_fail(MDC_ERR_OOM_HOST, "mesh");
    }
    memcpy(m->n, n, sizeof n);
    m->rank = mdc_transport_rank(tr), m->size = size, m->kv = 1, m->etp = 1, m->tr = tr;
    coords(m, m->rank, m->c);
    mdc_status st = MDC_OK;
    for (int k = 0; k < MDC_MESH_GROUPS; k++) mdc_transport_set_traffic(tr, 1 + k, traffic((mdc_mesh_group_kind)k));
    for (int k = 0; k < MDC_MESH_GROUPS && !st; k++) {
        if (k == MDC_MESH_EMBED && m->c[MDC_AXIS_PP] != 0 && m->c[MDC_AXIS_PP] != n[MDC_AXIS_PP] - 1) continue;
        int cnt = members(m, (mdc_mesh_group_kind)k, ranks);
        st = mdc_group_create(&m->g[k], tr, ranks, cnt, 1 + k);
    }
    free(ranks);
    if (st) {
        mdc_mesh_free(m);
        return st;
    }
    *out = m;
    return MDC_OK;
}

void mdc_mesh_free(mdc_mesh *m) {
    if (!m) return;
    for (int k = 0; k < MDC_MESH_GROUPS; k++) mdc_group_free(m->g[k]);
    free(m);
}

mdc_mesh_dims mdc_mesh_get_dims(const mdc_mesh *m) {
    mdc_mesh_dims d = {m->n[0], m->n[1], m->n[2], m->n[3], m->n[4]};
    return d;
}

/* The groups of kinds k[0 .. nk) made again (after kv or etp changed). */
static mdc_status remake(mdc_mesh *m, const mdc_mesh_group_kind *k, int nk) {
    int *ranks = malloc((size_t)m->size * sizeof(int));
    if (!ranks) return mdc_fail(MDC_ERR_OOM_HOST, "mesh");
    mdc_status st = MDC_OK;
    for (int i = 0; i < nk && !st; i++) {
        mdc_group_free(m->g[k[i]]);
        m->g[k[i]] = NULL;
        int cnt = members(m, k[i], ranks);
        st = mdc_group_create(&m->g[k[i]], m->tr, ranks, cnt, 1 + (int)k[i]);
    }
    free(ranks);
    return st;
}

mdc_status mdc_mesh_set_kv_replicas(mdc_mesh *m, int replicas) {
    if (replicas < 1 || m->n[MDC_AXIS_TP] % replicas)
        return mdc_fail(MDC_ERR_INVALID, "%d tp ranks per kv head do not divide --tp %d", replicas, m->n[MDC_AXIS_TP]);
    m->kv = replicas;
    static const mdc_mesh_group_kind k[] = {MDC_MESH_KV};
    return remake(m, k, 1);
}
mdc_status mdc_mesh_set_etp(mdc_mesh *m, int etp) {
    if (etp < 1 || m->n[MDC_AXIS_TP] % etp)
        return mdc_fail(MDC_ERR_INVALID,
                        "--etp %d does not divide --tp %d (an expert's shards lie on etp of the tp ranks)", etp,
                        m->n[MDC_AXIS_TP]);
    m->etp = etp;
    static const mdc_mesh_group_kind k[] = {MDC_MESH_ETP, MDC_MESH_ETP_SHARD};
    return remake(m, k, 2);
}
int mdc_mesh_etp(const mdc_mesh *m) { return m->etp; }
int mdc_mesh_size(const mdc_mesh *m, mdc_axis a) { return m->n[a]; }
int mdc_mesh_coord(const mdc_mesh *m, mdc_axis a) { return m->c[a]; }
int mdc_mesh_coord_of(const mdc_mesh *m, int rank, mdc_axis a) {
    int c[MDC_AXES];
    coords(m, rank, c);
    return c[a];
}
mdc_group *mdc_mesh_group(const mdc_mesh *m, mdc_mesh_group_kind k) {
    return k >= 0 && k < MDC_MESH_GROUPS ? m->g[k] : NULL;
}

static int pp_neighbour(const mdc_mesh *m, int step) {
    int p = m->c[MDC_AXIS_PP] + step;
    if (p < 0 || p >= m->n[MDC_AXIS_PP]) return -1;
    int stride = m->n[0] * m->n[1] * m->n[2] * m->n[3];
    return m->rank + step * stride;
}
int mdc_mesh_pp_prev(const mdc_mesh *m) { return pp_neighbour(m, -1); }
int mdc_mesh_pp_next(const mdc_mesh *m) { return pp_neighbour(m, 1); }

void mdc_mesh_print(const mdc_mesh *m, FILE *out) {
    if (m->rank != 0) return;
    fprintf(out, "mesh: tp %d x cp %d x ep %d x dp %d x pp %d = %d ranks (rank = tp + %d cp + %d ep + %d dp + %d pp)\n",
            m->n[0], m->n[1], m->n[2], m->n[3], m->n[4], m->size, m->n[0], m->n[0] * m->n[1],
            m->n[0] * m->n[1] * m->n[2], m->n[0] * m->n[1] * m->n[2] * m->n[3]);
    int shown = m->size <= 16 ? m->size : 8, c[MDC_AXES];
    for (int r = 0; r < shown; r++) {
        coords(m, r, c);
        fprintf(out, "  rank %d: tp %d cp %d ep %d dp %d pp %d\n", r, c[0], c[1], c[2], c[3], c[4]);
    }
    if (shown < m->size) fprintf(out, "  ... (%d more)\n", m->size - shown);
    static const struct {
        mdc_mesh_group_kind k;
        const char *what;
    } uses[] = {
        {MDC_MESH_DENSE, "dense gradients (dp x cp x ep)"},
        {MDC_MESH_EP, "expert parallel: the MoE blocks' all-to-alls (ep)"},
        {MDC_MESH_EXPERT, "expert gradients: the same experts' replicas (dp x cp)"},
        {MDC_MESH_TP, "tensor parallel: f, g, the vocab-parallel loss; SP LayerNorm and bias gradients"},
        {MDC_MESH_KV, "a kv head's replicas over tp: the attention's dk, dv summed (tp / KV)"},
        {MDC_MESH_ETP, "expert tensor parallel: an expert's rows gathered, its partial sums summed (etp)"},
        {MDC_MESH_ETP_SHARD, "the same expert shard over tp: with SP its gradients summed (tp / etp)"},
        {MDC_MESH_WORLD, "loss and gradient norm (every rank)"},
    };
    int *mem = malloc((size_t)m->size * sizeof(int));
    for (size_t i = 0; mem && i < sizeof uses / sizeof uses[0]; i++) {
        if (uses[i].k == MDC_MESH_EP && m->n[MDC_AXIS_EP] < 2) continue;
        if (uses[i].k == MDC_MESH_EXPERT && m->n[MDC_AXIS_EP] < 2 && m->etp < 2) continue;
        if (uses[i].k == MDC_MESH_KV && m->kv < 2) continue;
        if ((uses[i].k == MDC_MESH_ETP && m->etp < 2) ||
            (uses[i].k == MDC_MESH_ETP_SHARD && (m->etp < 2 || m->etp == m->n[MDC_AXIS_TP])))
            continue;
        int cnt = members(m, uses[i].k, mem);
        fprintf(out, "  %-80s group of %d, rank 0's: [", uses[i].what, cnt);
        for (int j = 0; j < cnt && j < 16; j++) fprintf(out, "%s%d", j ? " " : "", mem[j]);
        fprintf(out, "%s]\n", cnt > 16 ? " ..." : "");
    }
    free(mem);
}

/* Program start-up: MPI, device, transport, world group. */
#include <mpi.h>
#include <omp.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <unistd.h>

#include "minidc/fault.h"
#include "minidc/runtime.h"
#include "../device/platform.h"

#define TAG_HOST 4094 /* tags of tag space 0 used by the runtime itself */
#define TAG_REPORT 4095

/* A device-less transport and world group: messages between ranks that are not charged to
 * any device (start-up and reports). */
static mdc_status quiet_world(mdc_runtime *rt, mdc_transport **t, mdc_group **g) {
    *g = NULL;
    mdc_status st = mdc_transport_create(t, NULL, NULL, rt->opts.gpus_per_node);
    if (st) return st;
    st = mdc_group_world(g, *t);
    if (st) {
        mdc_transport_free(*t);
        *t = NULL;
    }
    return st;
}

/* --device host: rank 0 measures this machine and sends the figures to every rank, so all
 * devices of the run are the same (each rank measuring alone would disagree). */
typedef struct {
    int st;
    char detail[256];
    mdc_device_spec spec;
} host_msg;

static mdc_status share_host_spec(mdc_runtime *rt) {
    mdc_transport *t = NULL;
    mdc_group *g = NULL;
    host_msg m;
    memset(&m, 0, sizeof m);
    mdc_status st = quiet_world(rt, &t, &g);
    if (st) return st;
    if (rt->rank == 0) {
        m.st = (int)mdc_host_spec(&m.spec);
        snprintf(m.detail, sizeof m.detail, "%s", m.st ? mdc_detail() : "");
        for (int r = 1; r < rt->size && !st; r++) st = mdc_send(&m, sizeof m, r, TAG_HOST, g);
    } else {
        st = mdc_recv(&m, sizeof m, 0, TAG_HOST, g);
        if (!st && !m.st) mdc_host_spec_set(&m.spec);
    }
    if (!st && m.st) st = mdc_fail((mdc_status)m.st, "%s", m.detail);
    mdc_group_free(g);
    mdc_transport_free(t);
    return st;
}

/* More ranks than cores (a laptop running a 64-rank mesh): OpenMP's default of one thread per
 * core in every rank would put ranks x cores threads on the cores, spinning at every barrier.
 * Unless OMP_NUM_THREADS says otherwise, each rank takes its share of the cores this host's
 * ranks have (MPICH's MPI_LOCALNRANKS; the whole job if unset), at least one. The kernels give the
 * same bits with any thread count. */
static void share_cores(int size) {
    if (getenv("OMP_NUM_THREADS") || size < 2) return;
    long local = mdc_plat_local_ranks(), cores = mdc_plat_cores_usable();
    if (local < 1) local = size;
    long share = cores / local;
    omp_set_num_threads(share < 1 ? 1 : (int)share);
}

int mdc_runtime_verbose(void) {
    const char *v = getenv("MINIDC_VERBOSE");
    return v && *v && strcmp(v, "0");
}

mdc_status mdc_runtime_init(mdc_runtime *rt, int *argc, char ***argv) {
    memset(rt, 0, sizeof *rt);
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init(argc, argv) != MPI_SUCCESS) return mdc_fail(MDC_ERR_MPI, "MPI_Init failed");
    /* Errors come back as codes so the transport can name the peer and the size. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rt->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &rt->size);
    /* MINIDC_VERBOSE: each rank's pid, so that a launcher's report of a killed pid ("BAD
     * TERMINATION ... PID n") names the rank */
    if (mdc_runtime_verbose()) {
        char host[256] = "?";
        gethostname(host, sizeof host - 1);
        fprintf(stderr, "minidc: rank %d of %d is pid %d on %s\n", rt->rank, rt->size, (int)getpid(), host);
    }
    share_cores(rt->size);
    mdc_device_options_default(&rt->opts);
    int n = *argc, out = 1;
    char **av = *argv;
    for (int i = 1; i < n;) {
        int r = mdc_device_options_parse(&rt->opts, n, av, &i);
        if (r < 0) return MDC_ERR_INVALID;
        if (r == 0) av[out++] = av[i++];
    }
    av[out] = NULL;
    *argc = out;
    mdc_status st = MDC_OK;
    if (!strcmp(rt->opts.device, "host") && !rt->opts.device_file[0] && rt->size > 1) {
        st = share_host_spec(rt);
        if (st) return st;
    }
    st = mdc_device_create(&rt->dev, &rt->opts, rt->rank);
    if (st) return st;
    st = mdc_transport_create(&rt->tr, NULL, rt->dev, rt->opts.gpus_per_node);
    if (st) return st;
    mdc_transport_set_default(rt->tr);
    if (rt->rank == 0) (void)mdc_plant_get(); /* a malformed planted fault is named at start */
    return mdc_group_world(&rt->world, rt->tr);
}

void mdc_runtime_finalize(mdc_runtime *rt) {
    free(rt->report_schemes);
    rt->report_schemes = NULL;
    mdc_group_free(rt->world);
    mdc_transport_free(rt->tr);
    mdc_device_free(rt->dev);
    rt->world = NULL;
    rt->tr = NULL;
    rt->dev = NULL;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
}

void mdc_runtime_die(mdc_runtime *rt, mdc_status st, int all_ranks_same, int code) {
    if (!all_ranks_same || rt->rank == 0)
        fprintf(stderr, "minidc: rank %d: %s: %s\n", rt->rank, mdc_strerror(st), mdc_detail());
    if (!all_ranks_same && rt->tr) mdc_transport_abort_peers(rt->tr, mdc_detail());
    fflush(stderr);
    if (all_ranks_same || rt->size == 1) { /* nobody to abort: a clean finalize */
        mdc_runtime_finalize(rt);
        exit(code);
    }
    /* Peers may be blocked in a collective with us: do not wait for them in MPI_Finalize.
     * MPI_Abort makes Hydra kill every rank at once, which can drop output still in the
     * pipes (this message, 1 run in ~10): give it, and the peers' reports of our abort
     * message, 0.2 s to get out first. */
    struct timespec pause = {0, 200000000L};
    nanosleep(&pause, NULL);
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

/* What each rank sends to rank 0 for the report; the text report follows in a second message. */
typedef struct {
    mdc_dev_counters c;
    mdc_energy e;
    size_t peak[MDC_MEM_COUNT + 1];
    size_t text_len;
} rank_summary;

static void summarize(const mdc_device *dev, rank_summary *s) {
    memset(s, 0, sizeof *s);
    mdc_dev_get_counters(dev, &s->c);
    mdc_dev_energy(dev, &s->e);
    for (int k = 0; k <= MDC_MEM_COUNT; k++) s->peak[k] = mdc_dev_mem_peak(dev, (mdc_mem_category)k);
}

static void print_table(FILE *f, const mdc_runtime *rt, const rank_summary *all, double tokens) {
    const mdc_device_spec *sp = mdc_device_get_spec(rt->dev);
    fprintf(f, "device report: %d rank(s), device %s, emulate %s, energy table %s\n", rt->size, sp->name,
            rt->opts.emulate == MDC_EMULATE_OFF        ? "off"
            : rt->opts.emulate == MDC_EMULATE_THROTTLE ? "throttle"
                                                       : "account",
            mdc_device_get_energy_table(rt->dev)->name);
    fprintf(f, "%4s %12s %11s %11s %11s %11s %12s %12s%s\n", "rank", "virtual ms", "compute ms", "memory ms", "comm ms",
            "idle ms", "peak HBM MiB", "energy J", tokens > 0 ? "      J/token" : "");
    double max_now = 0, sum_e = 0;
    size_t max_peak = 0;
    for (int r = 0; r < rt->size; r++) {
        const rank_summary *s = &all[r];
        fprintf(f, "%4d %12.4f %11.4f %11.4f %11.4f %11.4f %12.3f %12.6g", r, s->c.now * 1e3, s->c.t_compute * 1e3,
                s->c.t_memory * 1e3, s->c.t_comm * 1e3, s->c.t_idle * 1e3,
                (double)s->peak[MDC_MEM_COUNT] / (1024.0 * 1024.0), s->e.total);
        if (tokens > 0) fprintf(f, " %12.6g", s->e.total / tokens);
        fprintf(f, "\n");
        if (s->c.now > max_now) max_now = s->c.now;
        if (s->peak[MDC_MEM_COUNT] > max_peak) max_peak = s->peak[MDC_MEM_COUNT];
        sum_e += s->e.total;
    }
    fprintf(f, " all %12.4f %11s %11s %11s %11s %12.3f %12.6g", max_now * 1e3, "", "", "", "",
            (double)max_peak / (1024.0 * 1024.0), sum_e);
    if (tokens > 0) fprintf(f, " %12.6g", sum_e / tokens);
    fprintf(f, "\n     (all: virtual time and peak HBM are the maximum over ranks, energy the sum)\n");
}

mdc_status mdc_runtime_report(mdc_runtime *rt, FILE *f, double tokens) {
    if (!rt || !rt->dev || !f) return mdc_fail(MDC_ERR_INVALID, "mdc_runtime_report: no runtime, device or file");
    mdc_transport *t = NULL;
    mdc_group *g = NULL;
    rank_summary mine, *all = NULL;
    char *text = NULL, **texts = NULL;
    size_t text_len = 0;
    int print_all = rt->size <= 8;
    summarize(rt->dev, &mine);
    FILE *mf = open_memstream(&text, &text_len);
    if (!mf) return mdc_fail(MDC_ERR_OOM_HOST, "rank %d: report buffer", rt->rank);
    mdc_device_report(rt->dev, mf, tokens);
    fclose(mf);
    mine.text_len = text_len;
    mdc_status st = quiet_world(rt, &t, &g);
    if (st) goto done;
    if (rt->rank != 0) {
        st = mdc_send(&mine, sizeof mine, 0, TAG_REPORT, g);
        if (!st && print_all) st = mdc_send(text, text_len, 0, TAG_REPORT, g);
        goto done;
    }
    all = calloc((size_t)rt->size, sizeof *all);
    texts = calloc((size_t)rt->size, sizeof *texts);
    if (!all || !texts) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "report of %d ranks", rt->size);
        goto done;
    }
    all[0] = mine;
    texts[0] = text;
    text = NULL;
    for (int r = 1; r < rt->size && !st; r++) {
        st = mdc_recv(&all[r], sizeof all[r], r, TAG_REPORT, g);
        if (st || !print_all) continue;
        texts[r] = malloc(all[r].text_len + 1);
        if (!texts[r]) {
            st = mdc_fail(MDC_ERR_OOM_HOST, "report text of rank %d", r);
            break;
        }
        st = mdc_recv(texts[r], all[r].text_len, r, TAG_REPORT, g);
        texts[r][all[r].text_len] = '\0';
    }
    if (st) goto done;
    print_table(f, rt, all, tokens);
    for (int r = 0; r < rt->size; r++)
        if (texts[r]) fputs(texts[r], f);
    if (!print_all) fprintf(f, "(reports of ranks 1..%d left out: more than 8 ranks; see --report)\n", rt->size - 1);
    fflush(f);
    if (rt->opts.report_path[0]) {
        mdc_dev_counters *cs = malloc((size_t)rt->size * sizeof *cs);
        mdc_energy *es = malloc((size_t)rt->size * sizeof *es);
        size_t *pk = malloc((size_t)rt->size * (MDC_MEM_COUNT + 1) * sizeof *pk);
        if (!cs || !es || !pk) st = mdc_fail(MDC_ERR_OOM_HOST, "report of %d ranks", rt->size);
        for (int r = 0; r < rt->size && !st; r++) {
            cs[r] = all[r].c;
            es[r] = all[r].e;
            memcpy(&pk[(size_t)r * (MDC_MEM_COUNT + 1)], all[r].peak, sizeof all[r].peak);
        }
        if (!st)
            st = mdc_device_report_json(rt->opts.report_path, cs, es, pk, rt->size, rt->dev, tokens,
                                        rt->report_schemes);
        free(cs);
        free(es);
        free(pk);
    }
done:
    if (texts)
        for (int r = 0; r < rt->size; r++) free(texts[r]);
    free(texts);
    free(all);
    free(text);
    mdc_group_free(g);
    mdc_transport_free(t);
    return st;
}

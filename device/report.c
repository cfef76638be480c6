/* Device reports: the human-readable one (each figure next to its formula) and the JSON one.
 * Uses only the public device API, so any layer can format a device the same way. */
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "minidc/device.h"

static const char *fmt_time(char *buf, size_t n, double s) {
    if (s == 0) snprintf(buf, n, "0 s");
    else if (s >= 1) snprintf(buf, n, "%.4f s", s);
    else if (s >= 1e-3) snprintf(buf, n, "%.4f ms", s * 1e3);
    else snprintf(buf, n, "%.4f us", s * 1e6);
    return buf;
}

static const char *fmt_bytes(char *buf, size_t n, double b) {
    if (b >= 1024.0 * 1024 * 1024) snprintf(buf, n, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024) snprintf(buf, n, "%.2f MiB", b / (1024.0 * 1024));
    else if (b >= 1024.0) snprintf(buf, n, "%.2f KiB", b / 1024.0);
    else snprintf(buf, n, "%.0f B", b);
    return buf;
}

static double pct(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

static const char *mode_name(mdc_emulate_mode m) {
    return m == MDC_EMULATE_OFF ? "off" : m == MDC_EMULATE_THROTTLE ? "throttle" : "account";
}

void mdc_device_report(const mdc_device *dev, FILE *f, double tokens) {
    const mdc_device_spec *s = mdc_device_get_spec(dev);
    const mdc_energy_table *t = mdc_device_get_energy_table(dev);
    mdc_dev_counters c;
    mdc_energy e;
    mdc_dev_get_counters(dev, &c);
    mdc_dev_energy(dev, &e);
    char a[32], b[32], d[32];
    fprintf(f, "rank %d: device %s (%s), emulate %s, energy table %s\n", mdc_device_rank(dev), s->name, s->description,
            mode_name(mdc_device_mode(dev)), t->name);
    if (mdc_device_mode(dev) == MDC_EMULATE_OFF) fprintf(f, "  (--emulate off: nothing was accounted)\n");
    fprintf(f, "  virtual time   %12s = compute + memory + communication + idle\n", fmt_time(a, sizeof a, c.now));
    fprintf(
        f,
        "    compute      %12s %5.1f%%  flop-bound kernels: flops / peak (%.4g TFLOP/s fp32, %.4g bf16) + %s launch\n",
        fmt_time(a, sizeof a, c.t_compute), pct(c.t_compute, c.now), s->flops_fp32 / 1e12, s->flops_bf16 / 1e12,
        fmt_time(b, sizeof b, s->launch_overhead));
    fprintf(f, "    memory       %12s %5.1f%%  memory-bound kernels: HBM bytes / %.4g TB/s + launch\n",
            fmt_time(a, sizeof a, c.t_memory), pct(c.t_memory, c.now), s->hbm_bw / 1e12);
    fprintf(f, "    communication%12s %5.1f%%  copies and messages: latency + bytes / link bandwidth\n",
            fmt_time(a, sizeof a, c.t_comm), pct(c.t_comm, c.now));
    fprintf(f, "    idle         %12s %5.1f%%  waiting for a peer's message to leave\n",
            fmt_time(a, sizeof a, c.t_idle), pct(c.t_idle, c.now));
    if (c.t_overlap > 0)
        fprintf(f, "    overlap      %12s         communication a scheme hid under compute (part of the above)\n",
                fmt_time(a, sizeof a, c.t_overlap));
    fprintf(f, "  work           %.0f kernels, %.4g FLOP, %.4g int ops, HBM %s, SRAM %s, host DRAM %s\n", c.kernels,
            c.flops, c.int_ops, fmt_bytes(a, sizeof a, c.hbm_bytes), fmt_bytes(b, sizeof b, c.sram_bytes),
            fmt_bytes(d, sizeof d, c.host_bytes));
    fprintf(f, "  messages       %.0f sent (%s), %.0f received (%s); link bytes:", c.messages_sent,
            fmt_bytes(a, sizeof a, c.bytes_sent), c.messages_recv, fmt_bytes(b, sizeof b, c.bytes_recv));
    for (int l = 0; l < MDC_LINK_COUNT; l++)
        fprintf(f, " %s %s", mdc_link_name((mdc_link)l), fmt_bytes(a, sizeof a, c.link_bytes[l]));
    fprintf(f, "\n");
    double cap = mdc_device_capacity(dev);
    double peak = (double)mdc_dev_mem_peak(dev, MDC_MEM_COUNT);
    fprintf(f, "  HBM            peak %s of %s capacity (%.1f%%), in use now %s\n", fmt_bytes(a, sizeof a, peak),
            fmt_bytes(b, sizeof b, cap), pct(peak, cap),
            fmt_bytes(d, sizeof d, (double)mdc_dev_mem_in_use(dev, MDC_MEM_COUNT)));
    for (int k = 0; k < MDC_MEM_COUNT; k++) {
        size_t pk = mdc_dev_mem_peak(dev, (mdc_mem_category)k);
        if (pk)
            fprintf(f, "    %-12s peak %12s\n", mdc_mem_category_name((mdc_mem_category)k),
                    fmt_bytes(a, sizeof a, (double)pk));
    }
    fprintf(f, "  energy (J)     table %s\n", t->name);
    fprintf(f, "    fp ops       %12.6g  = %.6g FLOP x %g pJ\n", e.fp, c.flops, t->pj_fp_op);
    fprintf(f, "    int ops      %12.6g  = %.6g ops x %g pJ\n", e.int_ops, c.int_ops, t->pj_int_op);
    fprintf(f, "    SRAM         %12.6g  = %.6g B / 8 x %g pJ per 64-bit read\n", e.sram, c.sram_bytes, t->pj_sram_64b);
    fprintf(f, "    HBM          %12.6g  = %.6g B x 8 x %g pJ/bit\n", e.hbm, c.hbm_bytes, t->pj_hbm_bit);
    fprintf(f, "    host DRAM    %12.6g  = %.6g B / 8 x %g pJ per 64-bit read\n", e.host_dram, c.host_bytes,
            t->pj_dram_64b);
    const double pj_link[MDC_LINK_COUNT] = {t->pj_nvlink_bit, t->pj_net_bit, t->pj_pcie_bit};
    for (int l = 0; l < MDC_LINK_COUNT; l++)
        fprintf(f, "    %-12s %12.6g  = %.6g B sent x 8 x %g pJ/bit\n", mdc_link_name((mdc_link)l), e.link[l],
                c.link_bytes[l], pj_link[l]);
    fprintf(f, "    total        %12.6g", e.total);
    if (c.now > 0)
        fprintf(f, "  average power = total / virtual time = %.4g W (TDP %g W)", e.total / c.now, s->tdp_watts);
    fprintf(f, "\n");
    if (tokens > 0) fprintf(f, "  energy/token   %12.6g J = %.6g J / %.0f tokens\n", e.total / tokens, e.total, tokens);
}

/* Adds a number printed with 17 significant digits, so it reads back bit for bit (cJSON's own
 * printer settles for 15 when they are close enough). Non-finite values become null. */
static void add_num(cJSON *o, const char *key, double v) {
    char buf[40];
    if (isfinite(v)) snprintf(buf, sizeof buf, "%.17g", v);
    else snprintf(buf, sizeof buf, "null");
    cJSON_AddRawToObject(o, key, buf);
}

static cJSON *spec_json(const mdc_device_spec *s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", s->name);
    cJSON_AddStringToObject(o, "description", s->description);
    add_num(o, "hbm_bytes", s->hbm_bytes);
    add_num(o, "hbm_bw", s->hbm_bw);
    add_num(o, "hbm_bus_bits_per_stack", s->hbm_bus_bits_per_stack);
    add_num(o, "hbm_stacks", s->hbm_stacks);
    cJSON_AddStringToObject(o, "hbm_gen", s->hbm_gen);
    add_num(o, "flops_fp32", s->flops_fp32);
    add_num(o, "flops_bf16", s->flops_bf16);
    add_num(o, "sram_bytes", s->sram_bytes);
    add_num(o, "nvlink_bw", s->nvlink_bw);
    add_num(o, "nvlink_latency", s->nvlink_latency);
    add_num(o, "net_bw", s->net_bw);
    add_num(o, "net_latency", s->net_latency);
    add_num(o, "pcie_bw", s->pcie_bw);
    add_num(o, "launch_overhead", s->launch_overhead);
    add_num(o, "tdp_watts", s->tdp_watts);
    add_num(o, "gemm_eff", s->eff.gemm), add_num(o, "gemm_half_flops", s->eff.gemm_half);
    add_num(o, "mem_eff", s->eff.mem), add_num(o, "mem_half_bytes", s->eff.mem_half);
    add_num(o, "nvlink_eff", s->eff.nvlink), add_num(o, "net_eff", s->eff.net);
    return o;
}

static cJSON *table_json(const mdc_energy_table *t) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", t->name);
    cJSON_AddStringToObject(o, "source", t->source);
    add_num(o, "pj_int_op", t->pj_int_op);
    add_num(o, "pj_fp_op", t->pj_fp_op);
    add_num(o, "pj_sram_64b", t->pj_sram_64b);
    add_num(o, "pj_dram_64b", t->pj_dram_64b);
    add_num(o, "pj_hbm_bit", t->pj_hbm_bit);
    add_num(o, "pj_nvlink_bit", t->pj_nvlink_bit);
    add_num(o, "pj_net_bit", t->pj_net_bit);
    add_num(o, "pj_pcie_bit", t->pj_pcie_bit);
    return o;
}

/* Builds the JSON tree; NULL if cJSON ran out of memory. */
static cJSON *report_tree(const mdc_dev_counters *cs, const mdc_energy *es, const size_t *peaks, int nranks,
                          const mdc_device *dev0, double tokens) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    cJSON_AddStringToObject(root, "format", "minidc-device-report-1");
    cJSON_AddItemToObject(root, "device", spec_json(mdc_device_get_spec(dev0)));
    cJSON_AddItemToObject(root, "energy_table", table_json(mdc_device_get_energy_table(dev0)));
    cJSON_AddStringToObject(root, "emulate", mode_name(mdc_device_mode(dev0)));
    add_num(root, "capacity_bytes", mdc_device_capacity(dev0));
    add_num(root, "tokens", tokens);
    cJSON *ranks = cJSON_AddArrayToObject(root, "ranks");
    double tot_e = 0, max_now = 0;
    for (int r = 0; r < nranks; r++) {
        const mdc_dev_counters *c = &cs[r];
        const mdc_energy *e = &es[r];
        const size_t *pk = &peaks[(size_t)r * (MDC_MEM_COUNT + 1)];
        cJSON *o = cJSON_CreateObject();
        add_num(o, "rank", r);
        cJSON *tm = cJSON_AddObjectToObject(o, "time_s");
        add_num(tm, "total", c->now);
        add_num(tm, "compute", c->t_compute);
        add_num(tm, "memory", c->t_memory);
        add_num(tm, "comm", c->t_comm);
        add_num(tm, "idle", c->t_idle);
        add_num(tm, "overlap", c->t_overlap);
        cJSON *w = cJSON_AddObjectToObject(o, "counts");
        add_num(w, "kernels", c->kernels);
        add_num(w, "flops", c->flops);
        add_num(w, "int_ops", c->int_ops);
        add_num(w, "sram_bytes", c->sram_bytes);
        add_num(w, "hbm_bytes", c->hbm_bytes);
        add_num(w, "host_bytes", c->host_bytes);
        add_num(w, "messages_sent", c->messages_sent);
        add_num(w, "messages_recv", c->messages_recv);
        add_num(w, "bytes_sent", c->bytes_sent);
        add_num(w, "bytes_recv", c->bytes_recv);
        for (int l = 0; l < MDC_LINK_COUNT; l++) {
            char key[32];
            snprintf(key, sizeof key, "%s_bytes", mdc_link_name((mdc_link)l));
            add_num(w, key, c->link_bytes[l]);
        }
        cJSON *p = cJSON_AddObjectToObject(o, "peak_hbm_bytes");
        for (int k = 0; k <= MDC_MEM_COUNT; k++) add_num(p, mdc_mem_category_name((mdc_mem_category)k), (double)pk[k]);
        cJSON *ej = cJSON_AddObjectToObject(o, "energy_j");
        add_num(ej, "fp", e->fp);
        add_num(ej, "int", e->int_ops);
        add_num(ej, "sram", e->sram);
        add_num(ej, "hbm", e->hbm);
        add_num(ej, "host_dram", e->host_dram);
        for (int l = 0; l < MDC_LINK_COUNT; l++) add_num(ej, mdc_link_name((mdc_link)l), e->link[l]);
        add_num(ej, "total", e->total);
        if (tokens > 0) add_num(o, "energy_per_token_j", e->total / tokens);
        cJSON_AddItemToArray(ranks, o);
        tot_e += e->total;
        if (c->now > max_now) max_now = c->now;
    }
    cJSON *tot = cJSON_AddObjectToObject(root, "totals");
    add_num(tot, "ranks", nranks);
    add_num(tot, "time_s", max_now);
    add_num(tot, "energy_j", tot_e);
    if (tokens > 0) add_num(tot, "energy_per_token_j", tot_e / tokens);
    return root;
}

mdc_status mdc_device_report_json(const char *path, const mdc_dev_counters *counters, const mdc_energy *energies,
                                  const size_t *peak_bytes, int nranks, const mdc_device *dev0, double tokens,
                                  const char *schemes) {
    if (!path || !counters || !energies || !peak_bytes || !dev0 || nranks < 1)
        return mdc_fail(MDC_ERR_INVALID, "mdc_device_report_json: NULL argument or no ranks");
    mdc_status st = MDC_OK;
    char *text = NULL;
    cJSON *root = report_tree(counters, energies, peak_bytes, nranks, dev0, tokens);
    cJSON *sch = root && schemes ? cJSON_Parse(schemes) : NULL;
    if (sch) cJSON_AddItemToObject(root, "schemes", sch);
    if (root) text = cJSON_Print(root);
    if (!text) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "--report %s: building the JSON", path);
        goto done;
    }
    mdc_atomic a;
    if (mdc_atomic_open(&a, path)) {
        st = mdc_fail(MDC_ERR_IO, "--report %s: cannot open for writing (%s)", path, mdc_detail());
        goto done;
    }
    char label[300];
    snprintf(label, sizeof label, "--report %s", path);
    st = mdc_atomic_commit(&a, fputs(text, a.f) >= 0 && fputc('\n', a.f) != EOF, label);
done:
    cJSON_free(text);
    cJSON_Delete(root);
    return st;
}

mdc_status mdc_device_report_json_one(const char *path, const mdc_device *dev, double tokens) {
    if (!path || !path[0]) return MDC_OK;
    mdc_dev_counters c;
    mdc_energy e;
    size_t peak[MDC_MEM_COUNT + 1];
    mdc_dev_get_counters(dev, &c);
    mdc_dev_energy(dev, &e);
    for (int k = 0; k <= MDC_MEM_COUNT; k++) peak[k] = mdc_dev_mem_peak(dev, (mdc_mem_category)k);
    return mdc_device_report_json(path, &c, &e, peak, 1, dev, tokens, NULL);
}

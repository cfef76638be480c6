/* mdc_runtime_report under MPI: every rank's counters reach rank 0 exactly, the table and each
 * rank's report are printed, the JSON report parses and holds the same numbers, and the
 * report's own messages are not charged. Also: a message that reaches a busy receiver (its
 * clock already past the arrival) adds no time there. */
#include <cjson/cJSON.h>
#include <unistd.h>

#include "testutil.h"

static const cJSON *item(const cJSON *o, const char *a) { return cJSON_GetObjectItemCaseSensitive(o, a); }
static double num(const cJSON *o, const char *a, const char *b) {
    const cJSON *x = item(o, a);
    if (b) x = item(x, b);
    return cJSON_IsNumber(x) ? x->valuedouble : -1;
}

int main(int argc, char **argv) {
    mdc_runtime rt;
    MDC_CHECK(mdc_runtime_init(&rt, &argc, &argv));
    int r = rt.rank, p = rt.size;
    const mdc_device_spec *s = mdc_device_get_spec(rt.dev);
    char path[64] = "";
    if (r == 0) {
        snprintf(path, sizeof path, "/tmp/minidc-report-%d.json", (int)getpid());
        snprintf(rt.opts.report_path, sizeof rt.opts.report_path, "%s", path);
    }
    void *buf;
    MDC_CHECK(mdc_dev_alloc(rt.dev, &buf, (size_t)(r + 1) * 1000, MDC_MEM_PARAMS, "w"));
    mdc_dev_kernel(rt.dev, (r + 1) * 1e9, 0, MDC_PREC_FP32);
    if (p >= 2 && r < 2) {
        char msg[100] = {0};
        if (r == 0) {
            MDC_CHECK(mdc_send(msg, sizeof msg, 1, 5, rt.world));
        } else {
            mdc_dev_kernel(rt.dev, 1e15, 0, MDC_PREC_FP32); /* busy for ~15 s of virtual time */
            double before = mdc_dev_now(rt.dev);
            MDC_CHECK(mdc_recv(msg, sizeof msg, 0, 5, rt.world));
            TU_EQ_DBL(mdc_dev_now(rt.dev), before);
        }
    }
    mdc_dev_counters c0, c1;
    mdc_dev_get_counters(rt.dev, &c0);
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    MDC_CHECK(mdc_runtime_report(&rt, f, 1000));
    fclose(f);
    mdc_dev_get_counters(rt.dev, &c1);
    TU_CHECK(!memcmp(&c0, &c1, sizeof c0), "the report's messages were charged");
    if (r == 0) {
        char want[64];
        snprintf(want, sizeof want, "device report: %d rank(s), device h100", p);
        TU_CONTAINS(text, want);
        for (int q = 0; q < p; q++) {
            snprintf(want, sizeof want, "rank %d: device h100", q);
            TU_CONTAINS(text, want);
        }
        FILE *jf = fopen(path, "r");
        TU_CHECK(jf != NULL, "no JSON report at %s", path);
        char js[1 << 16];
        size_t got = jf ? fread(js, 1, sizeof js - 1, jf) : 0;
        js[got] = '\0';
        if (jf) fclose(jf);
        remove(path);
        cJSON *root = cJSON_Parse(js);
        TU_CHECK(root != NULL, "JSON report does not parse");
        const cJSON *ranks = item(root, "ranks");
        TU_CHECK(cJSON_GetArraySize(ranks) == p, "%d ranks in JSON", cJSON_GetArraySize(ranks));
        double sum = 0;
        for (int q = 0; q < p && q < cJSON_GetArraySize(ranks); q++) {
            const cJSON *o = cJSON_GetArrayItem(ranks, q);
            double fl = (q + 1) * 1e9 + (q == 1 ? 1e15 : 0);
            TU_EQ_DBL(num(o, "rank", NULL), q);
            TU_EQ_DBL(num(o, "counts", "flops"), fl);
            TU_EQ_DBL(num(o, "peak_hbm_bytes", "parameters"), (q + 1) * 1000);
            TU_EQ_DBL(num(o, "peak_hbm_bytes", "total"), (q + 1) * 1000);
            TU_EQ_DBL(num(o, "energy_j", "fp"), fl * 20.0 * 1e-12);
            double t = (q + 1) * 1e9 / s->flops_fp32 + s->launch_overhead;
            if (q == 1) t += 1e15 / s->flops_fp32 + s->launch_overhead;
            TU_EQ_DBL(num(o, "time_s", "compute"), t);
            double e = num(o, "energy_j", "total");
            TU_EQ_DBL(num(o, "energy_per_token_j", NULL), e / 1000);
            sum += e;
        }
        TU_NEAR(num(root, "totals", "energy_j"), sum, 1e-15);
        TU_EQ_DBL(num(root, "tokens", NULL), 1000);
        TU_CHECK(cJSON_IsString(item(item(root, "device"), "name")) &&
                     !strcmp(item(item(root, "device"), "name")->valuestring, "h100"),
                 "device name");
        cJSON_Delete(root);
        fputs(text, stderr);
    } else {
        TU_CHECK(n == 0, "rank %d printed %zu bytes", r, n);
    }
    free(text);
    /* a report path that cannot be written fails on rank 0 only, naming the path */
    if (r == 0) snprintf(rt.opts.report_path, sizeof rt.opts.report_path, "/nonexistent/dir/r.json");
    FILE *null = fopen("/dev/null", "w");
    mdc_status st = mdc_runtime_report(&rt, null, 0);
    fclose(null);
    if (r == 0) {
        TU_CHECK(st == MDC_ERR_IO, "unwritable report: %s", mdc_strerror(st));
        TU_CONTAINS(mdc_detail(), "/nonexistent/dir/r.json");
    } else {
        TU_CHECK(st == MDC_OK, "rank %d: %s", r, mdc_detail());
    }
    mdc_dev_free(rt.dev, buf);
    int rc = tu_finish("test_device_report");
    mdc_runtime_finalize(&rt);
    return rc;
}

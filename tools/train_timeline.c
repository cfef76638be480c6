/* train --timeline FILE without a pipeline (tools/train_state.h): the last step of every rank
 * in virtual time as SVG, a row per rank, from the device traces (device/trace.c): kernels,
 * copies, sends (while their bytes leave), receives (waiting for the sender and the bytes) and
 * collective calls (ticks). A pipeline's run draws its schedule instead (ref/pp_timeline.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_state.h"

enum { TAG_N = 73, TAG_SPANS = 74, ROW = 26, LEFT = 70, WIDTH = 1000 };

static const char *const colour[5] = {"#4c72b0", "#8172b2", "#dd8452", "#c44e52", "#222222"};
static const char *const label[5] = {"kernel", "copy", "send", "receive (waiting)", "collective call"};

static void draw(FILE *f, double *const *sp, const long long *n, int ranks, double from, const char *title) {
    double t0 = 1e300, t1 = -1e300;
    for (int r = 0; r < ranks; r++)
        for (long long i = 0; i < n[r]; i++) {
            double a = sp[r][3 * i + 1] < from ? from : sp[r][3 * i + 1], b = sp[r][3 * i + 2];
            t0 = a < t0 ? a : t0, t1 = b > t1 ? b : t1;
        }
    if (!(t1 > t0)) t0 = 0, t1 = 1;
    double sx = (WIDTH - LEFT - 20) / (t1 - t0);
    int H = 60 + ranks * ROW + 50;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", WIDTH, H);
    fprintf(f, "<text x=\"10\" y=\"20\" font-size=\"14\">%s: the last step in virtual time, %.3f ms</text>\n", title,
            (t1 - t0) * 1e3);
    for (int r = 0; r < ranks; r++) {
        int y = 40 + r * ROW;
        fprintf(f, "<text x=\"10\" y=\"%d\">rank %d</text>\n", y + 15, r);
        for (int pass = 0; pass < 2; pass++) /* the spans, then the calls' ticks over them */
            for (long long i = 0; i < n[r]; i++) {
                int k = (int)sp[r][3 * i];
                if ((k == 4) != pass) continue;
                double a = sp[r][3 * i + 1] < from ? from : sp[r][3 * i + 1], b = sp[r][3 * i + 2];
                double x = LEFT + (a - t0) * sx, w = (b - a) * sx;
                if (k == 4) fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"1\" height=\"%d\" fill=\"%s\"/>\n", x, y, ROW - 4, colour[k]);
                else if (w > 0.05)
                    fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"/>\n", x, y + (k >= 2 ? 12 : 2),
                            w, k >= 2 ? 8 : 10, colour[k]);
            }
    }
    int y = 40 + ranks * ROW + 10, x = LEFT;
    for (int k = 0; k < 5; k++) {
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"10\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s</text>\n", x,
                y, colour[k], x + 16, y + 10, label[k]);
        x += 30 + 8 * (int)strlen(label[k]);
    }
    fprintf(f, "<text x=\"10\" y=\"%d\" fill=\"#555\">kernels and copies on the upper half of a row, messages on the "
               "lower; from minidc train --timeline (device/trace.c)</text>\n</svg>\n", y + 32);
}

mdc_status mdc_train_write_device_timeline(mdc_runtime *rt, const char *path, double from, const char *title) {
    long long n = (long long)mdc_dev_trace_spans(rt->dev, from, NULL, 0);
    double *mine = malloc(sizeof(double) * 3 * (size_t)(n > 0 ? n : 1));
    if (!mine) n = -1;
    else mdc_dev_trace_spans(rt->dev, from, mine, (size_t)n);
    mdc_status st = MDC_OK;
    if (rt->rank != 0) { /* every rank sends, even a failed one (-1) */
        st = mdc_send(&n, sizeof n, 0, TAG_N, rt->world);
        if (!st && n > 0) st = mdc_send(mine, sizeof(double) * 3 * (size_t)n, 0, TAG_SPANS, rt->world);
        free(mine);
        return st;
    }
    double **sp = calloc((size_t)rt->size, sizeof *sp);
    long long *cnt = calloc((size_t)rt->size, sizeof *cnt);
    if (!sp || !cnt) st = mdc_fail(MDC_ERR_OOM_HOST, "--timeline");
    if (!st) sp[0] = mine, cnt[0] = n, mine = NULL;
    for (int r = 1; r < rt->size; r++) { /* every rank's part, even after a failure */
        long long k = -1;
        mdc_status rs = mdc_recv(&k, sizeof k, r, TAG_N, rt->world);
        double *b = !rs && k > 0 ? malloc(sizeof(double) * 3 * (size_t)k) : NULL;
        if (!rs && k > 0 && !b) rs = mdc_fail(MDC_ERR_OOM_HOST, "--timeline: rank %d's %lld events", r, k);
        if (!rs && b) rs = mdc_recv(b, sizeof(double) * 3 * (size_t)k, r, TAG_SPANS, rt->world);
        if (!rs && k < 0) rs = mdc_fail(MDC_ERR_OOM_HOST, "--timeline: rank %d could not list its events", r);
        if (!rs && sp) sp[r] = b, cnt[r] = k > 0 ? k : 0;
        else free(b);
        if (rs && !st) st = rs;
    }
    if (!st && n < 0) st = mdc_fail(MDC_ERR_OOM_HOST, "--timeline: rank 0's events");
    mdc_atomic a;
    if (!st && !(st = mdc_atomic_open(&a, path))) {
        draw(a.f, sp, cnt, rt->size, from, title);
        st = mdc_atomic_commit(&a, 1, "--timeline");
    }
    for (int r = 0; sp && r < rt->size; r++) free(sp[r]);
    free(sp), free(cnt), free(mine);
    return st;
}

/* train --timeline FILE without a pipeline (tools/train_state.h): the last step of every rank
 * in virtual time as SVG, a row per rank, from the device traces (device/trace.c): kernels,
 * copies, sends (while their bytes leave), receives (waiting for the sender and the bytes) and
 * collective calls (ticks). A pipeline's run draws its schedule instead (ref/parallel/pp/pp_timeline.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_state.h"

enum { ROW = 26, LEFT = 70, WIDTH = 1000 };

static const char *const colour[5] = {"#4c72b0", "#8172b2", "#dd8452", "#c44e52", "#222222"};
static const char *const label[5] = {"kernel", "copy", "send", "receive (waiting)", "collective call"};

static void draw(FILE *f, void *const *parts, const long long *n, int ranks, double from, const char *title) {
    const double *const *sp = (const double *const *)(const void *)parts; /* each part: spans of 3 doubles */
    double t0 = 1e300, t1 = -1e300;
    for (int r = 0; r < ranks; r++)
        for (long long i = 0; i < n[r]; i++) {
            double a = sp[r][3 * i + 1] < from ? from : sp[r][3 * i + 1], b = sp[r][3 * i + 2];
            t0 = a < t0 ? a : t0, t1 = b > t1 ? b : t1;
        }
    if (!(t1 > t0)) t0 = 0, t1 = 1;
    double sx = (WIDTH - LEFT - 20) / (t1 - t0);
    int H = 60 + ranks * ROW + 50;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
            "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            WIDTH, H);
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
                if (k == 4)
                    fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"1\" height=\"%d\" fill=\"%s\"/>\n", x, y, ROW - 4,
                            colour[k]);
                else if (w > 0.05)
                    fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"/>\n", x,
                            y + (k >= 2 ? 12 : 2), w, k >= 2 ? 8 : 10, colour[k]);
            }
    }
    int y = 40 + ranks * ROW + 10, x = LEFT;
    for (int k = 0; k < 5; k++) {
        fprintf(f,
                "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"10\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s</text>\n",
                x, y, colour[k], x + 16, y + 10, label[k]);
        x += 30 + 8 * (int)strlen(label[k]);
    }
    fprintf(f,
            "<text x=\"10\" y=\"%d\" fill=\"#555\">kernels and copies on the upper half of a row, messages on the "
            "lower; from minidc train --timeline (device/trace.c)</text>\n</svg>\n",
            y + 32);
}

mdc_status mdc_train_write_device_timeline(mdc_runtime *rt, const char *path, double from, const char *title) {
    long long n = (long long)mdc_dev_trace_spans(rt->dev, from, NULL, 0);
    double *mine = malloc(sizeof(double) * 3 * (size_t)(n > 0 ? n : 1));
    if (!mine) n = -1;
    else mdc_dev_trace_spans(rt->dev, from, mine, (size_t)n);
    void **parts;
    long long *lens;
    mdc_status st = mdc_train_gather_parts(rt, mine, n < 0 ? -1 : (long long)sizeof(double) * 3 * n, "--timeline",
                                           &parts, &lens);
    if (st || rt->rank != 0) return st;
    long long *cnt = lens; /* bytes -> spans of 3 doubles */
    for (int r = 0; r < rt->size; r++) cnt[r] /= (long long)sizeof(double) * 3;
    mdc_atomic a;
    if (!(st = mdc_atomic_open(&a, path))) {
        draw(a.f, parts, cnt, rt->size, from, title);
        st = mdc_atomic_commit(&a, 1, "--timeline");
    }
    for (int r = 0; r < rt->size; r++) free(parts[r]);
    free(parts), free(lens);
    return st;
}

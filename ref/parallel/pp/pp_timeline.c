/* The measured schedule of a pipeline's last step as an SVG picture (`minidc train --timeline`):
 * one row per stage, each F, B and W a box from the time its inputs were there to its end, in
 * the stage's virtual time, labelled with its micro-batch; the time an action waited for its
 * input (the previous stage's work and the transfer) is drawn grey before it, so the bubble is
 * what is left white or grey. The stages' clocks are comparable: a message carries its send
 * time, so a receive never ends before its send (docs/devices.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "minidc/device.h"
#include "pp_internal.h"

static const char *color(int kind) { return kind == MDC_PP_F ? "#4e79a7" : kind == MDC_PP_B ? "#59a14f" : "#f28e2b"; }

static void svg(FILE *f, const mdc_pp *pp, const double *all, int n, const char *device) {
    int p = pp->p;
    double t0 = all[PP_WAIT], t1 = 0; /* the first stage's first wait starts the picture */
    for (int i = 0; i < p * n; i++) {
        const double *r = all + PP_REC * (size_t)i;
        if (r[PP_WAIT] < t0) t0 = r[PP_WAIT];
        if (r[PP_END] > t1) t1 = r[PP_END];
    }
    double span = t1 > t0 ? t1 - t0 : 1, W = 1100, left = 70, row = 34, top = 44;
    double H = top + row * p + 70, sx = W / span;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
            "font-size=\"11\">\n",
            left + W + 20, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f,
            "<text x=\"10\" y=\"18\" font-size=\"13\">minidc train: pipeline p = %d, m = %d micro-batches, schedule %s"
            "%s; the last step in virtual time on %s (%.3f ms)</text>\n",
            p, pp->s.m, pp->s.name,
            pp->s.v > 1 ? ", v chunks per stage (F3a: micro-batch 3 on chunk 0; odd chunks lighter)" : "", device,
            span * 1e3);
    for (int q = 0; q < p; q++) {
        double y = top + q * row;
        fprintf(f, "<text x=\"10\" y=\"%.1f\">stage %d</text>\n", y + row / 2 + 4, q);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#f7f7f7\" stroke=\"#ccc\"/>\n",
                left, y + 3, W, row - 6);
        for (int k = 0; k < n; k++) {
            const double *r = all + PP_REC * ((size_t)q * n + k);
            double xw = left + (r[PP_WAIT] - t0) * sx, xs = left + (r[PP_START] - t0) * sx,
                   xe = left + (r[PP_END] - t0) * sx;
            char label[16];
            if (pp->s.v > 1)
                snprintf(label, sizeof label, "%c%d%c", (int)r[PP_KIND], (int)r[PP_MB], 'a' + (int)r[PP_CHUNK]);
            else snprintf(label, sizeof label, "%c%d", (int)r[PP_KIND], (int)r[PP_MB]);
            if (xs - xw > 0.5)
                fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#d0d0d0\"/>\n", xw,
                        y + 12, xs - xw, row - 24);
            fprintf(f,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" stroke=\"white\" "
                    "stroke-width=\"0.5\"%s><title>%s: %.3f-%.3f ms</title></rect>\n",
                    xs, y + 5, xe - xs > 0.5 ? xe - xs : 0.5, row - 10, color((int)r[PP_KIND]),
                    (int)r[PP_CHUNK] % 2 ? " fill-opacity=\"0.6\"" : "", label, (r[PP_START] - t0) * 1e3,
                    (r[PP_END] - t0) * 1e3);
            if (xe - xs > 6.0 * strlen(label))
                fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"white\" text-anchor=\"middle\">%s</text>\n",
                        (xs + xe) / 2, y + row / 2 + 4, label);
        }
    }
    /* time axis: about 10 ticks at a round step */
    double y = top + p * row + 8, raw = span / 10, mag = pow(10, floor(log10(raw))), step = mag;
    step = raw <= mag ? mag : raw <= 2 * mag ? 2 * mag : raw <= 5 * mag ? 5 * mag : 10 * mag;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", left, y, left + W, y);
    for (double t = 0; t <= span + 1e-12; t += step)
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/><text x=\"%.1f\" y=\"%.1f\" "
                "text-anchor=\"middle\">%.3g</text>\n",
                left + t * sx, y, left + t * sx, y + 4, left + t * sx, y + 16, t * 1e3);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">virtual ms</text>\n", left + W / 2, y + 30);
    const char *names[4] = {"F forward", "B backward", "W weight gradients", "waiting for the input"};
    const char *cols[4] = {color(MDC_PP_F), color(MDC_PP_B), color(MDC_PP_W), "#d0d0d0"};
    for (int i = 0; i < 4; i++)
        fprintf(f,
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%.1f\" "
                "y=\"%.1f\">%s</text>\n",
                left + 200.0 * i, y + 38, cols[i], left + 200.0 * i + 16, y + 48, names[i]);
    fprintf(f, "</svg>\n");
}

mdc_status mdc_pp_write_timeline(const mdc_pp *pp, const char *path, const char *device) {
    int n = pp->s.n[pp->stage]; /* the same on every stage: each has v m F and v m B (and W) */
    double *all = NULL;
    if (pp->stage == 0 && !(all = malloc(sizeof(double) * PP_REC * (size_t)n * (size_t)pp->p)))
        return mdc_fail(MDC_ERR_OOM_HOST, "--timeline: the stages' records");
    mdc_status st = mdc_gather(pp->rec, all, PP_REC * (size_t)n, MDC_F64, 0, pp->g);
    if (!st && pp->stage == 0) {
        mdc_atomic a;
        if (!(st = mdc_atomic_open(&a, path))) {
            svg(a.f, pp, all, n, device);
            st = mdc_atomic_commit(&a, 1, "--timeline");
        }
    }
    free(all);
    return st;
}

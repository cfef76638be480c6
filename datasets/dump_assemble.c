/* Reassembling a dump (include/minidc/dump.h): every rank file's pieces placed into their
 * global tensors. Copies of one element (replicas: the tp ranks' residual stream, the dp
 * replicas' gradients) must agree bit for bit, partial sums are added, every element must come
 * from some piece; the tensors come out in execution order. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "minidc/dump.h"

typedef struct {
    char *name, *file; /* the global tensor, the first file with a piece of it */
    int ndim, sum;
    mdc_tdtype dtype; /* written as the first piece's (F32, F16 or BF16) */
    int64_t shape[3], order;
    size_t numel;
    float *data;
    unsigned char *have;
} global_t;

typedef struct {
    global_t *g;
    int n, cap;
} globals;

static void globals_free(globals *gs) {
    for (int i = 0; i < gs->n; i++) free(gs->g[i].name), free(gs->g[i].file), free(gs->g[i].data), free(gs->g[i].have);
    free(gs->g);
}

static global_t *global_get(globals *gs, const char *name, int ndim, const int64_t *shape, int sum, int64_t order,
                            const char *file, mdc_status *st) {
    for (int i = 0; i < gs->n; i++) {
        global_t *g = &gs->g[i];
        if (strcmp(g->name, name)) continue;
        int same = g->ndim == ndim && g->sum == sum && !memcmp(g->shape, shape, sizeof(int64_t) * (size_t)ndim);
        if (!same) *st = mdc_fail(MDC_ERR_MISMATCH, "dump: %s: the pieces in %s and %s disagree on its shape or kind", name, g->file, file);
        return same ? g : NULL;
    }
    if (gs->n == gs->cap) {
        int cap = gs->cap ? 2 * gs->cap : 64;
        global_t *p = realloc(gs->g, sizeof *p * (size_t)cap);
        if (!p) { *st = mdc_fail(MDC_ERR_OOM_HOST, "dump: the tensor table"); return NULL; }
        gs->g = p, gs->cap = cap;
    }
    size_t numel, bytes;
    if (mdc_shape_bytes(ndim, shape, sizeof(float), &numel, &bytes)) {
        *st = mdc_fail(MDC_ERR_FORMAT, "dump: %s: %s gives it a shape too large to hold", name, file);
        return NULL;
    }
    global_t *g = &gs->g[gs->n];
    memset(g, 0, sizeof *g);
    g->ndim = ndim, g->sum = sum, g->order = order, g->numel = numel, g->dtype = MDC_TD_F32;
    for (int i = 0; i < ndim; i++) g->shape[i] = shape[i];
    g->name = strdup(name), g->file = strdup(file);
    g->data = calloc(g->numel ? g->numel : 1, sizeof(float)), g->have = calloc(g->numel ? g->numel : 1, 1);
    if (!g->name || !g->file || !g->data || !g->have) {
        free(g->name), free(g->file), free(g->data), free(g->have);
        *st = mdc_fail(MDC_ERR_OOM_HOST, "dump: %s (%zu elements)", name, g->numel);
        return NULL;
    }
    gs->n++;
    return g;
}

/* Element k of g as "[i, j, k]". */
static const char *coords(const global_t *g, size_t k, char *buf, size_t cap) {
    int64_t idx[3];
    for (int i = g->ndim - 1; i >= 0; i--) idx[i] = g->shape[i] ? (int64_t)(k % (size_t)g->shape[i]) : 0, k /= g->shape[i] ? (size_t)g->shape[i] : 1;
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < g->ndim && o < cap; i++) o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)idx[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
    return buf;
}

/* The runs of one dimension: [[local, global, length], ...], checked against both shapes. */
typedef struct {
    int n;
    int64_t r[4096][3];
} dim_runs;

static int read_runs(const cJSON *j, dim_runs *d, int64_t lsize, int64_t gsize) {
    d->n = 0;
    if (!cJSON_IsArray(j)) return -1;
    for (const cJSON *e = j->child; e; e = e->next) {
        if (d->n == 4096 || !cJSON_IsArray(e) || cJSON_GetArraySize(e) != 3) return -1;
        for (int k = 0; k < 3; k++) {
            const cJSON *v = cJSON_GetArrayItem(e, k);
            if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != (double)(int64_t)v->valuedouble) return -1;
            d->r[d->n][k] = (int64_t)v->valuedouble;
        }
        if (d->r[d->n][0] + d->r[d->n][2] > lsize || d->r[d->n][1] + d->r[d->n][2] > gsize) return -1;
        d->n++;
    }
    return 0;
}

/* Places the piece x (local shape ls) into g along the runs of every dimension. */
static mdc_status place(global_t *g, const float *x, const int64_t *ls, dim_runs *d, const char *file) {
    int nd = g->ndim;
    int64_t gst[3] = {1, 1, 1}, lst[3] = {1, 1, 1};
    for (int i = nd - 2; i >= 0; i--) gst[i] = gst[i + 1] * g->shape[i + 1], lst[i] = lst[i + 1] * ls[i + 1];
    int idx[3] = {0, 0, 0}, n[3] = {1, 1, 1};
    for (int i = 0; i < nd; i++) n[i] = d[i].n;
    for (int i = 0; i < nd; i++) if (!n[i]) return MDC_OK; /* an empty piece */
    for (;;) {
        /* the block of runs idx: every element in it */
        int64_t len[3] = {1, 1, 1}, l0 = 0, g0 = 0;
        for (int i = 0; i < nd; i++) len[i] = d[i].r[idx[i]][2], l0 += d[i].r[idx[i]][0] * lst[i], g0 += d[i].r[idx[i]][1] * gst[i];
        for (int64_t a = 0; a < len[0]; a++)
            for (int64_t b = 0; b < (nd > 1 ? len[1] : 1); b++)
                for (int64_t c = 0; c < (nd > 2 ? len[2] : 1); c++) {
                    int64_t li = l0 + a * lst[0] + b * lst[1] + c * lst[2], gi = g0 + a * gst[0] + b * gst[1] + c * gst[2];
                    float v = x[li];
                    if (g->sum) {
                        g->data[gi] += v;
                    } else if (g->have[gi] && memcmp(&g->data[gi], &v, sizeof v)) {
                        char at[96];
                        return mdc_fail(MDC_ERR_MISMATCH, "dump: %s: the copies of element %s differ: %.9g in %s, %.9g "
                                        "in %s (replicas that should be equal are not)", g->name,
                                        coords(g, (size_t)gi, at, sizeof at), g->data[gi], g->file, v, file);
                    } else {
                        g->data[gi] = v;
                    }
                    g->have[gi] = 1;
                }
        int i = nd - 1;
        while (i >= 0 && ++idx[i] == n[i]) idx[i--] = 0;
        if (i < 0) return MDC_OK;
    }
}

static mdc_status add_piece(globals *gs, const mdc_tensor *t, const char *json, const char *file) {
    cJSON *j = cJSON_Parse(json);
    const cJSON *gn = j ? cJSON_GetObjectItemCaseSensitive(j, "global") : NULL;
    const cJSON *sh = j ? cJSON_GetObjectItemCaseSensitive(j, "shape") : NULL, *mp = j ? cJSON_GetObjectItemCaseSensitive(j, "map") : NULL;
    const cJSON *sm = j ? cJSON_GetObjectItemCaseSensitive(j, "sum") : NULL, *od = j ? cJSON_GetObjectItemCaseSensitive(j, "order") : NULL;
    int nd = t->ndim, ok = cJSON_IsString(gn) && cJSON_IsArray(sh) && cJSON_IsArray(mp) && cJSON_IsNumber(sm) &&
                           cJSON_IsNumber(od) && nd >= 1 && nd <= 3 && cJSON_GetArraySize(sh) == nd && cJSON_GetArraySize(mp) == nd;
    int64_t shape[3] = {0, 0, 0};
    for (int i = 0; ok && i < nd; i++) {
        const cJSON *v = cJSON_GetArrayItem(sh, i);
        ok = cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 1e12;
        if (ok) shape[i] = (int64_t)v->valuedouble;
    }
    static dim_runs d[3]; /* large: kept off the stack */
    for (int i = 0; ok && i < nd; i++) ok = !read_runs(cJSON_GetArrayItem(mp, i), &d[i], t->shape[i], shape[i]);
    mdc_status st = ok ? MDC_OK : mdc_fail(MDC_ERR_FORMAT, "dump: %s: tensor %s: its dump entry is not a valid piece", file, t->name);
    float *x = NULL;
    global_t *g = NULL;
    if (!st) g = global_get(gs, gn->valuestring, nd, shape, sm->valueint != 0, (int64_t)od->valuedouble, file, &st);
    if (g && g->dtype == MDC_TD_F32 && (t->dtype == MDC_TD_BF16 || t->dtype == MDC_TD_F16)) g->dtype = t->dtype;
    if (!st && !(x = malloc(sizeof(float) * (t->numel ? t->numel : 1)))) st = mdc_fail(MDC_ERR_OOM_HOST, "dump: %s", t->name);
    if (!st) st = mdc_tensor_to_f32(t, x, t->numel);
    if (!st) st = place(g, x, t->shape, d, file);
    free(x);
    cJSON_Delete(j);
    return st;
}

static int by_order(const void *a, const void *b) {
    const global_t *x = a, *y = b;
    return x->order < y->order ? -1 : x->order > y->order ? 1 : strcmp(x->name, y->name);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The *.safetensors files of a directory, sorted. */
static mdc_status list_dir(const char *path, char ***out, int *n) {
    *out = NULL, *n = 0;
    DIR *dir = opendir(path);
    if (!dir) return mdc_fail(MDC_ERR_IO, "dump: %s: cannot open the directory", path);
    mdc_status st = MDC_OK;
    int cap = 0;
    for (struct dirent *e; !st && (e = readdir(dir));) {
        size_t k = strlen(e->d_name);
        if (k < 13 || strcmp(e->d_name + k - 12, ".safetensors")) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            char **p = realloc(*out, sizeof *p * (size_t)cap);
            if (!p) { st = mdc_fail(MDC_ERR_OOM_HOST, "dump: listing %s", path); break; }
            *out = p;
        }
        size_t len = strlen(path) + k + 2;
        if (!((*out)[*n] = malloc(len))) { st = mdc_fail(MDC_ERR_OOM_HOST, "dump: listing %s", path); break; }
        snprintf((*out)[(*n)++], len, "%s/%s", path, e->d_name);
    }
    closedir(dir);
    if (!st && !*n) st = mdc_fail(MDC_ERR_INVALID, "dump: %s has no .safetensors files", path);
    if (*n) qsort(*out, (size_t)*n, sizeof **out, by_name);
    return st;
}

mdc_status mdc_dump_read(const char *path, mdc_tensorfile **out) {
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb)) return mdc_fail(MDC_ERR_IO, "%s: %s", path, strerror(errno));
    char **files = NULL, *one[1] = {(char *)path};
    int nf = 1, isdir = S_ISDIR(sb.st_mode);
    mdc_status st = isdir ? list_dir(path, &files, &nf) : MDC_OK;
    char **fl = isdir ? files : one;
    globals gs = {0};
    char run[128] = "";
    for (int f = 0; !st && f < nf; f++) {
        mdc_tensorfile *tf = NULL;
        if ((st = mdc_safetensors_read(fl[f], &tf))) break;
        const char *fmt = mdc_tensorfile_get_meta(tf, "dump.format"), *rid = mdc_tensorfile_get_meta(tf, "dump.run");
        if (!fmt && !isdir) { *out = tf; return MDC_OK; } /* a plain tensor file */
        if (!fmt || strcmp(fmt, MDC_DUMP_FORMAT))
            st = mdc_fail(MDC_ERR_FORMAT, "dump: %s is not a rank file of a dump (__metadata__ dump.format \"%s\")", fl[f],
                          MDC_DUMP_FORMAT);
        else if (f == 0) snprintf(run, sizeof run, "%s", rid ? rid : "");
        else if (strcmp(run, rid ? rid : ""))
            st = mdc_fail(MDC_ERR_MISMATCH, "dump: %s is from another run than %s (dump.run %s, not %s): a dump directory "
                          "holds one run", fl[f], fl[0], rid ? rid : "none", run);
        for (int i = 0; !st && i < tf->count; i++) {
            char key[600];
            snprintf(key, sizeof key, "dump:%s", tf->tensors[i].name);
            const char *j = mdc_tensorfile_get_meta(tf, key);
            st = j ? add_piece(&gs, &tf->tensors[i], j, fl[f])
                   : mdc_fail(MDC_ERR_FORMAT, "dump: %s: tensor %s has no dump entry", fl[f], tf->tensors[i].name);
        }
        mdc_tensorfile_free(tf);
    }
    if (!st) qsort(gs.g, (size_t)gs.n, sizeof *gs.g, by_order);
    for (int i = 0; !st && i < gs.n; i++) {
        const global_t *g = &gs.g[i];
        size_t miss = 0, first = 0;
        for (size_t k = g->numel; k-- > 0;)
            if (!g->have[k]) miss++, first = k;
        char at[96];
        if (miss) st = mdc_fail(MDC_ERR_MISMATCH, "dump: %s: %zu of its %zu elements are in no piece (the first: %s); "
                                "is a rank's file missing?", g->name, miss, g->numel, coords(g, first, at, sizeof at));
    }
    if (!st) st = mdc_tensorfile_new(out);
    for (int i = 0; !st && i < gs.n; i++) st = mdc_tensorfile_add_f32(*out, gs.g[i].name, gs.g[i].dtype, gs.g[i].ndim, gs.g[i].shape, gs.g[i].data);
    if (st) mdc_tensorfile_free(*out), *out = NULL;
    globals_free(&gs);
    for (int f = 0; isdir && f < nf; f++) free(files[f]);
    free(files);
    return st;
}

/* Reassembling a dump (include/minidc/dump.h): every rank file's pieces placed into their
 * global tensors. Copies of one element (replicas: the tp ranks' residual stream, the dp
 * replicas' gradients) must agree bit for bit, partial sums are added, every element must come
 * from some piece; the tensors come out in execution order. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "json_strict.h"
#include "minidc/dump.h"

typedef struct {
    char *name, *file; /* the global tensor, the first file with a piece of it */
    int ndim, sum;
    mdc_tdtype dtype; /* written as the first piece's (F32, F16, BF16, or I32 for integers) */
    int64_t shape[3], order;
    size_t numel;
    float *data;
    unsigned char *have; /* pieces placed at each element (at most 255 counted) */
    int64_t bad;         /* the first element whose copies differ (-1: none) */
    char copies[400];    /* its copies: "v in file, v in file, ..." */
    const char *fs[16];  /* the files with a piece of it so far (the first 16 of nf) */
    int nf;
} global_t;

/* total: the bytes of the dump's files; claimed: what the global tensors so far need of them */
typedef struct {
    global_t *g;
    int n, cap, files;
    size_t total, claimed;
} globals;

static void globals_free(globals *gs) {
    for (int i = 0; i < gs->n; i++) free(gs->g[i].name), free(gs->g[i].file), free(gs->g[i].data), free(gs->g[i].have);
    free(gs->g);
}

static void shape_text(int ndim, const int64_t *shape, char *buf, size_t cap) {
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
}

static global_t *global_get(globals *gs, const char *name, int ndim, const int64_t *shape, int sum, int64_t order,
                            const char *file, const char *entry, mdc_status *st) {
    for (int i = 0; i < gs->n; i++) {
        global_t *g = &gs->g[i];
        if (strcmp(g->name, name)) continue;
        int same = g->ndim == ndim && g->sum == sum && !memcmp(g->shape, shape, sizeof(int64_t) * (size_t)ndim);
        if (!same)
            *st = mdc_fail(MDC_ERR_MISMATCH, "dump: %s: the pieces in %s and %s disagree on its shape or kind", name,
                           g->file, file);
        return same ? g : NULL;
    }
    if (gs->n == gs->cap) {
        int cap = gs->cap ? 2 * gs->cap : 64;
        global_t *p = realloc(gs->g, sizeof *p * (size_t)cap);
        if (!p) {
            *st = mdc_fail(MDC_ERR_OOM_HOST, "dump: the tensor table");
            return NULL;
        }
        gs->g = p, gs->cap = cap;
    }
    size_t numel, bytes;
    if (mdc_shape_bytes(ndim, shape, sizeof(float), &numel, &bytes)) {
        *st = mdc_fail(MDC_ERR_FORMAT, "dump: %s: tensor %s: its global tensor %s has a shape too large to hold", file,
                       entry, name);
        return NULL;
    }
    /* Each element comes from a piece of at least 2 bytes (F16, BF16) in the files: a shape the
     * files cannot fill is refused before anything is allocated. */
    if (2 * numel > gs->total - gs->claimed) {
        char sh[192];
        shape_text(ndim, shape, sh, sizeof sh);
        *st = mdc_fail(MDC_ERR_FORMAT,
                       "dump: %s: tensor %s: its global tensor %s of shape %s needs %zu bytes of "
                       "pieces (%zu elements, 2 bytes at least), but the dump's %d file(s) hold %zu bytes%s",
                       file, entry, name, sh, 2 * numel, numel, gs->files, gs->total,
                       gs->claimed ? " in all, part of them claimed by the tensors before it" : "");
        return NULL;
    }
    gs->claimed += 2 * numel;
    global_t *g = &gs->g[gs->n];
    memset(g, 0, sizeof *g);
    g->ndim = ndim, g->sum = sum, g->order = order, g->numel = numel, g->dtype = MDC_TD_F32;
    for (int i = 0; i < ndim; i++) g->shape[i] = shape[i];
    g->name = strdup(name), g->file = strdup(file);
    g->data = calloc(g->numel ? g->numel : 1, sizeof(float)), g->have = calloc(g->numel ? g->numel : 1, 1);
    g->bad = -1, g->copies[0] = '\0';
    if (!g->name || !g->file || !g->data || !g->have) {
        free(g->name), free(g->file), free(g->data), free(g->have);
        *st = mdc_fail(MDC_ERR_OOM_HOST, "dump: %s: %s: %zu elements (%zu bytes) for the global tensor", file, name,
                       g->numel, bytes);
        return NULL;
    }
    gs->n++;
    return g;
}

/* Element k of g as "[i, j, k]". */
static const char *coords(const global_t *g, size_t k, char *buf, size_t cap) {
    int64_t idx[3];
    for (int i = g->ndim - 1; i >= 0; i--)
        idx[i] = g->shape[i] ? (int64_t)(k % (size_t)g->shape[i]) : 0, k /= g->shape[i] ? (size_t)g->shape[i] : 1;
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < g->ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)idx[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
    return buf;
}

typedef struct {
    int n;
    int64_t r[4096][3];
} dim_runs;

/* The runs of one dimension: [[local, global, length], ...], checked against both shapes; NULL
 * or what is wrong. Runs of length 0 are dropped and the others cover at most the local size, so
 * placing a piece visits no more elements than it has (a hostile map cannot make it loop). */
static const char *read_runs(const cJSON *j, dim_runs *d, int64_t lsize, int64_t gsize) {
    int64_t covered = 0;
    d->n = 0;
    if (!cJSON_IsArray(j)) return "a dimension's runs are not a list";
    for (const cJSON *e = j->child; e; e = e->next) {
        int64_t r[3];
        if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 3) return "a run is not [local, global, length]";
        for (int k = 0; k < 3; k++) {
            const cJSON *v = cJSON_GetArrayItem(e, k);
            if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > 9007199254740992.0 ||
                v->valuedouble != floor(v->valuedouble))
                return "a run holds a number that is not a non-negative integer";
            r[k] = (int64_t)v->valuedouble;
        }
        if (r[0] + r[2] > lsize || r[1] + r[2] > gsize) return "a run lies outside the piece or its global tensor";
        if (!r[2]) continue;
        if ((covered += r[2]) > lsize) return "the runs of a dimension cover more than the piece";
        if (d->n == 4096) return "more than 4096 runs in a dimension";
        memcpy(d->r[d->n++], r, sizeof r);
    }
    return NULL;
}

/* Element gi's copies so far, when a new one differs: every copy of the first element that differs
 * is listed (the odd one out is the suspect). The earlier copies are equal: one per earlier file
 * when each of those had it (replicas), else counted. */
static void first_copies(global_t *g, int64_t gi) {
    int before = g->nf - 1, k = 0; /* the files before the one being placed */
    g->bad = gi;
    if (g->have[gi] == before && before <= 16)
        for (int f = 0; f < before; f++)
            k += snprintf(g->copies + k, sizeof g->copies - (size_t)k, "%s%.9g in %s", f ? ", " : "", g->data[gi],
                          g->fs[f]);
    else
        snprintf(g->copies, sizeof g->copies, "%.9g in %s and %d more cop%s", g->data[gi], g->file, g->have[gi] - 1,
                 g->have[gi] == 2 ? "y" : "ies");
}

/* Places the piece x (local shape ls) into g along the runs of every dimension. */
static mdc_status place(global_t *g, const float *x, const int64_t *ls, dim_runs *d, const char *file) {
    if (!g->nf || strcmp(g->fs[g->nf <= 16 ? g->nf - 1 : 15], file)) { /* a file's first piece of g */
        if (g->nf < 16) g->fs[g->nf] = file;
        g->nf++;
    }
    int nd = g->ndim;
    int64_t gst[3] = {1, 1, 1}, lst[3] = {1, 1, 1};
    for (int i = nd - 2; i >= 0; i--) gst[i] = gst[i + 1] * g->shape[i + 1], lst[i] = lst[i + 1] * ls[i + 1];
    int idx[3] = {0, 0, 0}, n[3] = {1, 1, 1};
    for (int i = 0; i < nd; i++) n[i] = d[i].n;
    for (int i = 0; i < nd; i++)
        if (!n[i]) return MDC_OK; /* an empty piece */
    for (;;) {
        /* the block of runs idx: every element in it */
        int64_t len[3] = {1, 1, 1}, l0 = 0, g0 = 0;
        for (int i = 0; i < nd; i++)
            len[i] = d[i].r[idx[i]][2], l0 += d[i].r[idx[i]][0] * lst[i], g0 += d[i].r[idx[i]][1] * gst[i];
        for (int64_t a = 0; a < len[0]; a++)
            for (int64_t b = 0; b < (nd > 1 ? len[1] : 1); b++)
                for (int64_t c = 0; c < (nd > 2 ? len[2] : 1); c++) {
                    int64_t li = l0 + a * lst[0] + b * lst[1] + c * lst[2],
                            gi = g0 + a * gst[0] + b * gst[1] + c * gst[2];
                    float v = x[li];
                    if (g->sum) {
                        g->data[gi] += v;
                    } else if (g->have[gi] && (gi == g->bad || (g->bad < 0 && memcmp(&g->data[gi], &v, sizeof v)))) {
                        if (g->bad < 0) first_copies(g, gi);
                        size_t k = strlen(g->copies);
                        if (k < sizeof g->copies)
                            snprintf(g->copies + k, sizeof g->copies - k, ", %.9g in %s", v, file);
                    } else {
                        g->data[gi] = v;
                    }
                    if (g->have[gi] < 255) g->have[gi]++;
                }
        int i = nd - 1;
        while (i >= 0 && ++idx[i] == n[i]) idx[i--] = 0;
        if (i < 0) return MDC_OK;
    }
}

static int is_float(mdc_tdtype t) { return t == MDC_TD_F32 || t == MDC_TD_F16 || t == MDC_TD_BF16 || t == MDC_TD_F64; }
/* a piece's values: floats, or the int32 of a site of integers (a MoE block's choices) */
static int is_value(mdc_tdtype t) { return is_float(t) || t == MDC_TD_I32; }

/* One piece: tensor t of `file` with its dump entry (JSON), placed into its global tensor. */
static mdc_status add_piece(globals *gs, const mdc_tensor *t, const char *json, const char *file) {
    char where[600];
    snprintf(where, sizeof where, "%s: dump entry of %s", file, t->name);
    mdc_status st = mdc_json_strict(where, json, strlen(json), NULL); /* a NUL would cut "global" */
    if (st) return st;
    cJSON *j = cJSON_Parse(json);
    const cJSON *gn = cJSON_GetObjectItemCaseSensitive(j, "global"), *sh = cJSON_GetObjectItemCaseSensitive(j, "shape");
    const cJSON *mp = cJSON_GetObjectItemCaseSensitive(j, "map"), *sm = cJSON_GetObjectItemCaseSensitive(j, "sum");
    const cJSON *od = cJSON_GetObjectItemCaseSensitive(j, "order");
    int nd = t->ndim;
    const char *bad = !cJSON_IsObject(j)                                   ? "it is not a JSON object"
                      : !cJSON_IsString(gn) || !gn->valuestring[0]         ? "\"global\" is not a name"
                      : !is_value(t->dtype)                                ? "the piece is not floating-point or int32"
                      : nd < 1 || nd > 3                                   ? "the piece has not 1 to 3 dimensions"
                      : !cJSON_IsArray(sh) || cJSON_GetArraySize(sh) != nd ? "\"shape\" has not one size per dimension"
                      : !cJSON_IsArray(mp) || cJSON_GetArraySize(mp) != nd
                          ? "\"map\" has not one list of runs per dimension"
                      : !cJSON_IsNumber(sm) || (sm->valuedouble != 0 && sm->valuedouble != 1) ? "\"sum\" is not 0 or 1"
                      : !cJSON_IsNumber(od) || !(fabs(od->valuedouble) <= 4.6e18) ||
                              od->valuedouble != floor(od->valuedouble)
                          ? "\"order\" is not an integer"
                          : NULL;
    int64_t shape[3] = {0, 0, 0};
    for (int i = 0; !bad && i < nd; i++) {
        const cJSON *v = cJSON_GetArrayItem(sh, i);
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble >= 1e12 ||
            v->valuedouble != floor(v->valuedouble))
            bad = "\"shape\" holds a size that is not an integer in [0, 1e12)";
        else shape[i] = (int64_t)v->valuedouble;
    }
    static dim_runs d[3]; /* large: kept off the stack */
    for (int i = 0; !bad && i < nd; i++) bad = read_runs(cJSON_GetArrayItem(mp, i), &d[i], t->shape[i], shape[i]);
    if (bad)
        st = mdc_fail(MDC_ERR_FORMAT, "dump: %s: tensor %s: its dump entry is not a valid piece: %s", file, t->name,
                      bad);
    float *x = NULL;
    global_t *g = NULL;
    if (!st)
        g = global_get(gs, gn->valuestring, nd, shape, sm->valuedouble != 0, (int64_t)od->valuedouble, file, t->name,
                       &st);
    if (g && g->dtype == MDC_TD_F32 && (t->dtype == MDC_TD_BF16 || t->dtype == MDC_TD_F16 || t->dtype == MDC_TD_I32))
        g->dtype = t->dtype;
    if (!st && !(x = malloc(sizeof(float) * (t->numel ? t->numel : 1))))
        st = mdc_fail(MDC_ERR_OOM_HOST, "dump: %s: tensor %s: %zu elements", file, t->name, t->numel);
    if (!st && t->dtype == MDC_TD_I32) { /* integers below 2^24: exact as floats */
        int32_t *iv = malloc(sizeof(int32_t) * (t->numel ? t->numel : 1));
        st = iv ? mdc_tensor_to_i32(t, iv, t->numel) : mdc_fail(MDC_ERR_OOM_HOST, "dump: %s: %s", file, t->name);
        for (size_t i = 0; !st && i < t->numel; i++) x[i] = (float)iv[i];
        free(iv);
    } else if (!st) st = mdc_tensor_to_f32(t, x, t->numel);
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

/* The *.safetensors files of a directory, sorted, and their bytes in all (*bytes). */
static mdc_status list_dir(const char *path, char ***out, int *n, size_t *bytes) {
    *out = NULL, *n = 0, *bytes = 0;
    DIR *dir = opendir(path);
    if (!dir) return mdc_fail(MDC_ERR_IO, "dump: %s: cannot open the directory: %s", path, strerror(errno));
    mdc_status st = MDC_OK;
    int cap = 0;
    errno = 0;
    for (struct dirent *e; !st && (e = readdir(dir)); errno = 0) {
        size_t k = strlen(e->d_name);
        if (k < 13 || strcmp(e->d_name + k - 12, ".safetensors")) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            char **p = realloc(*out, sizeof *p * (size_t)cap);
            if (!p) {
                st = mdc_fail(MDC_ERR_OOM_HOST, "dump: listing %s", path);
                break;
            }
            *out = p;
        }
        size_t len = strlen(path) + k + 2;
        if (!((*out)[*n] = malloc(len))) {
            st = mdc_fail(MDC_ERR_OOM_HOST, "dump: listing %s", path);
            break;
        }
        snprintf((*out)[(*n)++], len, "%s/%s", path, e->d_name);
        struct stat sb;
        if (stat((*out)[*n - 1], &sb)) st = mdc_fail(MDC_ERR_IO, "dump: %s: %s", (*out)[*n - 1], strerror(errno));
        else *bytes += (size_t)sb.st_size;
    }
    if (!st && errno) st = mdc_fail(MDC_ERR_IO, "dump: %s: cannot list the directory: %s", path, strerror(errno));
    closedir(dir);
    if (!st && !*n) st = mdc_fail(MDC_ERR_INVALID, "dump: %s has no .safetensors files", path);
    if (*n) qsort(*out, (size_t)*n, sizeof **out, by_name);
    return st;
}

/* dump.rank "R of N" with 0 <= R < N; -1 if it is not that. */
static int parse_rank(const char *v, int *r, int *n) {
    char *e;
    if (!v || *v < '0' || *v > '9') return -1;
    long a = strtol(v, &e, 10);
    if (strncmp(e, " of ", 4) || e[4] < '0' || e[4] > '9') return -1;
    long b = strtol(e + 4, &e, 10);
    if (*e || a >= b || b > INT_MAX) return -1;
    *r = (int)a, *n = (int)b;
    return 0;
}

/* The step a rank file holds, from its entries' names ("step<S>.mb<K>.<site>"); -1 if none. */
static long step_of(const mdc_tensorfile *tf) {
    const char *s = tf->count ? tf->tensors[0].name : "";
    char *e;
    long v = strncmp(s, "step", 4) || s[4] < '0' || s[4] > '9' ? -1 : strtol(s + 4, &e, 10);
    return v >= 0 && *e == '.' ? v : -1;
}

/* File f's dump.run and dump.rank against the files before it (ranks[], steps[]): one run, one
 * rank count, and each rank's step in one file (a file copied over another's name claims its
 * source's rank twice, and would add its partial sums twice). */
static mdc_status check_rank(const mdc_tensorfile *tf, char **fl, int f, char *run, size_t cap, int *ranks, long *steps,
                             int *size) {
    const char *rid = mdc_tensorfile_get_meta(tf, "dump.run"), *rk = mdc_tensorfile_get_meta(tf, "dump.rank");
    int r, n;
    if (f == 0) snprintf(run, cap, "%s", rid ? rid : "");
    else if (strcmp(run, rid ? rid : ""))
        return mdc_fail(MDC_ERR_MISMATCH,
                        "dump: %s is from another run than %s (dump.run %s, not %s): a dump "
                        "directory holds one run",
                        fl[f], fl[0], rid ? rid : "none", run);
    if (parse_rank(rk, &r, &n))
        return mdc_fail(MDC_ERR_FORMAT,
                        "dump: %s: __metadata__ field dump.rank is %s%.40s%s, not \"R of N\" with 0 <= "
                        "R < N",
                        fl[f], rk ? "\"" : "", rk ? rk : "missing", rk ? "\"" : "");
    if (f && n != *size)
        return mdc_fail(MDC_ERR_MISMATCH, "dump: %s says rank %d of %d, %s of %d: a dump directory holds one run",
                        fl[f], r, n, fl[0], *size);
    ranks[f] = r, steps[f] = step_of(tf), *size = n;
    for (int g = 0; g < f && steps[f] >= 0; g++) /* a file without entries adds nothing */
        if (ranks[g] == r && steps[g] == steps[f])
            return mdc_fail(MDC_ERR_MISMATCH,
                            "dump: two files claim rank %d of %d for step %ld: %s and %s (was one "
                            "rank's file copied over another's?)",
                            r, n, steps[f], fl[g], fl[f]);
    return MDC_OK;
}

mdc_status mdc_dump_read(const char *path, mdc_tensorfile **out) {
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb)) return mdc_fail(MDC_ERR_IO, "%s: %s", path, strerror(errno));
    char **files = NULL, *one[1] = {(char *)path};
    int nf = 1, isdir = S_ISDIR(sb.st_mode), size = 0;
    globals gs = {0};
    gs.total = (size_t)sb.st_size;
    mdc_status st = isdir ? list_dir(path, &files, &nf, &gs.total) : MDC_OK;
    char **fl = isdir ? files : one, run[128] = "";
    gs.files = nf;
    int *ranks = malloc(sizeof(int) * (size_t)nf);
    long *steps = malloc(sizeof(long) * (size_t)nf);
    if (!st && (!ranks || !steps)) st = mdc_fail(MDC_ERR_OOM_HOST, "dump: %s: %d files", path, nf);
    for (int f = 0; !st && f < nf; f++) {
        mdc_tensorfile *tf = NULL;
        if ((st = mdc_safetensors_read(fl[f], &tf))) break;
        const char *fmt = mdc_tensorfile_get_meta(tf, "dump.format");
        if (!fmt && !isdir) { /* a plain tensor file */
            free(ranks), free(steps);
            *out = tf;
            return MDC_OK;
        }
        if (!fmt || strcmp(fmt, MDC_DUMP_FORMAT))
            st = mdc_fail(MDC_ERR_FORMAT, "dump: %s is not a rank file of a dump (__metadata__ dump.format \"%s\")",
                          fl[f], MDC_DUMP_FORMAT);
        else st = check_rank(tf, fl, f, run, sizeof run, ranks, steps, &size);
        for (int i = 0; !st && i < tf->count; i++) {
            size_t kn = strlen(tf->tensors[i].name) + 6;
            char *key = malloc(kn);
            if (!key) {
                st = mdc_fail(MDC_ERR_OOM_HOST, "dump: %s: a name of %zu bytes", fl[f], kn);
                break;
            }
            snprintf(key, kn, "dump:%s", tf->tensors[i].name);
            const char *j = mdc_tensorfile_get_meta(tf, key);
            free(key);
            st = j ? add_piece(&gs, &tf->tensors[i], j, fl[f])
                   : mdc_fail(MDC_ERR_FORMAT, "dump: %s: tensor %s has no dump entry", fl[f], tf->tensors[i].name);
        }
        mdc_tensorfile_free(tf);
    }
    free(ranks), free(steps);
    if (!st) qsort(gs.g, (size_t)gs.n, sizeof *gs.g, by_order);
    for (int i = 0; !st && i < gs.n; i++) {
        const global_t *g = &gs.g[i];
        size_t miss = 0, first = 0;
        for (size_t k = g->numel; k-- > 0;)
            if (!g->have[k]) miss++, first = k;
        char at[96];
        if (g->bad >= 0)
            st = mdc_fail(MDC_ERR_MISMATCH,
                          "dump: %s: the copies of element %s differ: %s (replicas that should be equal are not)",
                          g->name, coords(g, (size_t)g->bad, at, sizeof at), g->copies);
        else if (miss)
            st = mdc_fail(MDC_ERR_MISMATCH,
                          "dump: %s: %zu of its %zu elements are in no piece (the first: %s); "
                          "is a rank's file missing?",
                          g->name, miss, g->numel, coords(g, first, at, sizeof at));
    }
    if (!st) st = mdc_tensorfile_new(out);
    for (int i = 0; !st && i < gs.n; i++)
        st = mdc_tensorfile_add_f32(*out, gs.g[i].name, gs.g[i].dtype, gs.g[i].ndim, gs.g[i].shape, gs.g[i].data);
    if (st) mdc_tensorfile_free(*out), *out = NULL;
    globals_free(&gs);
    for (int f = 0; isdir && f < nf; f++) free(files[f]);
    free(files);
    return st;
}

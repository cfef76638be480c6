/* The checksums of a checkpoint (include/minidc/weights.h): "checksum.<tensor>" over each
 * tensor's bytes and "checksum.__metadata__.<key>" over each other __metadata__ entry's key and
 * value, so an edited, truncated or mixed file is refused naming the tensor or the field. A
 * checkpoint-2 file has every one of them; a checkpoint-1 file (older writers) has only the
 * tensors', and only those it has are checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weights_internal.h"

#define SUM "checksum."
#define META_SUM "checksum.__metadata__."

int mdc_i_checkpoint_format(const mdc_tensorfile *tf) {
    const char *f = mdc_tensorfile_get_meta(tf, "minidc.format");
    if (!f || strncmp(f, "checkpoint-", 11)) return 0;
    return !strcmp(f, "checkpoint-1") ? 1 : !strcmp(f, "checkpoint-2") ? 2 : -1;
}

/* A 64-bit digest of n bytes (8 at a time, multiply-xorshift); tests/cli/checkpoint_seal.py
 * computes the same in Python. */
static uint64_t digest(const void *data, size_t n) {
    const unsigned char *p = data;
    uint64_t h = 0x243f6a8885a308d3ull ^ (uint64_t)n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h ^ (h >> 32);
}

/* The digest of a metadata entry: key, a 0 byte, value (so a value moved to another key, or
 * split differently between key and value, does not match). */
static mdc_status meta_digest(const char *key, const char *value, char out[24]) {
    size_t a = strlen(key), b = strlen(value);
    char *buf = malloc(a + b + 1);
    if (!buf) return mdc_fail(MDC_ERR_OOM_HOST, "checkpoint metadata checksum");
    memcpy(buf, key, a), buf[a] = 0, memcpy(buf + a + 1, value, b);
    snprintf(out, 24, "%016llx", (unsigned long long)digest(buf, a + b + 1));
    free(buf);
    return MDC_OK;
}

static void tensor_digest(const mdc_tensor *t, char out[24]) {
    snprintf(out, 24, "%016llx", (unsigned long long)digest(t->data, t->nbytes));
}

/* Drops every "checksum." entry: a key removed since the last seal leaves none behind. */
static void drop_checksums(mdc_tensorfile *tf) {
    int k = 0;
    for (int i = 0; i < tf->meta_count; i++) {
        if (!strncmp(tf->meta_keys[i], SUM, strlen(SUM))) {
            free(tf->meta_keys[i]);
            free(tf->meta_values[i]);
            continue;
        }
        tf->meta_keys[k] = tf->meta_keys[i], tf->meta_values[k] = tf->meta_values[i], k++;
    }
    tf->meta_count = k;
}

mdc_status mdc_checkpoint_seal(mdc_tensorfile *tf) {
    drop_checksums(tf);
    int n = tf->meta_count; /* the entries to cover, before their checksums are added */
    char key[320], val[24];
    mdc_status st = MDC_OK;
    for (int i = 0; !st && i < tf->count; i++) {
        snprintf(key, sizeof key, SUM "%s", tf->tensors[i].name);
        tensor_digest(&tf->tensors[i], val);
        st = mdc_tensorfile_set_meta(tf, key, val);
    }
    for (int i = 0; !st && i < n; i++) {
        if (snprintf(key, sizeof key, META_SUM "%s", tf->meta_keys[i]) >= (int)sizeof key)
            return mdc_fail(MDC_ERR_INVALID, "__metadata__ key '%.64s...' is too long to seal", tf->meta_keys[i]);
        if (!(st = meta_digest(tf->meta_keys[i], tf->meta_values[i], val))) st = mdc_tensorfile_set_meta(tf, key, val);
    }
    return st;
}

/* checkpoint-2: every entry other than the checksums has one, and it matches; every checksum
 * belongs to an entry or a tensor that is there. */
static mdc_status verify_meta(const mdc_tensorfile *tf, const char *label) {
    char key[320], val[24];
    for (int i = 0; i < tf->meta_count; i++) {
        const char *k = tf->meta_keys[i], *v = tf->meta_values[i];
        if (!strncmp(k, META_SUM, strlen(META_SUM))) {
            if (!mdc_tensorfile_get_meta(tf, k + strlen(META_SUM)))
                return mdc_fail(MDC_ERR_FORMAT,
                                "%s: __metadata__ '%s' is missing but its checksum '%s' is there: the "
                                "field was removed after the file was saved",
                                label, k + strlen(META_SUM), k);
            continue;
        }
        if (!strncmp(k, SUM, strlen(SUM))) {
            if (!mdc_tensorfile_find(tf, k + strlen(SUM)))
                return mdc_fail(MDC_ERR_FORMAT,
                                "%s: __metadata__ '%s' is the checksum of a tensor '%s' the file does "
                                "not have",
                                label, k, k + strlen(SUM));
            continue;
        }
        snprintf(key, sizeof key, META_SUM "%s", k);
        const char *want = mdc_tensorfile_get_meta(tf, key);
        mdc_status st = meta_digest(k, v, val);
        if (st) return st;
        if (!want)
            return mdc_fail(MDC_ERR_FORMAT,
                            "%s: __metadata__ '%s' has no checksum ('%.80s'): it was added after the "
                            "file was saved",
                            label, k, key);
        if (strcmp(val, want))
            return mdc_fail(MDC_ERR_FORMAT,
                            "%s: __metadata__ '%s' = '%.80s' does not match its checksum (%s in the "
                            "file, %s computed): the file was damaged or edited after it was saved",
                            label, k, v, want, val);
    }
    return MDC_OK;
}

mdc_status mdc_checkpoint_verify(const mdc_tensorfile *tf, const char *label) {
    int fmt = mdc_i_checkpoint_format(tf);
    if (fmt < 0)
        return mdc_fail(MDC_ERR_FORMAT,
                        "%s: __metadata__ minidc.format '%s' is a checkpoint format this minidc does "
                        "not know (it reads checkpoint-2 and checkpoint-1)",
                        label, mdc_tensorfile_get_meta(tf, "minidc.format"));
    if (fmt == 0) return MDC_OK;
    mdc_status st = fmt == 2 ? verify_meta(tf, label) : MDC_OK;
    for (int i = 0; !st && i < tf->count; i++) {
        const mdc_tensor *t = &tf->tensors[i];
        char key[320], val[24];
        snprintf(key, sizeof key, SUM "%s", t->name);
        const char *want = mdc_tensorfile_get_meta(tf, key);
        if (!want && fmt == 2)
            return mdc_fail(MDC_ERR_FORMAT,
                            "%s: tensor '%s' has no checksum ('%.80s'): the file was changed after it "
                            "was saved",
                            label, t->name, key);
        if (!want) continue;
        tensor_digest(t, val);
        if (strcmp(val, want))
            return mdc_fail(MDC_ERR_FORMAT,
                            "%s: tensor '%s' does not match its checksum (%s in the file, %s "
                            "computed): the file was changed or mixed from two writers after it was saved",
                            label, t->name, want, val);
    }
    return st;
}

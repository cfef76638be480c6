/* The B x T batch loader, sharded by data-parallel rank (semantics in include/minidc/datasets.h).
 * Its whole state is the number of global sequences consumed, so a checkpoint resumes it with
 * mdc_loader_seek_sequences, with any batch and every rank count on the same sequence stream. */
#include <stdlib.h>
#include <string.h>

#include "minidc/datasets.h"
#include "minidc/splitmix.h"

struct mdc_loader {
    mdc_shard shard; /* tokens copied in (no vocabulary) */
    mdc_loader_config cfg;
    uint64_t windows; /* S = (N - 1) / T */
    uint64_t seqs;    /* global sequences consumed */
    uint64_t *perm;   /* permutation of epoch perm_epoch (shuffle only) */
    uint64_t perm_epoch;
    int have_perm;
};

/* Fisher-Yates from a counter-based stream of (seed, epoch): the same on every rank. */
static void make_perm(mdc_loader *ld, uint64_t epoch) {
    uint64_t n = ld->windows, key = mdc_splitmix64(ld->cfg.seed ^ mdc_splitmix64(epoch));
    for (uint64_t i = 0; i < n; i++) ld->perm[i] = i;
    for (uint64_t i = n - 1; i > 0; i--) {
        uint64_t j = mdc_splitmix64(key + i) % (i + 1), t = ld->perm[i];
        ld->perm[i] = ld->perm[j];
        ld->perm[j] = t;
    }
    ld->perm_epoch = epoch;
    ld->have_perm = 1;
}

mdc_status mdc_loader_from_shard(mdc_loader **out, const mdc_shard *s, const mdc_loader_config *cfg) {
    *out = NULL;
    if (cfg->batch <= 0 || cfg->seq_len <= 0)
        return mdc_fail(MDC_ERR_INVALID, "loader: batch %d and sequence length %d must be positive", cfg->batch,
                        cfg->seq_len);
    if (cfg->nranks <= 0 || cfg->rank < 0 || cfg->rank >= cfg->nranks)
        return mdc_fail(MDC_ERR_INVALID, "loader: rank %d of %d", cfg->rank, cfg->nranks);
    if (cfg->batch % cfg->nranks)
        return mdc_fail(MDC_ERR_INVALID, "loader: global batch %d is not divisible by %d data-parallel ranks",
                        cfg->batch, cfg->nranks);
    if (s->count < (size_t)cfg->seq_len + 1)
        return mdc_fail(MDC_ERR_INVALID, "loader: %s has %zu tokens, fewer than sequence length %d + 1",
                        s->source[0] ? s->source : "stream", s->count, cfg->seq_len);
    mdc_loader *ld = calloc(1, sizeof *ld);
    if (!ld) return mdc_fail(MDC_ERR_OOM_HOST, "loader");
    ld->cfg = *cfg;
    ld->shard.count = s->count;
    ld->shard.vocab_size = s->vocab_size;
    ld->shard.width = s->width;
    memcpy(ld->shard.source, s->source, sizeof ld->shard.source);
    ld->windows = (s->count - 1) / (uint64_t)cfg->seq_len;
    ld->shard.tokens = malloc(s->count * sizeof *ld->shard.tokens);
    ld->perm = cfg->shuffle ? malloc(ld->windows * sizeof *ld->perm) : NULL;
    if (!ld->shard.tokens || (cfg->shuffle && !ld->perm)) {
        mdc_loader_free(ld);
        return mdc_fail(MDC_ERR_OOM_HOST, "loader: %zu tokens", s->count);
    }
    memcpy(ld->shard.tokens, s->tokens, s->count * sizeof *ld->shard.tokens);
    *out = ld;
    return MDC_OK;
}

mdc_status mdc_loader_open(mdc_loader **out, const char *path, const mdc_loader_config *cfg) {
    mdc_shard s;
    *out = NULL;
    mdc_status st = mdc_shard_read(path, &s);
    if (st) return st;
    st = mdc_loader_from_shard(out, &s, cfg);
    if (st) mdc_fail(st, "%s: %s", path, mdc_detail());
    mdc_shard_clear(&s);
    return st;
}

void mdc_loader_free(mdc_loader *ld) {
    if (!ld) return;
    mdc_shard_clear(&ld->shard);
    free(ld->perm);
    free(ld);
}

mdc_status mdc_loader_next(mdc_loader *ld, int *inputs, int *targets) {
    const int B = ld->cfg.batch, T = ld->cfg.seq_len, per = B / ld->cfg.nranks;
    for (int row = 0; row < per; row++) {
        uint64_t g = ld->seqs + (uint64_t)(ld->cfg.rank * per + row);
        uint64_t epoch = g / ld->windows, w = g % ld->windows;
        if (ld->cfg.shuffle) {
            if (!ld->have_perm || ld->perm_epoch != epoch) make_perm(ld, epoch);
            w = ld->perm[w];
        }
        const uint32_t *src = ld->shard.tokens + w * (uint64_t)T;
        for (int t = 0; t < T; t++) {
            inputs[(size_t)row * T + t] = (int)src[t];
            targets[(size_t)row * T + t] = (int)src[t + 1];
        }
    }
    ld->seqs += (uint64_t)B;
    return MDC_OK;
}

uint64_t mdc_loader_position(const mdc_loader *ld) { return ld->seqs / (uint64_t)ld->cfg.batch; }
void mdc_loader_seek(mdc_loader *ld, uint64_t position) { ld->seqs = position * (uint64_t)ld->cfg.batch; }
uint64_t mdc_loader_sequences(const mdc_loader *ld) { return ld->seqs; }
void mdc_loader_seek_sequences(mdc_loader *ld, uint64_t sequences) { ld->seqs = sequences; }
uint32_t mdc_loader_vocab_size(const mdc_loader *ld) { return ld->shard.vocab_size; }
uint64_t mdc_loader_windows(const mdc_loader *ld) { return ld->windows; }
const mdc_shard *mdc_loader_shard(const mdc_loader *ld) { return &ld->shard; }

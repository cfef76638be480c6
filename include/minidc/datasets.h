/* Datasets: the token-shard format, a character tokenizer, generated tasks, and the B x T batch
 * loader that shards a global batch across data-parallel ranks. Everything is generated or built
 * from the user's own text, never downloaded. Format and tasks: docs/datasets.md.
 *
 * Token shard (.bin), all integers little-endian, 64-byte header then the tokens:
 *   0  char[8]  magic "MDCTOKS\0"
 *   8  u32      version (1)
 *  12  u32      token width in bytes (2: uint16 tokens, 4: uint32 tokens)
 *  16  u32      vocab size V (every token < V)
 *  20  u32      reserved (0)
 *  24  u64      token count N
 *  32  char[32] source: NUL-padded name of what made it ("copy", "text", ...)
 *  64  tokens   N x width bytes; the file is exactly 64 + N * width bytes.
 * The vocabulary travels next to it as PATH.vocab.json: {"type": "char", "tokens": [...]} where
 * tokens[i] is the UTF-8 text of token i. */
#ifndef MINIDC_DATASETS_H
#define MINIDC_DATASETS_H

#include <stddef.h>
#include <stdint.h>

#include "minidc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MDC_SHARD_MAGIC "MDCTOKS"
#define MDC_SHARD_VERSION 1
#define MDC_SHARD_HEADER_BYTES 64

/* A token stream in memory, with its vocabulary (optional). */
typedef struct {
    uint32_t *tokens; /* count tokens, owned */
    size_t count;
    uint32_t vocab_size;
    char source[32];
    int width;    /* 2 or 4: as read, or what the writer will use (0 = smallest) */
    char **vocab; /* vocab_size UTF-8 strings (owned), or NULL if unknown */
} mdc_shard;

/* Frees tokens and vocabulary and clears the struct (not the struct itself); NULL is a no-op. */
void mdc_shard_clear(mdc_shard *s);

/* Reads a shard. Validation: magic, version, width 2 or 4, vocab size >= 1, reserved 0, file size
 * == 64 + N * width (no overflow), every token < V (the first bad one is named by index). Reads
 * PATH.vocab.json too when it exists (its length must equal V). MDC_ERR_FORMAT naming the file
 * and field. On failure *out is cleared. */
mdc_status mdc_shard_read(const char *path, mdc_shard *out);
/* Header only (no tokens, no vocabulary), for `minidc data info` on large files. */
mdc_status mdc_shard_read_header(const char *path, mdc_shard *out);
/* Writes a shard (width: s->width, or 2 if V <= 65536 else 4), and PATH.vocab.json if s->vocab. */
mdc_status mdc_shard_write(const char *path, const mdc_shard *s);
/* Reads a vocabulary file into *vocab (n strings, owned by the caller: free each and the array). */
mdc_status mdc_vocab_read(const char *path, char ***vocab, uint32_t *n);

/* Character tokenizer: splits UTF-8 text into code points; the vocabulary is the distinct code
 * points in ascending order. Invalid UTF-8 gives MDC_ERR_FORMAT naming the byte offset. */
mdc_status mdc_tokenize_chars(const unsigned char *text, size_t len, const char *label, mdc_shard *out);

/* ---- generated tasks -------------------------------------------------------------------- */

typedef struct {
    const char *name;
    const char *description;
} mdc_task_info;

int mdc_task_count(void);
const mdc_task_info *mdc_task_at(int i);

/* Generates at least `ntokens` tokens (whole examples, then cut to exactly ntokens) of a task
 * from a seed; the same (task, seed, ntokens) give the same tokens on every machine. Also
 * returns the entropy floor in nats per token: the mean of -ln p over the generator's own random
 * choices, i.e. the cross-entropy a model that has solved the task reaches (docs/datasets.md).
 * MDC_ERR_INVALID on an unknown task (the detail lists the tasks). */
mdc_status mdc_task_generate(const char *task, uint64_t seed, size_t ntokens, mdc_shard *out, double *floor_nats);

/* ---- the batch loader --------------------------------------------------------------------- */

/* Sequences: the stream is cut into S = (N - 1) / T windows; window j has inputs
 * tokens[jT .. jT+T) and targets tokens[jT+1 .. jT+T+1). Global batch k (step k) is made of the
 * global sequences g = kB .. kB+B-1, window (g mod S) of epoch g / S (in order, or in a
 * seeded permutation per epoch when shuffle is set). Rank r of n gets the rows
 * [r B/n, (r+1) B/n) of each global batch, so n ranks together see exactly the serial batch. */
typedef struct {
    int batch;        /* global batch B: sequences per step over all ranks */
    int seq_len;      /* T */
    int rank, nranks; /* data-parallel shard (0, 1 for a serial run); nranks must divide B */
    int shuffle;      /* 0: windows in order; 1: a permutation per epoch from seed */
    uint64_t seed;
} mdc_loader_config;

typedef struct mdc_loader mdc_loader;

/* Opens a loader over a shard file (read whole) or over a shard in memory (copied). Fails with
 * MDC_ERR_INVALID on a bad config (naming it) or a stream shorter than T + 1 tokens. */
mdc_status mdc_loader_open(mdc_loader **out, const char *path, const mdc_loader_config *cfg);
mdc_status mdc_loader_from_shard(mdc_loader **out, const mdc_shard *s, const mdc_loader_config *cfg);
void mdc_loader_free(mdc_loader *ld); /* NULL is a no-op */

/* Fills this rank's rows of the next global batch: inputs and targets are (B/n, T) ints. */
mdc_status mdc_loader_next(mdc_loader *ld, int *inputs, int *targets);
/* The position: how many global batches have been consumed. A checkpoint stores it (with the
 * config) and mdc_loader_seek(position) resumes exactly there. */
uint64_t mdc_loader_position(const mdc_loader *ld);
void mdc_loader_seek(mdc_loader *ld, uint64_t position);
/* The same in global sequences consumed (batch x batches): a checkpoint stores it, so a run
 * resumed with another --batch continues at the next sequence. */
uint64_t mdc_loader_sequences(const mdc_loader *ld);
void mdc_loader_seek_sequences(mdc_loader *ld, uint64_t sequences);
/* Vocabulary size and windows per epoch of the loaded stream; the shard itself. */
uint32_t mdc_loader_vocab_size(const mdc_loader *ld);
uint64_t mdc_loader_windows(const mdc_loader *ld);
const mdc_shard *mdc_loader_shard(const mdc_loader *ld);

#ifdef __cplusplus
}
#endif
#endif

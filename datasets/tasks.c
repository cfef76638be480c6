/* Generated tasks a tiny GPT learns in a few hundred steps: copy, reverse, modular addition and
 * a small stochastic grammar. Each is character-level text whose vocabulary is the sorted set of
 * its characters, so `minidc data tokenize` of the decoded text gives the same tokens.
 *
 * Each generator records -ln p of every random choice it makes. The text determines the choices
 * (no two choice sequences give the same text, and each is revealed within a few characters), so
 * (sum of -ln p) / (characters) is the entropy rate of the stream: the cross-entropy loss of a
 * model that has solved the task (docs/datasets.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "minidc/datasets.h"

/* The largest request: 2^32 tokens, the size of the tokenizer's largest input (4 GiB). Each
 * token costs about 6 bytes of host memory while generating (the text, up to 2 bytes a
 * character while its buffer doubles, plus the 4-byte token), so a request is also checked
 * against physical memory: past it, Linux overcommit would end the run in the OOM killer (or
 * in swap) instead of an error. */
#define TASK_MAX_TOKENS ((uint64_t)1 << 32)
#define TASK_BYTES_PER_TOKEN 6.0

typedef struct {
    uint64_t s;
} rng;

/* splitmix64 (Steele, Lea, Flood 2014): every seed gives a full-period stream. */
static uint64_t rng_next(rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_unit(rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

/* Uniform in [0, n), recording ln n. */
static int uniform(rng *r, int n, double *nats) {
    *nats += log((double)n);
    return (int)(rng_next(r) % (uint64_t)n);
}

/* Index drawn with probabilities p[0..n), recording -ln p. */
static int weighted(rng *r, const double *p, int n, double *nats) {
    double u = rng_unit(r), acc = 0;
    int k = n - 1;
    for (int i = 0; i < n; i++) {
        acc += p[i];
        if (u < acc) {
            k = i;
            break;
        }
    }
    *nats -= log(p[k]);
    return k;
}

typedef struct {
    char *s;
    size_t n, cap;
} text;

static int put(text *t, const char *str) {
    size_t l = strlen(str);
    if (t->n + l + 1 > t->cap) {
        size_t cap = (t->cap ? 2 * t->cap : 4096) + l;
        char *ns = realloc(t->s, cap);
        if (!ns) return 0;
        t->s = ns;
        t->cap = cap;
    }
    memcpy(t->s + t->n, str, l + 1);
    t->n += l;
    return 1;
}

static int putc_(text *t, char c) {
    char b[2] = {c, 0};
    return put(t, b);
}

#define COPY_ALPHABET "abcdefgh"
#define COPY_MAXLEN 8

/* "abc=abc\n": 1..8 letters from a..h, '=', the same letters (or reversed), newline. */
static int gen_copy(text *t, rng *r, double *nats, int reverse) {
    int len = 1 + uniform(r, COPY_MAXLEN, nats);
    char w[COPY_MAXLEN];
    for (int i = 0; i < len; i++) w[i] = COPY_ALPHABET[uniform(r, (int)strlen(COPY_ALPHABET), nats)];
    int ok = 1;
    for (int i = 0; i < len; i++) ok &= putc_(t, w[i]);
    ok &= putc_(t, '=');
    for (int i = 0; i < len; i++) ok &= putc_(t, w[reverse ? len - 1 - i : i]);
    return ok & putc_(t, '\n');
}

static int gen_copy_fwd(text *t, rng *r, double *nats) { return gen_copy(t, r, nats, 0); }
static int gen_reverse(text *t, rng *r, double *nats) { return gen_copy(t, r, nats, 1); }

/* "3+9=2\n": (a + b) mod 10. */
static int gen_add(text *t, rng *r, double *nats) {
    int a = uniform(r, 10, nats), b = uniform(r, 10, nats);
    char line[8] = {(char)('0' + a), '+', (char)('0' + b), '=', (char)('0' + (a + b) % 10), '\n', 0};
    return put(t, line);
}

/* The grammar (unambiguous: the first letter after a choice point tells which branch was taken):
 *   S      -> NP VP ".\n"
 *   NP     -> Simple (0.7) | Simple " and " NP (0.3)
 *   Simple -> "the " N (0.6) | "a " A " " N (0.4)
 *   N      -> cat .4 | dog .3 | fox .2 | owl .1      A -> big .5 | red .3 | shy .2
 *   VP     -> " " V (0.3) | " " V " " NP (0.7)       V -> sees .5 | likes .3 | hunts .2
 * NP recursion is capped at 4 conjuncts (the 4th takes Simple with probability 1). */
static const char *const nouns[] = {"cat", "dog", "fox", "owl"};
static const double p_noun[] = {0.4, 0.3, 0.2, 0.1};
static const char *const adjs[] = {"big", "red", "shy"};
static const double p_adj[] = {0.5, 0.3, 0.2};
static const char *const verbs[] = {"sees", "likes", "hunts"};
static const double p_verb[] = {0.5, 0.3, 0.2};

static int gen_np(text *t, rng *r, double *nats, int depth) {
    static const double p_simple[] = {0.6, 0.4}, p_more[] = {0.7, 0.3};
    int ok = 1;
    if (weighted(r, p_simple, 2, nats) == 0) {
        ok &= put(t, "the ");
    } else {
        ok &= put(t, "a ");
        ok &= put(t, adjs[weighted(r, p_adj, 3, nats)]);
        ok &= put(t, " ");
    }
    ok &= put(t, nouns[weighted(r, p_noun, 4, nats)]);
    if (depth < 3 && weighted(r, p_more, 2, nats) == 1) {
        ok &= put(t, " and ");
        ok &= gen_np(t, r, nats, depth + 1);
    }
    return ok;
}

static int gen_grammar(text *t, rng *r, double *nats) {
    static const double p_vp[] = {0.3, 0.7};
    int ok = gen_np(t, r, nats, 0);
    ok &= put(t, " ");
    ok &= put(t, verbs[weighted(r, p_verb, 3, nats)]);
    if (weighted(r, p_vp, 2, nats) == 1) {
        ok &= put(t, " ");
        ok &= gen_np(t, r, nats, 0);
    }
    return ok & put(t, ".\n");
}

typedef struct {
    mdc_task_info info;
    const char *charset; /* every character the task can emit */
    int (*gen)(text *t, rng *r, double *nats);
} task;

static const task tasks[] = {
    {{"copy", "copy 1-8 letters a-h after '=': \"abc=abc\\n\""}, "\n=" COPY_ALPHABET, gen_copy_fwd},
    {{"reverse", "reverse 1-8 letters a-h after '=': \"abc=cba\\n\""}, "\n=" COPY_ALPHABET, gen_reverse},
    {{"add", "modular addition of digits, (a+b) mod 10: \"3+9=2\\n\""}, "\n+=0123456789", gen_add},
    {{"grammar", "sentences of a small stochastic grammar: \"a red fox sees the cat.\\n\""},
     "\n .abcdefghiklnorstuwxy",
     gen_grammar},
};

int mdc_task_count(void) { return (int)(sizeof tasks / sizeof tasks[0]); }

const mdc_task_info *mdc_task_at(int i) { return (i >= 0 && i < mdc_task_count()) ? &tasks[i].info : NULL; }

static int cmp_char(const void *a, const void *b) {
    return (int)*(const unsigned char *)a - (int)*(const unsigned char *)b;
}

mdc_status mdc_task_generate(const char *name, uint64_t seed, size_t ntokens, mdc_shard *out, double *floor_nats) {
    const task *tk = NULL;
    memset(out, 0, sizeof *out);
    for (int i = 0; i < mdc_task_count(); i++)
        if (!strcmp(name, tasks[i].info.name)) tk = &tasks[i];
    if (!tk) return mdc_fail(MDC_ERR_INVALID, "unknown task '%s' (tasks: copy, reverse, add, grammar)", name);
    if (ntokens == 0) return mdc_fail(MDC_ERR_INVALID, "task '%s': 0 tokens requested", name);
    if ((uint64_t)ntokens > TASK_MAX_TOKENS)
        return mdc_fail(MDC_ERR_INVALID, "--tokens: %zu tokens requested for task '%s', at most %llu", ntokens, name,
                        (unsigned long long)TASK_MAX_TOKENS);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double need = (double)ntokens * TASK_BYTES_PER_TOKEN, phys = (double)pages * (double)page;
    if (pages > 0 && page > 0 && need > phys)
        return mdc_fail(MDC_ERR_INVALID,
                        "--tokens: %zu tokens of task '%s' need about %.1f GiB of "
                        "host memory, more than this machine's %.1f GiB",
                        ntokens, name, need / 1073741824.0, phys / 1073741824.0);
    mdc_status st = MDC_OK;
    mdc_shard s = {0};
    text t = {0};
    char chars[64];
    size_t nc = strlen(tk->charset);
    memcpy(chars, tk->charset, nc);
    qsort(chars, nc, 1, cmp_char);
    int map[256];
    for (int i = 0; i < 256; i++) map[i] = -1;
    for (size_t i = 0; i < nc; i++) map[(unsigned char)chars[i]] = (int)i;

    rng r = {seed};
    double nats = 0;
    while (t.n < ntokens)
        if (!tk->gen(&t, &r, &nats)) {
            st = mdc_fail(MDC_ERR_OOM_HOST, "task '%s': %zu tokens", name, ntokens);
            goto done;
        }
    if (floor_nats) *floor_nats = nats / (double)t.n;
    s.tokens = malloc(ntokens * sizeof *s.tokens);
    s.vocab = calloc(nc, sizeof *s.vocab);
    if (!s.tokens || !s.vocab) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "task '%s': %zu tokens", name, ntokens);
        goto done;
    }
    s.vocab_size = (uint32_t)nc;
    for (size_t i = 0; i < nc; i++) {
        char c[2] = {chars[i], 0};
        if (!(s.vocab[i] = strdup(c))) {
            st = mdc_fail(MDC_ERR_OOM_HOST, "task '%s'", name);
            goto done;
        }
    }
    for (size_t i = 0; i < ntokens; i++) {
        int id = map[(unsigned char)t.s[i]];
        if (id < 0) { /* a generator emitted a character missing from its charset */
            st = mdc_fail(MDC_ERR_INVALID, "task '%s': character 0x%02x not in its charset", name,
                          (unsigned char)t.s[i]);
            goto done;
        }
        s.tokens[i] = (uint32_t)id;
    }
    s.count = ntokens;
    snprintf(s.source, sizeof s.source, "%s", name);
    *out = s;
    memset(&s, 0, sizeof s);
done:
    free(t.s);
    mdc_shard_clear(&s);
    return st;
}

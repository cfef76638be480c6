/* Datasets: generators are deterministic and produce what they document; the entropy floors
 * match their closed forms; shards round-trip through the file format; the tokenizer handles
 * UTF-8 and rejects bad input; the loader's data-parallel shards of a global batch concatenate
 * to the serial batch, and seek(position) resumes it exactly. */
#include <stdint.h>
#include <unistd.h>

#include "testutil.h"

static char dir[128];

static void decode(const mdc_shard *s, size_t n, char *out) {
    size_t k = 0;
    for (size_t i = 0; i < n && i < s->count; i++) k += (size_t)sprintf(out + k, "%s", s->vocab[s->tokens[i]]);
    out[k] = 0;
}

static void test_tasks(void) {
    mdc_shard a, b;
    double fa, fb;
    for (int i = 0; i < mdc_task_count(); i++) {
        const char *name = mdc_task_at(i)->name;
        MDC_CHECK(mdc_task_generate(name, 42, 5000, &a, &fa));
        MDC_CHECK(mdc_task_generate(name, 42, 5000, &b, &fb));
        TU_CHECK(a.count == 5000 && b.count == 5000, "%s: token count", name);
        TU_CHECK(!memcmp(a.tokens, b.tokens, 5000 * sizeof *a.tokens), "%s: same seed, different tokens", name);
        TU_EQ_DBL(fa, fb);
        mdc_shard_clear(&b);
        MDC_CHECK(mdc_task_generate(name, 43, 5000, &b, NULL));
        TU_CHECK(memcmp(a.tokens, b.tokens, 5000 * sizeof *a.tokens), "%s: seeds 42 and 43 agree", name);
        for (uint32_t v = 1; v < a.vocab_size; v++)
            TU_CHECK(strcmp(a.vocab[v - 1], a.vocab[v]) < 0, "%s: vocabulary not sorted at %u", name, v);
        char text[5001 * 4];
        decode(&a, 5000, text);
        /* every complete line obeys the task */
        char *line = text, *nl;
        int lines = 0;
        while ((nl = strchr(line, '\n')) && lines < 200) {
            *nl = 0;
            if (!strcmp(name, "copy") || !strcmp(name, "reverse")) {
                char *eq = strchr(line, '=');
                TU_CHECK(eq && strlen(eq + 1) == (size_t)(eq - line), "%s: bad line '%s'", name, line);
                size_t L = eq ? (size_t)(eq - line) : 0;
                for (size_t k = 0; eq && k < L; k++)
                    TU_CHECK(eq[1 + k] == line[!strcmp(name, "copy") ? k : L - 1 - k], "%s: '%s'", name, line);
            } else if (!strcmp(name, "add")) {
                TU_CHECK(strlen(line) == 5 && line[1] == '+' && line[3] == '=' &&
                             line[4] - '0' == (line[0] - '0' + line[2] - '0') % 10,
                         "add: '%s'", line);
            } else {
                size_t L = strlen(line);
                TU_CHECK(L > 2 && line[L - 1] == '.' && (!strncmp(line, "the ", 4) || !strncmp(line, "a ", 2)),
                         "grammar: '%s'", line);
            }
            line = nl + 1;
            lines++;
        }
        mdc_shard_clear(&a);
        mdc_shard_clear(&b);
    }
    /* closed forms: add = 2 ln 10 / 6; copy = E[ln 8 + L ln 8] / E[2L + 2] with L uniform 1..8 */
    MDC_CHECK(mdc_task_generate("add", 1, 600000, &a, &fa));
    TU_NEAR(fa, 2 * log(10.0) / 6, 1e-9);
    mdc_shard_clear(&a);
    MDC_CHECK(mdc_task_generate("copy", 1, 2000000, &a, &fa));
    TU_NEAR(fa, (log(8.0) + 4.5 * log(8.0)) / (2 * 4.5 + 2), 2e-3);
    mdc_shard_clear(&a);
    TU_STATUS(mdc_task_generate("nope", 1, 10, &a, NULL), MDC_ERR_INVALID);
    TU_CONTAINS(mdc_detail(), "grammar");
}

static void test_shard_files(void) {
    char p[256], v[300];
    mdc_shard s, r;
    MDC_CHECK(mdc_task_generate("grammar", 5, 3000, &s, NULL));
    snprintf(p, sizeof p, "%s/g.bin", dir);
    MDC_CHECK(mdc_shard_write(p, &s));
    MDC_CHECK(mdc_shard_read(p, &r));
    TU_CHECK(r.count == s.count && r.vocab_size == s.vocab_size && r.width == 2, "shard header round trip");
    TU_CHECK(!memcmp(r.tokens, s.tokens, s.count * 4), "shard tokens round trip");
    TU_CHECK(r.vocab && !strcmp(r.vocab[3], s.vocab[3]), "vocabulary round trip");
    TU_CHECK(!strcmp(r.source, "grammar"), "source '%s'", r.source);
    mdc_shard_clear(&r);
    /* 4-byte tokens */
    s.width = 4;
    MDC_CHECK(mdc_shard_write(p, &s));
    MDC_CHECK(mdc_shard_read(p, &r));
    TU_CHECK(r.width == 4 && !memcmp(r.tokens, s.tokens, s.count * 4), "4-byte shard round trip");
    mdc_shard_clear(&r);
    /* a vocabulary that disagrees with the header */
    snprintf(v, sizeof v, "%s.vocab.json", p);
    FILE *f = fopen(v, "w");
    fputs("{\"type\": \"char\", \"tokens\": [\"a\", \"b\"]}", f);
    fclose(f);
    TU_STATUS(mdc_shard_read(p, &r), MDC_ERR_FORMAT);
    TU_CONTAINS(mdc_detail(), "vocab");
    f = fopen(v, "w");
    fputs("{\"type\": \"bpe\"}", f);
    fclose(f);
    TU_STATUS(mdc_shard_read(p, &r), MDC_ERR_FORMAT);
    remove(v);
    /* a token out of range */
    s.tokens[10] = s.vocab_size;
    TU_STATUS(mdc_shard_write(p, &s), MDC_ERR_INVALID);
    mdc_shard_clear(&s);
    TU_STATUS(mdc_shard_read("/nonexistent.bin", &r), MDC_ERR_IO);
}

static void test_tokenizer(void) {
    const char *txt = "h\xc3\xa9llo \xe2\x82\xac\xf0\x9f\x98\x80\n";
    mdc_shard s;
    MDC_CHECK(mdc_tokenize_chars((const unsigned char *)txt, strlen(txt), "t.txt", &s));
    TU_CHECK(s.count == 9 && s.vocab_size == 8, "%zu tokens, vocab %u", s.count, s.vocab_size);
    char back[64];
    decode(&s, s.count, back);
    TU_CHECK(!strcmp(back, txt), "decode(tokenize(x)) != x: '%s'", back);
    TU_CHECK(!strcmp(s.vocab[0], "\n") && !strcmp(s.vocab[7], "\xf0\x9f\x98\x80"), "vocab order");
    mdc_shard_clear(&s);
    const char *bad[] = {"ab\xc3", "a\xc0\x80", "\xed\xa0\x80", "\xf5\x80\x80\x80", "x\x80y", "a\0b"};
    size_t blen[] = {3, 3, 3, 4, 3, 3};
    for (int i = 0; i < 6; i++) {
        TU_STATUS(mdc_tokenize_chars((const unsigned char *)bad[i], blen[i], "bad.txt", &s), MDC_ERR_FORMAT);
        TU_CONTAINS(mdc_detail(), "bad.txt");
    }
    TU_STATUS(mdc_tokenize_chars((const unsigned char *)"", 0, "empty.txt", &s), MDC_ERR_INVALID);
}

static void test_loader(void) {
    mdc_shard s;
    MDC_CHECK(mdc_task_generate("copy", 9, 2000, &s, NULL));
    for (int shuffle = 0; shuffle <= 1; shuffle++) {
        const int B = 12, T = 16, steps = 15; /* 15 steps of 12 x 16 wraps the 124 windows */
        mdc_loader_config c = {B, T, 0, 1, shuffle, 77};
        mdc_loader *serial;
        MDC_CHECK(mdc_loader_from_shard(&serial, &s, &c));
        TU_CHECK(mdc_loader_windows(serial) == (2000 - 1) / T, "windows");
        int *in = malloc(sizeof(int) * B * T * steps), *tg = malloc(sizeof(int) * B * T * steps);
        for (int k = 0; k < steps; k++) MDC_CHECK(mdc_loader_next(serial, in + k * B * T, tg + k * B * T));
        TU_CHECK(mdc_loader_position(serial) == (uint64_t)steps, "position");
        for (int i = 0; i < B * T * steps; i++)
            if (i % T != T - 1) TU_CHECK(tg[i] == in[i + 1], "targets are inputs shifted by one at %d", i);
        for (int n = 2; n <= 4; n++) {
            int per = B / n;
            int *pi = malloc(sizeof(int) * per * T), *pt = malloc(sizeof(int) * per * T);
            for (int r = 0; r < n; r++) {
                mdc_loader_config rc = {B, T, r, n, shuffle, 77};
                mdc_loader *ld;
                MDC_CHECK(mdc_loader_from_shard(&ld, &s, &rc));
                mdc_loader_seek(ld, 3); /* resume mid-run: must match the serial step 3 onwards */
                for (int k = 3; k < steps; k++) {
                    MDC_CHECK(mdc_loader_next(ld, pi, pt));
                    const int *want = in + k * B * T + r * per * T, *wantt = tg + k * B * T + r * per * T;
                    TU_CHECK(!memcmp(pi, want, sizeof(int) * per * T) && !memcmp(pt, wantt, sizeof(int) * per * T),
                             "shuffle %d: rank %d of %d, step %d differs from the serial batch", shuffle, r, n, k);
                }
                mdc_loader_free(ld);
            }
            free(pi);
            free(pt);
        }
        if (shuffle) { /* every window appears once per epoch */
            int S = (int)mdc_loader_windows(serial);
            char *seen = calloc((size_t)S, 1);
            for (int g = 0; g < S; g++) {
                int w = -1;
                for (int cand = 0; cand < S && w < 0; cand++) {
                    int same = !seen[cand];
                    for (int t = 0; t < T && same; t++) same = (int)s.tokens[cand * T + t] == in[g * T + t];
                    if (same) w = cand;
                }
                TU_CHECK(w >= 0, "shuffled sequence %d is not an unused window", g);
                if (w >= 0) seen[w] = 1;
            }
            free(seen);
        }
        free(in);
        free(tg);
        mdc_loader_free(serial);
    }
    mdc_loader *ld;
    mdc_loader_config bad = {10, 16, 0, 3, 0, 0};
    TU_STATUS(mdc_loader_from_shard(&ld, &s, &bad), MDC_ERR_INVALID);
    TU_CONTAINS(mdc_detail(), "divisible");
    mdc_loader_config longer = {1, 5000, 0, 1, 0, 0};
    TU_STATUS(mdc_loader_from_shard(&ld, &s, &longer), MDC_ERR_INVALID);
    mdc_loader_free(NULL);
    mdc_shard_clear(&s);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/mdc_ds_%d", (int)getpid());
    char cmd[200];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    if (system(cmd)) return 1;
    test_tasks();
    test_shard_files();
    test_tokenizer();
    test_loader();
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) return 1;
    return tu_finish("test_datasets");
}

/* Fuzz-style corpus for the file readers: valid safetensors, .npy and token-shard files are
 * truncated at every length, bit-flipped, and have their length fields and header numbers
 * replaced with hostile values (huge dims, offsets past the end, negative, fractional). Every
 * mutant must either parse (a flip in the data area is harmless) or fail with a status and a
 * detail that names the file; never crash, hang or read out of bounds (run under SANITIZE=1
 * for ASan/UBSan). The generator is seeded: the corpus is the same on every run.
 * Usage: test_fuzz_files [ITERATIONS]   (default 20000 random mutants per format) */
#include <stdint.h>
#include <unistd.h>

#include "testutil.h"

static uint64_t rs = 0x5eed;
static uint64_t rnd(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

static long n_ok, n_fail;

typedef mdc_status (*parse_fn)(const unsigned char *b, size_t len, const char *label);

static mdc_status parse_st(const unsigned char *b, size_t len, const char *label) {
    mdc_tensorfile *tf;
    mdc_status st = mdc_safetensors_parse(b, len, label, &tf);
    if (st == MDC_OK) {
        /* whatever parsed must be self-consistent */
        size_t total = 0;
        for (int i = 0; i < tf->count; i++) {
            const mdc_tensor *t = &tf->tensors[i];
            total += t->nbytes;
            TU_CHECK(t->nbytes == t->numel * mdc_tdtype_size(t->dtype), "%s: tensor %s size", label, t->name);
            if (t->nbytes) ((volatile unsigned char *)t->data)[t->nbytes - 1]; /* touch the last byte */
        }
        TU_CHECK(total <= len, "%s: %zu tensor bytes from a %zu-byte file", label, total, len);
    }
    mdc_tensorfile_free(tf);
    return st;
}

static mdc_status parse_npy(const unsigned char *b, size_t len, const char *label) {
    mdc_tensor t;
    mdc_status st = mdc_npy_parse(b, len, label, &t);
    if (st == MDC_OK) TU_CHECK(t.nbytes <= len, "%s: %zu bytes from a %zu-byte file", label, t.nbytes, len);
    mdc_tensor_clear(&t);
    return st;
}

static char shard_path[256];
static mdc_status parse_shard(const unsigned char *b, size_t len, const char *label) {
    (void)label;
    FILE *f = fopen(shard_path, "wb");
    if (!f || fwrite(b, 1, len, f) != len) abort();
    fclose(f);
    mdc_shard s;
    mdc_status st = mdc_shard_read(shard_path, &s);
    if (st == MDC_OK)
        for (size_t i = 0; i < s.count; i++) TU_CHECK(s.tokens[i] < s.vocab_size, "token %zu >= vocab", i);
    mdc_shard_clear(&s);
    return st;
}

static void run(parse_fn fn, const unsigned char *b, size_t len, const char *label) {
    mdc_clear_detail();
    mdc_status st = fn(b, len, label);
    if (st == MDC_OK) {
        n_ok++;
        return;
    }
    n_fail++;
    TU_CHECK(st == MDC_ERR_FORMAT || st == MDC_ERR_UNSUPPORTED, "%s: status %s (%s)", label, mdc_strerror(st),
             mdc_detail());
    /* the file's name is the label up to the mutation tag "[...]" */
    char base[128];
    snprintf(base, sizeof base, "%s", label);
    char *br = strchr(base, '[');
    if (br) *br = '\0';
    TU_CHECK(strstr(mdc_detail(), base) != NULL, "%s: detail '%s' does not name the file", label, mdc_detail());
}

/* Truncations at every length, flips, and field overwrites of one valid file. */
static void fuzz(parse_fn fn, const unsigned char *valid, size_t len, const char *label, int iters,
                 const size_t *fields, int nfields, int field_bytes) {
    unsigned char *m = malloc(len + 64);
    char lab[128];
    TU_CHECK(fn(valid, len, label) == MDC_OK, "%s: the valid seed file does not parse: %s", label, mdc_detail());
    for (size_t cut = 0; cut < len; cut++) {
        snprintf(lab, sizeof lab, "%s[cut %zu]", label, cut);
        unsigned char *c = malloc(cut ? cut : 1); /* exact-size buffer: ASan sees any overread */
        memcpy(c, valid, cut);
        run(fn, c, cut, lab);
        free(c);
    }
    for (int it = 0; it < iters; it++) {
        memcpy(m, valid, len);
        int kind = (int)(rnd() % 4);
        int nflip = 1 + (int)(rnd() % 4);
        if (kind == 0 || kind == 3)
            for (int k = 0; k < nflip; k++) m[rnd() % len] ^= (unsigned char)(1u << (rnd() % 8));
        if (kind == 1) { /* a hostile value in a length field */
            static const uint64_t hostile[] = {
                0, 1, 2, 7, 8, 0xff, 0xffff, 0x7fffffff, 0xffffffff, 0x100000000ull, 0x7fffffffffffffffull, ~0ull};
            size_t at = fields[rnd() % (unsigned)nfields];
            uint64_t v = rnd() % 2 ? hostile[rnd() % 12] : rnd();
            for (int i = 0; i < field_bytes && at + (size_t)i < len; i++)
                m[at + (size_t)i] = (unsigned char)(v >> (8 * i));
        }
        if (kind == 2) { /* replace a digit run with a huge or odd number */
            static const char *nums[] = {"99999999999999999999", "-1", "1e308", "4294967296", "0", "1.5",
                                         "9007199254740993"};
            size_t at = rnd() % len;
            while (at < len && !(m[at] >= '0' && m[at] <= '9')) at++;
            if (at < len) {
                const char *n = nums[rnd() % 7];
                size_t nl = strlen(n), end = at;
                while (end < len && m[end] >= '0' && m[end] <= '9') end++;
                /* splice: keep the total length so later offsets shift (another kind of damage) */
                unsigned char *s = malloc(len + nl);
                memcpy(s, m, at);
                memcpy(s + at, n, nl);
                memcpy(s + at + nl, m + end, len - end);
                size_t sl = at + nl + len - end;
                snprintf(lab, sizeof lab, "%s[num %d]", label, it);
                run(fn, s, sl, lab);
                free(s);
                continue;
            }
        }
        size_t ml = len;
        if (kind == 3) ml = len - rnd() % (len < 16 ? len : 16); /* flip and truncate */
        snprintf(lab, sizeof lab, "%s[mut %d]", label, it);
        unsigned char *c = malloc(ml ? ml : 1);
        memcpy(c, m, ml);
        run(fn, c, ml, lab);
        free(c);
    }
    free(m);
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 20000;
    char dir[128], p[256];
    snprintf(dir, sizeof dir, "/tmp/mdc_fuzz_%d", (int)getpid());
    snprintf(p, sizeof p, "mkdir -p %s", dir);
    if (system(p)) return 1;

    /* seed files written by our own writers */
    mdc_tensorfile *tf;
    MDC_CHECK(mdc_tensorfile_new(&tf));
    float w[12];
    for (int i = 0; i < 12; i++) w[i] = (float)i * 0.5f - 2;
    int64_t s34[2] = {3, 4}, s4[1] = {4}, s2[1] = {2};
    MDC_CHECK(mdc_tensorfile_add(tf, "h.0.attn.c_attn.weight", MDC_TD_F32, 2, s34, w));
    MDC_CHECK(mdc_tensorfile_add_f32(tf, "ln_f.bias", MDC_TD_BF16, 1, s4, w));
    int64_t ids[2] = {3, -4};
    MDC_CHECK(mdc_tensorfile_add(tf, "ids", MDC_TD_I64, 1, s2, ids));
    MDC_CHECK(mdc_tensorfile_add(tf, "loss", MDC_TD_F32, 0, NULL, w));
    MDC_CHECK(mdc_tensorfile_set_meta(tf, "n_head", "3"));
    snprintf(p, sizeof p, "%s/seed.safetensors", dir);
    MDC_CHECK(mdc_safetensors_write(p, tf));
    mdc_tensorfile_free(tf);
    unsigned char *st_bytes;
    size_t st_len;
    MDC_CHECK(mdc_read_file(p, 1 << 20, &st_bytes, &st_len));

    mdc_tensor t = {.name = "x", .dtype = MDC_TD_I32, .ndim = 2, .shape = {2, 3}, .numel = 6, .nbytes = 24, .data = w};
    snprintf(p, sizeof p, "%s/seed.npy", dir);
    MDC_CHECK(mdc_npy_write(p, &t));
    unsigned char *npy_bytes;
    size_t npy_len;
    MDC_CHECK(mdc_read_file(p, 1 << 20, &npy_bytes, &npy_len));

    mdc_shard sh;
    MDC_CHECK(mdc_task_generate("add", 7, 40, &sh, NULL));
    char **vocab = sh.vocab;
    sh.vocab = NULL; /* shard without its vocabulary file: the fuzz rewrites only the .bin */
    snprintf(p, sizeof p, "%s/seed.bin", dir);
    MDC_CHECK(mdc_shard_write(p, &sh));
    sh.vocab = vocab;
    mdc_shard_clear(&sh);
    unsigned char *sh_bytes;
    size_t sh_len;
    MDC_CHECK(mdc_read_file(p, 1 << 20, &sh_bytes, &sh_len));
    snprintf(shard_path, sizeof shard_path, "%s/mut.bin", dir);

    size_t st_fields[] = {0, 4}, npy_fields[] = {6, 8}, sh_fields[] = {8, 12, 16, 20, 24, 28};
    fuzz(parse_st, st_bytes, st_len, "seed.safetensors", iters, st_fields, 2, 8);
    fuzz(parse_npy, npy_bytes, npy_len, "seed.npy", iters, npy_fields, 2, 2);
    fuzz(parse_shard, sh_bytes, sh_len, shard_path, iters / 10, sh_fields, 6, 4);
    printf("fuzz: %ld mutants parsed (harmless damage), %ld rejected cleanly\n", n_ok, n_fail);
    free(st_bytes);
    free(npy_bytes);
    free(sh_bytes);
    snprintf(p, sizeof p, "rm -rf %s", dir);
    if (system(p)) return 1;
    return tu_finish("test_fuzz_files");
}

/* Tensor files: safetensors and .npy round trips for every dtype, metadata, scalars and empty
 * tensors, and crafted malformed files, each of which must fail with MDC_ERR_FORMAT (or
 * UNSUPPORTED) and a detail naming the file and, where there is one, the tensor. */
#include <stdint.h>
#include <unistd.h>

#include "testutil.h"

static char dir[256];

static void path_of(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", dir, name); }

static void test_safetensors_roundtrip(void) {
    mdc_tensorfile *tf;
    MDC_CHECK(mdc_tensorfile_new(&tf));
    float f[6] = {1.5f, -2.25f, 3e-3f, 65504.0f, -0.0f, 1e30f}; /* no f16 subnormals: see the report on device/half.c */
    int64_t s23[2] = {2, 3}, s6[1] = {6}, s0[1] = {0}, s3[3] = {1, 2, 3};
    MDC_CHECK(mdc_tensorfile_add(tf, "f32", MDC_TD_F32, 2, s23, f));
    MDC_CHECK(mdc_tensorfile_add_f32(tf, "f16", MDC_TD_F16, 1, s6, f));
    MDC_CHECK(mdc_tensorfile_add_f32(tf, "bf16", MDC_TD_BF16, 3, s3, f));
    int32_t i32[6] = {0, -1, 2147483647, -2147483647 - 1, 5, 6};
    int64_t i64[6] = {0, -1, INT64_MAX, INT64_MIN, 1ll << 40, 7};
    MDC_CHECK(mdc_tensorfile_add(tf, "i32", MDC_TD_I32, 1, s6, i32));
    MDC_CHECK(mdc_tensorfile_add(tf, "i64", MDC_TD_I64, 2, s23, i64));
    float loss = 2.5f;
    MDC_CHECK(mdc_tensorfile_add(tf, "scalar", MDC_TD_F32, 0, NULL, &loss));
    MDC_CHECK(mdc_tensorfile_add(tf, "empty", MDC_TD_F32, 1, s0, NULL));
    MDC_CHECK(mdc_tensorfile_set_meta(tf, "format", "pt"));
    MDC_CHECK(mdc_tensorfile_set_meta(tf, "n_head", "3"));
    TU_STATUS(mdc_tensorfile_add(tf, "f32", MDC_TD_F32, 1, s6, f), MDC_ERR_INVALID);
    char p[512];
    path_of(p, sizeof p, "rt.safetensors");
    MDC_CHECK(mdc_safetensors_write(p, tf));

    mdc_tensorfile *rd;
    MDC_CHECK(mdc_safetensors_read(p, &rd));
    TU_CHECK(rd->count == tf->count, "%d tensors read, %d written", rd->count, tf->count);
    for (int i = 0; i < tf->count; i++) {
        const mdc_tensor *a = &tf->tensors[i], *b = mdc_tensorfile_find(rd, a->name);
        TU_CHECK(b != NULL, "tensor %s missing", a->name);
        if (!b) continue;
        TU_CHECK(a->dtype == b->dtype && a->ndim == b->ndim && a->nbytes == b->nbytes, "tensor %s header", a->name);
        for (int d = 0; d < a->ndim; d++) TU_CHECK(a->shape[d] == b->shape[d], "%s dim %d", a->name, d);
        TU_CHECK(a->nbytes == 0 || !memcmp(a->data, b->data, a->nbytes), "tensor %s data differs", a->name);
    }
    TU_CHECK(rd->count > 0 && !strcmp(rd->tensors[0].name, "f32"), "file order kept");
    const char *m = mdc_tensorfile_get_meta(rd, "n_head");
    TU_CHECK(m && !strcmp(m, "3"), "metadata n_head = %s", m ? m : "(null)");
    float back[6];
    MDC_CHECK(mdc_tensor_to_f32(mdc_tensorfile_find(rd, "f16"), back, 6));
    TU_EQ_DBL(back[0], 1.5f);
    TU_EQ_DBL(back[3], 65504.0f);
    TU_CHECK(isinf(back[5]), "1e30 in f16 is inf, got %g", back[5]);
    MDC_CHECK(mdc_tensor_to_f32(mdc_tensorfile_find(rd, "bf16"), back, 6));
    TU_EQ_DBL(back[1], -2.25f);
    int32_t ib[6];
    TU_STATUS(mdc_tensor_to_i32(mdc_tensorfile_find(rd, "i64"), ib, 6), MDC_ERR_FORMAT);
    TU_CONTAINS(mdc_detail(), "i64");
    MDC_CHECK(mdc_tensor_to_i32(mdc_tensorfile_find(rd, "i32"), ib, 6));
    TU_CHECK(ib[2] == 2147483647, "i32 round trip");
    /* the header is padded to 8 bytes */
    unsigned char *raw;
    size_t len;
    MDC_CHECK(mdc_read_file(p, 1 << 20, &raw, &len));
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | raw[i];
    TU_CHECK(hl % 8 == 0, "header length %llu not a multiple of 8", (unsigned long long)hl);
    free(raw);
    mdc_tensorfile_free(rd);
    mdc_tensorfile_free(tf);
    mdc_tensorfile_free(NULL);
}

/* Builds a safetensors buffer from a header string and `data_len` data bytes. */
static unsigned char *st_buf(const char *header, size_t data_len, size_t *len) {
    size_t hl = strlen(header);
    *len = 8 + hl + data_len;
    unsigned char *b = calloc(1, *len);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, header, hl);
    return b;
}

static void expect_st_fail(const char *what, const char *header, size_t data_len, const char *needle) {
    size_t len;
    unsigned char *b = st_buf(header, data_len, &len);
    mdc_tensorfile *tf = (mdc_tensorfile *)1;
    mdc_status st = mdc_safetensors_parse(b, len, what, &tf);
    TU_CHECK(st == MDC_ERR_FORMAT, "%s: got %s (%s)", what, mdc_strerror(st), mdc_detail());
    TU_CHECK(tf == NULL, "%s: out not cleared", what);
    TU_CONTAINS(mdc_detail(), what);
    if (needle) TU_CONTAINS(mdc_detail(), needle);
    mdc_tensorfile_free(tf);
    free(b);
}

static void test_safetensors_malformed(void) {
    const char *ok = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    size_t len;
    unsigned char *b = st_buf(ok, 8, &len);
    mdc_tensorfile *tf;
    MDC_CHECK(mdc_safetensors_parse(b, len, "ok.st", &tf));
    mdc_tensorfile_free(tf);
    /* header length beyond the file, or absurd */
    b[0] = 0xff;
    TU_STATUS(mdc_safetensors_parse(b, len, "hl.st", &tf), MDC_ERR_FORMAT);
    TU_CONTAINS(mdc_detail(), "header length");
    memset(b, 0xff, 8);
    TU_STATUS(mdc_safetensors_parse(b, len, "hl2.st", &tf), MDC_ERR_FORMAT);
    TU_STATUS(mdc_safetensors_parse(b, 5, "short.st", &tf), MDC_ERR_FORMAT);
    free(b);
    expect_st_fail("dtype.st", "{\"w\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "'w'");
    expect_st_fail("size.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "'w'");
    expect_st_fail("past.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "'w'");
    expect_st_fail("cover.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12, "cover");
    expect_st_fail("gap.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "gap");
    expect_st_fail("overlap.st",
                   "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                   8, "overlaps");
    expect_st_fail("huge.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
                   "overflow");
    expect_st_fail("neg.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "shape[0]");
    expect_st_fail("frac.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8, "shape[0]");
    expect_st_fail("big.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,1e300]}}", 8, "'w'");
    expect_st_fail("rev.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 8, "'w'");
    expect_st_fail("extra.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8, "'x'");
    expect_st_fail("miss.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "data_offsets");
    expect_st_fail("dup.st",
                   "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                   "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                   8, "twice");
    expect_st_fail("json.st", "{\"w\":{\"dtype\":\"F32\",", 8, NULL);
    expect_st_fail("trail.st", "{}xx", 0, "after");
    expect_st_fail("notobj.st", "[1,2]", 0, NULL);
    expect_st_fail("meta.st", "{\"__metadata__\":{\"k\":1}}", 0, "'k'");
    expect_st_fail("dims.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
                   "dims");
    /* nesting far beyond any real header must not recurse without bound */
    char deep[4096];
    int n = 0;
    n += sprintf(deep, "{\"w\":");
    for (int i = 0; i < 1500; i++) deep[n++] = '[';
    deep[n] = 0;
    expect_st_fail("deep.st", deep, 0, NULL);
    /* spaces after the object (the reference writer pads) are fine */
    b = st_buf("{\"__metadata__\":{\"k\":\"v\"}}      ", 0, &len);
    MDC_CHECK(mdc_safetensors_parse(b, len, "pad.st", &tf));
    TU_CHECK(tf->count == 0 && !strcmp(mdc_tensorfile_get_meta(tf, "k"), "v"), "metadata-only file");
    mdc_tensorfile_free(tf);
    free(b);
    TU_STATUS(mdc_safetensors_read("/nonexistent/x.safetensors", &tf), MDC_ERR_IO);
    TU_CONTAINS(mdc_detail(), "/nonexistent/x.safetensors");
}

static void test_npy(void) {
    char p[512];
    path_of(p, sizeof p, "a.npy");
    mdc_tensor t = {0}, r;
    int32_t v[6] = {1, 2, 3, 4, 5, -6};
    t.name = "a";
    t.dtype = MDC_TD_I32;
    t.ndim = 2;
    t.shape[0] = 2;
    t.shape[1] = 3;
    t.numel = 6;
    t.nbytes = 24;
    t.data = v;
    MDC_CHECK(mdc_npy_write(p, &t));
    MDC_CHECK(mdc_npy_read(p, &r));
    TU_CHECK(r.dtype == MDC_TD_I32 && r.ndim == 2 && r.shape[0] == 2 && r.shape[1] == 3, "npy header");
    TU_CHECK(r.data && !memcmp(r.data, v, 24), "npy data");
    TU_CHECK(!strcmp(r.name, p), "npy name is the path");
    mdc_tensor_clear(&r);
    mdc_tensor_clear(NULL);
    t.dtype = MDC_TD_BF16;
    TU_STATUS(mdc_npy_write(p, &t), MDC_ERR_UNSUPPORTED);

    /* hand-made headers: versions 1/2/3, odd spacing, one-dim and scalar shapes */
    struct {
        const char *hdr;
        int major;
        size_t data;
        mdc_status want;
        const char *needle;
    } cases[] = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 1, 12, MDC_OK, NULL},
        {"{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(3,)}", 2, 12, MDC_OK, NULL},
        {"{'shape': (), 'descr': '<i8', 'fortran_order': False}", 3, 8, MDC_OK, NULL},
        {"{'descr': '<u2', 'fortran_order': True, 'shape': (1, 5)}", 1, 10, MDC_OK, NULL},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3)}", 1, 24, MDC_ERR_UNSUPPORTED, "Fortran"},
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (3,)}", 1, 12, MDC_ERR_UNSUPPORTED, "big-endian"},
        {"{'descr': '<c8', 'fortran_order': False, 'shape': (3,)}", 1, 24, MDC_ERR_UNSUPPORTED, "c8"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", 1, 8, MDC_ERR_FORMAT, "data bytes"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}", 1, 12, MDC_ERR_FORMAT, "'x'"},
        {"{'descr': '<f4', 'shape': (3,)}", 1, 12, MDC_ERR_FORMAT, "fortran_order"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-3,)}", 1, 12, MDC_ERR_FORMAT, "shape[0]"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", 1, 12, MDC_ERR_FORMAT, NULL},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", 1, 12, MDC_ERR_FORMAT,
         "overflow"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} junk", 1, 12, MDC_ERR_FORMAT, "after"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,", 1, 12, MDC_ERR_FORMAT, NULL},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", 4, 12, MDC_ERR_UNSUPPORTED, "version"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        unsigned char buf[512] = {0x93, 'N', 'U', 'M', 'P', 'Y', (unsigned char)cases[c].major, 0};
        size_t pre = cases[c].major == 1 ? 10 : 12, hl = strlen(cases[c].hdr) + 1;
        for (size_t i = 0; i < pre - 8; i++) buf[8 + i] = (unsigned char)(hl >> (8 * i));
        memcpy(buf + pre, cases[c].hdr, hl - 1);
        buf[pre + hl - 1] = '\n';
        char label[32];
        snprintf(label, sizeof label, "case%zu.npy", c);
        mdc_status st = mdc_npy_parse(buf, pre + hl + cases[c].data, label, &r);
        TU_CHECK(st == cases[c].want, "npy case %zu: got %s (%s), want %s", c, mdc_strerror(st), mdc_detail(),
                 mdc_strerror(cases[c].want));
        if (st) {
            TU_CONTAINS(mdc_detail(), label);
            if (cases[c].needle) TU_CONTAINS(mdc_detail(), cases[c].needle);
            TU_CHECK(r.data == NULL && r.name == NULL, "npy case %zu: out not cleared", c);
        }
        mdc_tensor_clear(&r);
    }
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/mdc_tf_%d", (int)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    if (system(cmd)) return 1;
    test_safetensors_roundtrip();
    test_safetensors_malformed();
    test_npy();
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) return 1;
    return tu_finish("test_tensorfile");
}

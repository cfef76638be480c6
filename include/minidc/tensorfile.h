/* Tensor files: safetensors and .npy, read and written with strict validation.
 *
 * A tensor here is a name, a dtype, a shape (up to MDC_TENSOR_MAX_DIMS dims; 0 dims = scalar)
 * and a host buffer it owns. A tensor file (mdc_tensorfile) is an ordered list of tensors plus
 * the safetensors `__metadata__` string map. Readers never mmap: they read the header, validate
 * every field against the file size before allocating anything, then read each tensor's bytes
 * into its own buffer. A malformed file gives MDC_ERR_FORMAT (MDC_ERR_UNSUPPORTED for a valid
 * but unsupported feature such as big-endian .npy) with a detail naming the file, the tensor and
 * the field; never a crash or an out-of-bounds read. Formats and rules: docs/tensor-files.md. */
#ifndef MINIDC_TENSORFILE_H
#define MINIDC_TENSORFILE_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "minidc/device.h" /* mdc_atomic_*: the atomic writer */
#include "minidc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MDC_TENSOR_MAX_DIMS 8
/* Largest safetensors JSON header accepted (the Rust reference uses the same bound). */
#define MDC_SAFETENSORS_MAX_HEADER (100u << 20)

typedef enum {
    MDC_TD_F32 = 0,
    MDC_TD_F16,
    MDC_TD_BF16,
    MDC_TD_F64,
    MDC_TD_I64,
    MDC_TD_I32,
    MDC_TD_I16,
    MDC_TD_I8,
    MDC_TD_U64,
    MDC_TD_U32,
    MDC_TD_U16,
    MDC_TD_U8,
    MDC_TD_BOOL,
    MDC_TD_COUNT
} mdc_tdtype;

/* "F32", "BF16", ... (the safetensors spelling); "?" for an invalid value. */
const char *mdc_tdtype_name(mdc_tdtype dt);
/* Bytes per element; 0 for an invalid value. */
size_t mdc_tdtype_size(mdc_tdtype dt);
/* Parses a safetensors dtype name; MDC_ERR_FORMAT if unknown (no detail set: callers name the
 * file and tensor). */
mdc_status mdc_tdtype_from_name(const char *name, mdc_tdtype *out);

typedef struct {
    char *name; /* owned, NUL-terminated */
    mdc_tdtype dtype;
    int ndim; /* 0..MDC_TENSOR_MAX_DIMS; 0 = scalar (1 element) */
    int64_t shape[MDC_TENSOR_MAX_DIMS];
    size_t numel;  /* product of shape */
    size_t nbytes; /* numel * dtype size */
    void *data;    /* owned; NULL when nbytes == 0 */
} mdc_tensor;

/* Element count of a shape with overflow check: MDC_ERR_FORMAT (no detail) on a negative dim,
 * more than MDC_TENSOR_MAX_DIMS dims, or a product * elem_size that overflows size_t or exceeds
 * 2^53 bytes. *numel and *nbytes are set on success. */
mdc_status mdc_shape_bytes(int ndim, const int64_t *shape, size_t elem_size, size_t *numel, size_t *nbytes);

/* Frees a tensor's name and data (not the struct itself); NULL is a no-op. */
void mdc_tensor_clear(mdc_tensor *t);

/* Converts a F32/F16/BF16/F64 tensor to n floats (n must equal numel). MDC_ERR_MISMATCH naming
 * the tensor on a wrong dtype or count. */
mdc_status mdc_tensor_to_f32(const mdc_tensor *t, float *dst, size_t n);
/* Converts an integer tensor (I64/I32/I16/I8/U64/U32/U16/U8) to n ints; a value outside
 * [INT32_MIN, INT32_MAX] gives MDC_ERR_FORMAT naming the tensor and the index. */
mdc_status mdc_tensor_to_i32(const mdc_tensor *t, int32_t *dst, size_t n);

/* ---- a list of named tensors plus metadata ------------------------------------------------ */

typedef struct {
    int count, cap;
    mdc_tensor *tensors; /* count entries, file order */
    int meta_count, meta_cap;
    char **meta_keys, **meta_values; /* __metadata__, owned */
} mdc_tensorfile;

/* An empty list. Free with mdc_tensorfile_free. */
mdc_status mdc_tensorfile_new(mdc_tensorfile **out);
/* Frees every tensor, the metadata and the struct; NULL is a no-op. */
void mdc_tensorfile_free(mdc_tensorfile *tf);

/* Appends a tensor, copying name, shape and nbytes of `data` (data may be NULL for zeros).
 * MDC_ERR_INVALID on a duplicate or empty name, a bad dtype or shape; MDC_ERR_OOM_HOST. */
mdc_status mdc_tensorfile_add(mdc_tensorfile *tf, const char *name, mdc_tdtype dt, int ndim, const int64_t *shape,
                              const void *data);
/* Appends an F32 tensor converted to `dt` (F32, F16 or BF16, round to nearest even; I32 for
 * integer values, e.g. a dump's expert choices). */
mdc_status mdc_tensorfile_add_f32(mdc_tensorfile *tf, const char *name, mdc_tdtype dt, int ndim, const int64_t *shape,
                                  const float *data);
/* The tensor called `name`, or NULL. */
const mdc_tensor *mdc_tensorfile_find(const mdc_tensorfile *tf, const char *name);
/* Sets (or replaces) a metadata entry; copies both strings. */
mdc_status mdc_tensorfile_set_meta(mdc_tensorfile *tf, const char *key, const char *value);
/* A metadata value, or NULL. */
const char *mdc_tensorfile_get_meta(const mdc_tensorfile *tf, const char *key);

/* ---- safetensors ----------------------------------------------------------------------- */

/* Reads a safetensors file. Validation: file at least 8 bytes; header length N with
 * 2 <= N <= MDC_SAFETENSORS_MAX_HEADER and 8 + N <= file size; the header a JSON object
 * (trailing spaces allowed) whose entries are `__metadata__` (an object of strings) or tensors
 * {"dtype": known, "shape": [non-negative integers], "data_offsets": [begin, end]} with no
 * other keys; integers exact; shape bytes == end - begin; sorted by offset the tensors tile the
 * data area exactly (no gap, no overlap, last end == file size - 8 - N); names unique and
 * non-empty; the header UTF-8 with no NUL character (raw or \u0000). *out is NULL on failure. */
mdc_status mdc_safetensors_read(const char *path, mdc_tensorfile **out);
/* The same from a memory buffer; `label` names it in errors (fuzzing, tests). */
mdc_status mdc_safetensors_parse(const void *buf, size_t len, const char *label, mdc_tensorfile **out);
/* Writes tensors in list order with the header padded with spaces to a multiple of 8 bytes,
 * as the reference writer does. Writes to PATH.tmp then renames, so a crash never leaves a
 * half-written file under the final name. */
mdc_status mdc_safetensors_write(const char *path, const mdc_tensorfile *tf);

/* ---- .npy ------------------------------------------------------------------------------ */

/* Reads a .npy file (format 1.0, 2.0 or 3.0; little-endian or byte-order-free descr; C order;
 * dtypes f8 f4 f2 i8 i4 i2 i1 u8 u4 u2 u1 b1). The tensor's name is the file's path.
 * Validation: magic, version, header length within the file, header a dict literal with exactly
 * 'descr', 'fortran_order', 'shape', data bytes == shape x itemsize. Fortran order and
 * big-endian give MDC_ERR_UNSUPPORTED. On failure *out is cleared. */
mdc_status mdc_npy_read(const char *path, mdc_tensor *out);
mdc_status mdc_npy_parse(const void *buf, size_t len, const char *label, mdc_tensor *out);
/* Writes format 1.0 (2.0 if the header needs it), header padded to 64 bytes. BF16 has no
 * numpy dtype: MDC_ERR_UNSUPPORTED. */
mdc_status mdc_npy_write(const char *path, const mdc_tensor *t);

/* Reads a whole file into a new buffer (*out, *len); refuses files larger than max_bytes.
 * MDC_ERR_IO naming the path. */
mdc_status mdc_read_file(const char *path, size_t max_bytes, unsigned char **out, size_t *len);

#ifdef __cplusplus
}
#endif
#endif

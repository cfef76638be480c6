/* What a datatype is to minidc: how a reduction's predefined type and op map to minidc's
 * (by the type's size, measured), and how data movement takes any datatype as bytes.
 *
 * A predefined type is contiguous: `count` elements are `count * size` plain bytes, used where
 * they are. A derived type is packed into contiguous scratch before the collective and
 * unpacked after (PMPI_Pack / PMPI_Unpack, local calls): MPICH's packed form of `count`
 * elements is their type signature's bytes in order, which is what a predefined type with the
 * same signature holds. So every rank runs a data-movement call on minidc, whatever types the
 * ranks pass: MPI lets a root use a derived type while the other ranks use predefined ones
 * (equal type signatures), and deciding per rank would send the root to MPICH and the others
 * to minidc, and hang. Negative displacements are legal too (the buffer pointer need not be
 * the lowest address): for plain types the lowest block becomes the base of minidc's byte
 * offsets. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

/* A predefined (named) datatype whose size equals its extent: any such buffer is `count *
 * size` plain bytes. */
size_t ip_plain_size(MPI_Datatype t) {
    if (t == MPI_DATATYPE_NULL) return 0;
    int ni, na, nd, comb;
    if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS || comb != MPI_COMBINER_NAMED) return 0;
    int size = 0;
    MPI_Aint lb, extent;
    PMPI_Type_size(t, &size);
    PMPI_Type_get_extent(t, &lb, &extent);
    return size > 0 && lb == 0 && extent == size ? (size_t)size : 0;
}

/* How minidc reduces a predefined MPI type: as `mult` elements of `dt` per MPI element, for
 * the ops in `ops` (bit per mdc_op). Types are matched by name and mapped by their size, never
 * assumed (a Fortran REAL compiled as 8 bytes reduces as f64).
 * - Floating point (float, double, Fortran REAL, DOUBLE PRECISION, REAL4/8): every op.
 * - Signed integers of 4 and 8 bytes (int, long, long long, int32/64_t, Fortran INTEGER,
 *   INTEGER4/8, MPI_AINT, MPI_OFFSET, MPI_COUNT): every op. uint8_t / unsigned char: every op.
 * - Other integers of 1, 4 and 8 bytes (signed char, int8_t, INTEGER1, unsigned, unsigned
 *   long (long), uint32/64_t): sum and prod only, on the same-sized type minidc has. Both
 *   wrap modulo 2^bits, so the bits are those of the unsigned/signed result; min and max
 *   compare differently and go to MPICH.
 * - Complex (C float/double _Complex, Fortran COMPLEX, DOUBLE COMPLEX, COMPLEX8/16, C++):
 *   sum only, as 2 floats (doubles) per element: real and imaginary parts add separately,
 *   each in the algorithm's documented order. prod goes to MPICH. */
typedef struct {
    int dt, mult;
    unsigned ops;
} reducible;

#define ALL_OPS ((1u << MDC_SUM) | (1u << MDC_PROD) | (1u << MDC_MIN) | (1u << MDC_MAX))
#define WRAP_OPS ((1u << MDC_SUM) | (1u << MDC_PROD))

static int is_one_of(MPI_Datatype t, const MPI_Datatype *list, int n) {
    for (int i = 0; i < n; i++)
        if (list[i] != MPI_DATATYPE_NULL && t == list[i]) return 1;
    return 0;
}

static reducible reduce_dtype(MPI_Datatype t) {
    static const MPI_Datatype floats[] = {MPI_FLOAT, MPI_DOUBLE, MPI_REAL, MPI_DOUBLE_PRECISION, MPI_REAL4, MPI_REAL8};
    static const MPI_Datatype ints[] = {MPI_INT,      MPI_LONG,    MPI_LONG_LONG, MPI_LONG_LONG_INT,
                                        MPI_INT32_T,  MPI_INT64_T, MPI_INTEGER,   MPI_INTEGER4,
                                        MPI_INTEGER8, MPI_AINT,    MPI_OFFSET,    MPI_COUNT};
    static const MPI_Datatype u8s[] = {MPI_UINT8_T, MPI_UNSIGNED_CHAR};
    static const MPI_Datatype wraps[] = {MPI_SIGNED_CHAR, MPI_INT8_T,        MPI_INTEGER1,
                                         MPI_UNSIGNED,    MPI_UNSIGNED_LONG, MPI_UNSIGNED_LONG_LONG,
                                         MPI_UINT32_T,    MPI_UINT64_T};
    static const MPI_Datatype complexes[] = {MPI_C_FLOAT_COMPLEX,   MPI_C_DOUBLE_COMPLEX,  MPI_COMPLEX,
                                             MPI_DOUBLE_COMPLEX,    MPI_COMPLEX8,          MPI_COMPLEX16,
                                             MPI_CXX_FLOAT_COMPLEX, MPI_CXX_DOUBLE_COMPLEX};
#define N_(a) ((int)(sizeof(a) / sizeof(a[0])))
    reducible r = {-1, 1, 0};
    size_t s = ip_plain_size(t);
    if (!s) return r;
    if (is_one_of(t, floats, N_(floats))) {
        r.dt = s == 4 ? MDC_F32 : s == 8 ? MDC_F64 : -1;
        r.ops = ALL_OPS;
    } else if (is_one_of(t, ints, N_(ints))) {
        r.dt = s == 4 ? MDC_I32 : s == 8 ? MDC_I64 : -1;
        r.ops = ALL_OPS;
    } else if (is_one_of(t, u8s, N_(u8s))) {
        r.dt = s == 1 ? MDC_U8 : -1;
        r.ops = ALL_OPS;
    } else if (is_one_of(t, wraps, N_(wraps))) {
        r.dt = s == 1 ? MDC_U8 : s == 4 ? MDC_I32 : s == 8 ? MDC_I64 : -1;
        r.ops = WRAP_OPS;
    } else if (is_one_of(t, complexes, N_(complexes))) {
        r.dt = s == 8 ? MDC_F32 : s == 16 ? MDC_F64 : -1;
        r.mult = 2;
        r.ops = 1u << MDC_SUM;
    }
#undef N_
    return r;
}

static int reduce_op(MPI_Op op) {
    if (op == MPI_SUM) return MDC_SUM;
    if (op == MPI_PROD) return MDC_PROD;
    if (op == MPI_MIN) return MDC_MIN;
    if (op == MPI_MAX) return MDC_MAX;
    return -1;
}

int ip_reduction_ok(int f, MPI_Datatype type, MPI_Op op, mdc_dtype *dt, mdc_op *mop, int *mult) {
    reducible d = reduce_dtype(type);
    int o = reduce_op(op), len = 0;
    char name[MPI_MAX_OBJECT_NAME] = "?";
    if (ip_verbosity() && (d.dt < 0 || o < 0 || !(d.ops & (1u << o)))) {
        PMPI_Type_get_name(type, name, &len);
        if (!len) snprintf(name, sizeof name, "(derived, unnamed)");
    }
    if (d.dt < 0)
        return ip_fallback(f,
                           "datatype %s is not one minidc reduces (floating point, "
                           "integers of 1, 4 or 8 bytes, complex)",
                           name);
    if (o < 0) return ip_fallback(f, "not a predefined op minidc has (sum, prod, min, max)");
    if (!(d.ops & (1u << o)))
        return ip_fallback(f,
                           "%s of %s (minidc does sum and prod of unsigned and 1-byte signed "
                           "integers, sum of complex)",
                           mdc_op_name((mdc_op)o), name);
    *dt = (mdc_dtype)d.dt;
    *mop = (mdc_op)o;
    *mult = d.mult;
    return 1;
}

size_t ip_type_size(MPI_Datatype t) {
    int s = 0;
    if (t != MPI_DATATYPE_NULL) PMPI_Type_size(t, &s);
    return s > 0 ? (size_t)s : 0;
}

static MPI_Aint type_extent(MPI_Datatype t) {
    MPI_Aint lb = 0, ext = 0;
    if (t != MPI_DATATYPE_NULL) PMPI_Type_get_extent(t, &lb, &ext);
    return ext;
}

char *ip_scratch(MPI_Comm comm, int f, size_t bytes, int *rc) {
    char *p = malloc(bytes ? bytes : 1);
    if (!p) *rc = ip_report(comm, f, MPI_ERR_NO_MEM, "no memory to pack a derived datatype (%zu bytes)", bytes);
    return p;
}

/* MPI's pack counts are ints, so larger derived-type buffers are refused, clearly. */
static int too_large(MPI_Comm comm, int f, size_t count, size_t bytes) {
    if (count <= INT_MAX && bytes <= INT_MAX) return MPI_SUCCESS;
    return ip_report(comm, f, MPI_ERR_COUNT,
                     "%zu bytes of a derived datatype (minidc packs at "
                     "most 2 GiB per buffer)",
                     bytes);
}

/* Packs `count` elements of `t` at `buf` into `out` (`bytes` = their signature bytes), or the
 * reverse. */
static int pack(MPI_Comm comm, int f, const void *buf, size_t count, MPI_Datatype t, void *out, size_t bytes,
                int unpack) {
    if (!bytes) return MPI_SUCCESS;
    int rc = too_large(comm, f, count, bytes);
    if (rc) return rc;
    int pos = 0;
    rc = unpack ? PMPI_Unpack(out, (int)bytes, &pos, (void *)buf, (int)count, t, comm)
                : PMPI_Pack(buf, (int)count, t, out, (int)bytes, &pos, comm);
    if (rc != MPI_SUCCESS)
        return ip_report(comm, f, rc, "PMPI_%s of a derived datatype failed", unpack ? "Unpack" : "Pack");
    return MPI_SUCCESS;
}

/* Whether `count` elements of derived type `t` (`bytes` signature bytes) can be packed or
 * unpacked, asked before any message moves: a rank that found out only when unpacking what it
 * received would leave nothing wrong behind, but a root that cannot pack would leave the
 * others waiting for data that never comes. Every rank asks of its own types, so all ranks of
 * a program that passes an uncommitted type on every rank (as MPICH does) return the error at
 * once. A zero-count PMPI_Pack checks the type (committed, valid) and reports on `comm`. */
static int packable(MPI_Comm comm, int f, MPI_Datatype t, size_t count, size_t bytes) {
    if (!count) return MPI_SUCCESS;
    int rc = too_large(comm, f, count, bytes);
    if (rc) return rc;
    char none[1] = {0};
    int pos = 0;
    rc = PMPI_Pack(none, 0, t, none, 0, &pos, comm);
    if (rc != MPI_SUCCESS) return ip_report(comm, f, rc, "the derived datatype cannot be packed (not committed?)");
    return MPI_SUCCESS;
}

void *ip_elem(const void *buf, MPI_Datatype t, long long i) { return (char *)buf + (MPI_Aint)i * type_extent(t); }

/* The program's error: the type signatures must match. */
int ip_size_mismatch(MPI_Comm comm, int f, size_t sent, size_t block) {
    return ip_report(comm, f, MPI_ERR_TRUNCATE,
                     "this rank sends %zu bytes but receives blocks of %zu "
                     "(send and receive type signatures must match)",
                     sent, block);
}

int ip_stage(MPI_Comm comm, int f, int spack, const void *sbuf, size_t scount, MPI_Datatype stype, size_t sbytes,
             char **sp, int rpack, size_t rcount, MPI_Datatype rtype, size_t rbytes, char **rp) {
    int rc = MPI_SUCCESS;
    *sp = *rp = NULL;
    if ((spack && ((rc = packable(comm, f, stype, scount, sbytes)) || !(*sp = ip_scratch(comm, f, sbytes, &rc)) ||
                   (rc = pack(comm, f, sbuf, scount, stype, *sp, sbytes, 0)))) ||
        (rpack && ((rc = packable(comm, f, rtype, rcount, rbytes)) || !(*rp = ip_scratch(comm, f, rbytes, &rc))))) {
        free(*sp);
        free(*rp);
        *sp = *rp = NULL;
    }
    return rc;
}

int ip_unstage(MPI_Comm comm, int f, mdc_status st, void *recvbuf, size_t rcount, MPI_Datatype rtype, char *sp,
               char *rp, size_t rbytes) {
    int rc = st == MDC_OK ? MPI_SUCCESS : ip_failed(comm, f, st);
    if (rc == MPI_SUCCESS && rp) rc = pack(comm, f, recvbuf, rcount, rtype, rp, rbytes, 1);
    free(sp);
    free(rp);
    return rc;
}

char *ip_v_layout(void *buf, MPI_Datatype t, int plain, const int counts[], const int displs[], int n, size_t *len,
                  size_t *off, size_t *total) {
    size_t s = ip_type_size(t);
    long long low = 0;
    for (int i = 0; plain && i < n; i++)
        if (displs[i] < low) low = displs[i];
    *total = 0;
    for (int i = 0; i < n; i++) {
        len[i] = (size_t)counts[i] * s;
        off[i] = plain ? (size_t)(displs[i] - low) * s : *total;
        *total += len[i];
    }
    return plain ? (char *)buf + low * (long long)s : NULL;
}

int ip_v_packable(MPI_Comm comm, int f, MPI_Datatype t, const int counts[], int n, const size_t *len) {
    int rc = MPI_SUCCESS;
    for (int i = 0; i < n && !rc; i++) rc = packable(comm, f, t, (size_t)counts[i], len[i]);
    return rc;
}

int ip_v_pack(MPI_Comm comm, int f, void *buf, MPI_Datatype t, const int counts[], const int displs[], int n, char *pk,
              const size_t *len, const size_t *off, int unpack) {
    int rc = MPI_SUCCESS;
    for (int i = 0; i < n && !rc; i++)
        rc = pack(comm, f, ip_elem(buf, t, displs[i]), (size_t)counts[i], t, pk + off[i], len[i], unpack);
    return rc;
}

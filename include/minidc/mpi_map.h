/* minidc's dtypes and ops as MPI's, for the programs that compare minidc with MPICH (the
 * collective benchmark, the conformance tests): named once. MPI_DATATYPE_NULL for the types MPI
 * does not have (f16, bf16, the exact accumulators); avg has no MPI op (MPI_OP_NULL). */
#ifndef MINIDC_MPI_MAP_H
#define MINIDC_MPI_MAP_H

#include <mpi.h>

#include "minidc/collectives.h"

static inline MPI_Datatype mdc_mpi_type(mdc_dtype t) {
    switch (t) {
    case MDC_F32: return MPI_FLOAT;
    case MDC_F64: return MPI_DOUBLE;
    case MDC_I32: return MPI_INT32_T;
    case MDC_I64: return MPI_INT64_T;
    case MDC_U8: return MPI_UINT8_T;
    default: return MPI_DATATYPE_NULL;
    }
}

static inline MPI_Op mdc_mpi_op(mdc_op op) {
    switch (op) {
    case MDC_SUM: return MPI_SUM;
    case MDC_PROD: return MPI_PROD;
    case MDC_MIN: return MPI_MIN;
    case MDC_MAX: return MPI_MAX;
    default: return MPI_OP_NULL;
    }
}

#endif

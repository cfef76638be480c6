/* Tensor dumps at the model's sites (ref/model/dump.c) and their reassembly into global tensors
 * (datasets/dump_assemble.c); docs/oracle.md.
 *
 * With a dump attached, every forward and backward of the model appends, per micro-batch, the
 * tensors at its sites: the residual stream at every block boundary (h.N.in, h.N.out), each
 * LayerNorm's output, the attention's qkv and output, each linear's product, the GELU, a MoE
 * block's router probabilities, its experts' outputs back at the tokens and their gated sum,
 * ln_f, the logits and the losses; the backward the gradient of each (grad.h.N.in, ...; a MoE
 * block's of its sum). A tensor a communication point changes is dumped before it too, under
 * the same name with ":pre" (the partial sums before the tensor-parallel reduction, a sequence
 * shard before the SP all-gather), so a difference that starts at a collective shows there.
 * Each entry is this rank's piece of a global tensor, named in the file
 * "step<S>.mb<K>.<site>" (K the micro-batch's index in the global batch), with its global
 * tensor "step<S>.<site>", the global shape, the piece's place (per dimension, runs of local
 * start, global start and length) and whether the pieces are summed (partial sums) or copies,
 * in __metadata__ under "dump:" + the entry's name. */
#ifndef MINIDC_DUMP_H
#define MINIDC_DUMP_H

#include "minidc/model.h"
#include "minidc/tensorfile.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MDC_DUMP_FORMAT "minidc-dump 1"

/* Attaches tf (borrowed; NULL detaches): the coming forwards and backwards add their sites'
 * tensors to it. step: the step's number in the names; batch: the global batch in rows (the
 * micro-batches' rows are placed in it by the activation set's row0). */
mdc_status mdc_gpt2_set_dump(mdc_gpt2 *m, mdc_tensorfile *tf, int step, int batch);
/* This rank's gradient of every parameter it holds as pieces of the global tensors
 * ("step<S>.grad.<name>"), after the step's reductions (the pieces of replicas are copies). */
mdc_status mdc_gpt2_dump_grads(mdc_gpt2 *m, mdc_tensorfile *tf, int step);
/* A run of local tensor i's gradient (ZeRO's shard segments): grad holds its n elements from
 * element `at` of the tensor (row-major; wte's padding rows are left out). */
mdc_status mdc_gpt2_dump_grad_piece(mdc_gpt2 *m, mdc_tensorfile *tf, int step, int i, const float *grad, size_t at,
                                    size_t n);

/* Reads a dump: a directory of rank files (every *.safetensors in it) or one file. The pieces
 * of every global tensor are placed (copies must agree bit for bit; partial sums are added in
 * rank-file order) into *out in execution order. A file without dump entries is returned as
 * it is (a plain tensor file). MDC_ERR_MISMATCH names the tensor and the files when copies
 * differ, pieces leave a hole, files come from different runs or two files claim one rank of one
 * step; MDC_ERR_FORMAT a bad entry or dump.rank, or a global tensor larger than the files can
 * fill (checked before it is allocated); MDC_ERR_IO an unreadable directory, with the reason. */
mdc_status mdc_dump_read(const char *path, mdc_tensorfile **out);

#ifdef __cplusplus
}
#endif
#endif

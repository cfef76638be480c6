/* --check-serial (tools/train_check.c): rank 0 trains the serial model on the same global batch
 * beside the mesh and compares them by a criterion a correct run passes on every CPU, compiler
 * and BLAS kernel set (docs/oracle.md, "What --check-serial asserts"):
 *   1. the first step's loss, from the same parameters: relative difference <= 1e-5;
 *   2. the first step's gradients (AdamW's first moment after that step holds (1 - beta1) g on
 *      every mesh and ZeRO stage), normwise over all tensors <= 1e-5 and per tensor <= 1e-3 of
 *      max(||g_t||, ||g|| sqrt(n_t / n)) (a tensor whose true gradient is 0 is measured against
 *      the typical gradient of its size, not against its own rounding noise);
 *   3. every parameter within the distance AdamW's update can move two runs apart
 *      (2 lr U_t per step, U_t the bound on |m^/sqrt(v^)|), and every later loss within what
 *      that distance allows (|dL| <= 1e-5 |L| + ||g|| ||d theta||);
 * and prints the normwise parameter difference at the end beside them, not asserted: after
 * AdamW steps it measures how rounding noise was amplified, not whether a reduction was right.
 * In exact mode every loss and parameter must be identical bit for bit instead. */
#ifndef MINIDC_TOOLS_TRAIN_CHECK_H
#define MINIDC_TOOLS_TRAIN_CHECK_H

#include "minidc/train.h"

typedef struct mdc_serial_check mdc_serial_check;

/* Rank 0 passes the serial trainer (other ranks NULL); every rank calls every function below
 * (they gather). Create after a resumed checkpoint is loaded: it keeps the serial first moment
 * the first step starts from; precision MDC_PRECISION_* (16 bits: the first step's limits in the
 * dtype's unit roundoff). Fails with MDC_ERR_OOM_HOST. */
mdc_status mdc_serial_check_create(mdc_serial_check **out, const mdc_gpt2_config *cfg, const mdc_adamw_config *opt,
                                   mdc_trainer *ser, int exact, int precision);
/* After each step (loss and norm of both; ignored on ranks other than 0); the first call also
 * gathers the mesh's first moment and compares the gradients. */
mdc_status mdc_serial_check_step(mdc_serial_check *c, mdc_trainer *mesh, float loss, float sloss, float norm);
/* After the last step: gathers the parameters, prints the verdict on rank 0; *ok = 1 if passed. */
mdc_status mdc_serial_check_end(mdc_serial_check *c, mdc_trainer *mesh, int *ok);
void mdc_serial_check_free(mdc_serial_check *c);

#endif

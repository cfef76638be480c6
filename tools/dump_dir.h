/* --dump-dir of train and forward (tools/dump_dir.c). */
#ifndef MINIDC_TOOLS_DUMP_DIR_H
#define MINIDC_TOOLS_DUMP_DIR_H

#include <stddef.h>

#include "minidc/dump.h"
#include "minidc/mesh.h"
#include "minidc/train.h"

/* The directory exists (made if missing) and is writable, else MDC_ERR_INVALID naming opt,
 * the path and why; clean: an earlier run's rank files in it are removed (one rank does). */
mdc_status mdc_dump_dir_prepare(const char *opt, const char *dir, int clean);
/* A rank file's list with its metadata: the format, the run's id (every rank of one run the
 * same), the rank, the mesh coordinates. */
mdc_status mdc_dump_file_new(mdc_tensorfile **out, int rank, int size, unsigned long long run, const char *mesh);
/* dir/step<S>-rank<R>.safetensors, atomically. */
mdc_status mdc_dump_file_write(const char *dir, int step, int rank, const mdc_tensorfile *tf);
/* "tp 1/2, cp 0/1, ..." (this rank's coordinate / the axis size); "serial" without a mesh. */
void mdc_dump_mesh_text(const mdc_mesh *m, char *buf, size_t cap);

/* A run's id: rank 0's clock and pid, broadcast over world (NULL: this rank alone). */
mdc_status mdc_dump_run_id(mdc_group *world, unsigned long long *id);
/* One training step with its dump: the sites of every micro-batch, then the reduced parameter
 * gradients (ZeRO: this rank's shard), into dir/step<S>-rank<R>.safetensors. As
 * mdc_trainer_step otherwise. */
mdc_status mdc_dump_train_step(mdc_trainer *tr, const char *dir, unsigned long long run, int step, int batch,
                               const int *inputs, const int *targets, const mdc_adamw_config *o, float *loss,
                               float *norm);

#endif

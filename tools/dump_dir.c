/* --dump-dir D of train and forward (tools/dump_dir.h): the directory made ready before the
 * first step, and one file per rank and step, D/step<S>-rank<R>.safetensors, written
 * atomically with what a reader needs to put the pieces together (include/minidc/dump.h). */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dump_dir.h"

static int is_rank_file(const char *name) {
    unsigned s, r;
    char tail[16];
    return sscanf(name, "step%u-rank%u%15s", &s, &r, tail) == 3 && !strcmp(tail, ".safetensors");
}

mdc_status mdc_dump_dir_prepare(const char *opt, const char *dir, int clean) {
    if (!dir || !dir[0]) return mdc_fail(MDC_ERR_INVALID, "%s needs a directory", opt);
    struct stat s;
    if (stat(dir, &s) != 0 && (errno != ENOENT || (mkdir(dir, 0777) != 0 && errno != EEXIST)))
        return mdc_fail(MDC_ERR_INVALID, "%s %s: cannot create the directory: %s", opt, dir, strerror(errno));
    if (stat(dir, &s) != 0 || !S_ISDIR(s.st_mode))
        return mdc_fail(MDC_ERR_INVALID, "%s %s is not a directory", opt, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return mdc_fail(MDC_ERR_INVALID, "%s %s: the directory is not writable: %s", opt, dir, strerror(errno));
    if (!clean) return MDC_OK;
    /* an earlier run's rank files would mix with this run's */
    DIR *d = opendir(dir);
    if (!d) return mdc_fail(MDC_ERR_INVALID, "%s %s: %s", opt, dir, strerror(errno));
    mdc_status st = MDC_OK;
    for (struct dirent *e; !st && (e = readdir(d));) {
        if (!is_rank_file(e->d_name)) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) != 0)
            st = mdc_fail(MDC_ERR_INVALID, "%s %s: cannot remove an earlier run's %s: %s", opt, dir, e->d_name,
                          strerror(errno));
    }
    closedir(d);
    return st;
}

mdc_status mdc_dump_file_new(mdc_tensorfile **out, int rank, int size, unsigned long long run, const char *mesh) {
    mdc_status st = mdc_tensorfile_new(out);
    char v[64];
    if (!st) st = mdc_tensorfile_set_meta(*out, "dump.format", MDC_DUMP_FORMAT);
    snprintf(v, sizeof v, "%llx", run);
    if (!st) st = mdc_tensorfile_set_meta(*out, "dump.run", v);
    snprintf(v, sizeof v, "%d of %d", rank, size);
    if (!st) st = mdc_tensorfile_set_meta(*out, "dump.rank", v);
    if (!st && mesh) st = mdc_tensorfile_set_meta(*out, "dump.mesh", mesh);
    if (!st) st = mdc_tensorfile_set_meta(*out, "producer", "minidc");
    if (st) mdc_tensorfile_free(*out), *out = NULL;
    return st;
}

mdc_status mdc_dump_file_write(const char *dir, int step, int rank, const mdc_tensorfile *tf) {
    char path[4096];
    snprintf(path, sizeof path, "%s/step%d-rank%d.safetensors", dir, step, rank);
    return mdc_safetensors_write(path, tf);
}

void mdc_dump_mesh_text(const mdc_mesh *m, char *buf, size_t cap) {
    if (!m) {
        snprintf(buf, cap, "serial");
        return;
    }
    size_t o = 0;
    for (int a = 0; a < MDC_AXES && o < cap; a++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%s %d/%d", a ? ", " : "", mdc_axis_name((mdc_axis)a),
                              mdc_mesh_coord(m, (mdc_axis)a), mdc_mesh_size(m, (mdc_axis)a));
}

mdc_status mdc_dump_run_id(mdc_group *world, unsigned long long *id) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t v = ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 40);
    mdc_status st = world && mdc_group_size(world) > 1 ? mdc_bcast(&v, 1, MDC_I64, 0, world) : MDC_OK;
    *id = (unsigned long long)v;
    return st;
}

mdc_status mdc_dump_train_step(mdc_trainer *tr, const char *dir, unsigned long long run, int step, int batch,
                               const int *inputs, const int *targets, const mdc_adamw_config *o, float *loss,
                               float *norm) {
    const mdc_mesh *mesh = mdc_trainer_mesh(tr);
    mdc_group *world = mesh ? mdc_mesh_group(mesh, MDC_MESH_WORLD) : NULL;
    int rank = world ? mdc_group_rank(world) : 0, size = world ? mdc_group_size(world) : 1;
    mdc_gpt2 *m = mdc_trainer_model(tr);
    char text[256];
    mdc_dump_mesh_text(mesh, text, sizeof text);
    mdc_tensorfile *tf = NULL;
    mdc_status st = mdc_dump_file_new(&tf, rank, size, run, text);
    if (!st) st = mdc_gpt2_set_dump(m, tf, step, batch);
    if (!st) st = mdc_trainer_grads(tr, inputs, targets);
    mdc_gpt2_set_dump(m, NULL, 0, 0);
    if (!st) st = mdc_trainer_dump_grads(tr, tf, step); /* reduced over every group (ZeRO: the shard) */
    if (!st) st = mdc_trainer_finish_step(tr, o, loss, norm);
    if (!st) st = mdc_dump_file_write(dir, step, rank, tf);
    mdc_tensorfile_free(tf);
    return st;
}

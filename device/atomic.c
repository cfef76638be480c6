/* Atomic file writing (include/minidc/device.h, mdc_atomic_*), for every file minidc writes: the data goes to a new file
 * beside the destination, named after this process and a counter (so two writers of one path
 * never mix), created exclusively, fsync'd, renamed over the destination, and the directory
 * fsync'd: a crash or a full disk leaves the old file whole, never a truncated one. A symbolic
 * link is written through (the link stays, its target is replaced); a destination that is not
 * a regular file (device, FIFO, directory) is refused. Temporary files that a killed writer left
 * beside the destination (their process is gone) are removed before writing. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "minidc/device.h"

/* "<dir>/<base>.tmp.<pid>.<n>" files of dead processes beside dest: removed. */
static void remove_stale(const char *dest) {
    char *d = strdup(dest), *b = strdup(dest);
    if (!d || !b) goto done;
    const char *dir = dirname(d), *base = basename(b);
    char prefix[PATH_MAX];
    snprintf(prefix, sizeof prefix, "%s.tmp.", base);
    size_t pl = strlen(prefix);
    DIR *dh = opendir(dir);
    for (struct dirent *e; dh && (e = readdir(dh));) {
        if (strncmp(e->d_name, prefix, pl)) continue;
        char *end;
        long pid = strtol(e->d_name + pl, &end, 10);
        if (pid <= 0 || *end != '.') continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* its writer is alive (or not ours to judge) */
        char full[PATH_MAX];
        if (snprintf(full, sizeof full, "%s/%s", dir, e->d_name) < (int)sizeof full) unlink(full);
    }
    if (dh) closedir(dh);
done:
    free(d), free(b);
}

mdc_status mdc_atomic_open(mdc_atomic *a, const char *path) {
    static unsigned counter;
    memset(a, 0, sizeof *a);
    struct stat s;
    if (lstat(path, &s) == 0 && S_ISLNK(s.st_mode)) { /* write through the link to its target */
        a->dest = realpath(path, NULL);
        if (!a->dest)
            return mdc_fail(MDC_ERR_IO, "%s: a symbolic link whose target cannot be resolved: %s", path,
                            strerror(errno));
    } else {
        a->dest = strdup(path);
        if (!a->dest) return mdc_fail(MDC_ERR_OOM_HOST, "%s", path);
    }
    if (stat(a->dest, &s) == 0 && !S_ISREG(s.st_mode)) {
        mdc_status st = mdc_fail(MDC_ERR_IO,
                                 "%s is not a regular file (a directory, device or FIFO): minidc does "
                                 "not replace it",
                                 path);
        mdc_atomic_abort(a);
        return st;
    }
    remove_stale(a->dest);
    size_t n = strlen(a->dest) + 48;
    a->tmp = malloc(n);
    if (!a->tmp) {
        mdc_atomic_abort(a);
        return mdc_fail(MDC_ERR_OOM_HOST, "%s", path);
    }
    snprintf(a->tmp, n, "%s.tmp.%ld.%u", a->dest, (long)getpid(), counter++);
    int fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd >= 0) a->f = fdopen(fd, "wb");
    if (!a->f) {
        mdc_status st = mdc_fail(MDC_ERR_IO, "%s: cannot create: %s", a->tmp, strerror(errno));
        if (fd >= 0) close(fd), unlink(a->tmp);
        free(a->tmp), a->tmp = NULL; /* nothing of ours to remove now */
        mdc_atomic_abort(a);
        return st;
    }
    return MDC_OK;
}

void mdc_atomic_abort(mdc_atomic *a) {
    if (a->f) fclose(a->f);
    if (a->tmp) unlink(a->tmp);
    free(a->tmp), free(a->dest);
    memset(a, 0, sizeof *a);
}

mdc_status mdc_atomic_commit(mdc_atomic *a, int ok, const char *label) {
    int err = 0;
    if (ok && (fflush(a->f) != 0 || fsync(fileno(a->f)) != 0)) ok = 0, err = errno;
    if (fclose(a->f) != 0 && ok) ok = 0, err = errno;
    a->f = NULL;
    if (ok && rename(a->tmp, a->dest) != 0) ok = 0, err = errno;
    if (!ok) {
        if (!err) err = errno;
        mdc_atomic_abort(a); /* the old file stays as it was */
        return mdc_fail(MDC_ERR_IO, "%s: write failed: %s", label, strerror(err));
    }
    char *d = strdup(a->dest);
    int fd = d ? open(dirname(d), O_RDONLY) : -1;
    if (fd >= 0) fsync(fd), close(fd); /* the rename itself durable */
    free(d);
    free(a->tmp), a->tmp = NULL;
    mdc_atomic_abort(a);
    return MDC_OK;
}

/* Predict's memory: an allocation charged in full and backed by almost nothing.
 *
 * A dry allocation (mdc_dev_set_dry) reserves its whole size of address space, backs the first
 * page with private memory (the allocation header lives at its end) and maps one shared window
 * of WINDOW bytes over the rest again and again. Every byte of a 50 GB parameter shard is a
 * valid address, so code that still touches a tensor (a memset the predict path did not skip)
 * works, while the host holds WINDOW bytes for all of it. The contents are meaningless: every
 * tensor of a dry device aliases every other. */
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dry_internal.h"
#include "minidc/device.h"
#include "platform.h"

#define WINDOW ((size_t)16 << 20)

static int window_fd = -1;

/* One shared-memory object per process, unlinked at once (nothing else can open it). */
static int window(void) {
    if (window_fd >= 0) return window_fd;
    for (int n = 0; n < 100 && window_fd < 0; n++) {
        char name[64];
        snprintf(name, sizeof name, "/minidc-dry-%ld-%d", (long)getpid(), n);
        int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | MDC_PLAT_SHM_OFLAGS, 0600);
        if (fd < 0) continue;
        shm_unlink(name);
        if (ftruncate(fd, (off_t)WINDOW)) {
            close(fd);
            return -1;
        }
        window_fd = fd;
    }
    return window_fd;
}

static size_t page_size(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

void *mdc_i_dry_map(size_t bytes, size_t head) {
    size_t page = page_size(), len = (bytes + WINDOW - 1) / WINDOW * WINDOW;
    int fd = window();
    if (fd < 0 || head > page) return NULL;
    char *base = mmap(NULL, page + len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) return NULL;
    int ok = mmap(base, page, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == base;
    for (size_t off = 0; ok && off < len; off += WINDOW)
        ok = mmap(base + page + off, WINDOW, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_SHARED, fd, 0) ==
             base + page + off;
    if (!ok) {
        munmap(base, page + len);
        return NULL;
    }
    return base + page - head; /* the header's `head` bytes end where the mapped windows begin */
}

void mdc_i_dry_unmap(void *p, size_t bytes, size_t head) {
    size_t page = page_size(), len = (bytes + WINDOW - 1) / WINDOW * WINDOW;
    munmap((char *)p + head - page, page + len);
}

void *mdc_host_array(size_t bytes) {
    if (!mdc_host_dry()) return calloc(1, bytes ? bytes : 1);
    return mdc_i_dry_map(bytes ? bytes : 1, 0);
}

void mdc_host_array_free(void *p, size_t bytes) {
    if (!p) return;
    if (mdc_host_dry()) mdc_i_dry_unmap(p, bytes ? bytes : 1, 0);
    else free(p);
}

/* The operating system behind a few functions (device/platform.h says what each does).
 *
 * Why one file: minidc runs on Linux (x86-64, aarch64) and must build on macOS; keeping every
 * call that is not C11 + POSIX here leaves the rest of the tree portable by construction.
 * The Linux branch is what minidc always did; the fallback uses POSIX only, so any Unix
 * builds it, and `make PORTABLE=1` builds it on Linux so that the tests run it.
 * What the fallback cannot do: sleep in the kernel until a word changes (it polls the word,
 * 50..200 us apart), tell a stopped process from a running one, reserve shared memory up
 * front, shorten the timer slack, or find its own executable (except on macOS). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "platform.h"

#if MDC_PLAT_LINUX
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#elif defined(__APPLE__)
#include <mach-o/dyld.h>
#endif

/* A positive count from the environment variable `name`, else 0. */
static long env_count(const char *name) {
    const char *s = getenv(name);
    long v = s ? strtol(s, NULL, 10) : 0;
    return v > 0 ? v : 0;
}

long mdc_plat_cores_online(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN); /* not in POSIX's list, but on every Unix minidc targets */
    return n > 0 ? n : 0;
}

long mdc_plat_local_ranks(void) {
    long n = env_count("MPI_LOCALNRANKS");
#if !MDC_PLAT_LINUX
    /* Elsewhere Open MPI is as likely as MPICH (on Linux minidc runs under MPICH only). */
    if (!n) n = env_count("OMPI_COMM_WORLD_LOCAL_SIZE");
#endif
    return n;
}

#if MDC_PLAT_LINUX

int mdc_plat_wait(uint32_t *word, uint32_t expect, long us) {
    struct timespec ts = {us / 1000000, us % 1000000 * 1000};
    long rc = syscall(SYS_futex, word, FUTEX_WAIT, expect, &ts, NULL, 0);
    return !(rc != 0 && errno == ETIMEDOUT); /* woken, or the word had changed (EAGAIN) */
}

void mdc_plat_wake(uint32_t *word) { syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0); }

/* /proc/<pid>/stat into buf; 0 if there is no such process. */
static int read_stat(pid_t pid, char *buf, size_t len) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    return 1;
}

int mdc_plat_proc_state(pid_t pid) {
    char buf[512];
    if (pid <= 0) return MDC_PLAT_UNKNOWN;
    if (!read_stat(pid, buf, sizeof buf)) return MDC_PLAT_GONE;
    const char *c = strrchr(buf, ')'); /* "pid (comm) S ...": the state follows the name */
    if (!c || !c[1] || !c[2]) return MDC_PLAT_RUNNING;
    return c[2] == 'T' || c[2] == 't'   ? MDC_PLAT_STOPPED
           : c[2] == 'Z' || c[2] == 'X' ? MDC_PLAT_GONE
                                        : MDC_PLAT_RUNNING;
}

unsigned long long mdc_plat_proc_start(pid_t pid) {
    char buf[1024];
    unsigned long long st = 0;
    if (pid <= 0 || !read_stat(pid, buf, sizeof buf)) return 0;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (p &&
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &st) == 1)
        return st;
    return 0;
}

long mdc_plat_cores_usable(void) {
    cpu_set_t set;
    long n = 0;
    if (!sched_getaffinity(0, sizeof set, &set)) n = CPU_COUNT(&set);
    return n > 0 ? n : mdc_plat_cores_online();
}

int mdc_plat_exe_path(char *buf, size_t len) {
    int n = snprintf(buf, len, "/proc/self/exe"); /* exec'able even after the file was replaced */
    return n > 0 && (size_t)n < len ? 0 : -1;
}

void mdc_plat_short_sleeps(void) { prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); }

int mdc_plat_shm_size(int fd, size_t bytes) {
    if (ftruncate(fd, (off_t)bytes) != 0) return -1;
    int e = posix_fallocate(fd, 0, (off_t)bytes); /* returns the error, errno untouched */
    if (e) errno = e;
    return e ? -1 : 0;
}

double mdc_plat_rss_kib(int peak) {
    const char *key = peak ? "VmHWM:" : "VmRSS:";
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n)) v = atof(line + n + 1);
    if (f) fclose(f);
    return v;
}

int mdc_plat_rss_peak_reset(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w"); /* "5": reset VmHWM */
    if (!f) return -1;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

#else /* the POSIX fallback */

static long since_us(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)(t.tv_sec - t0->tv_sec) * 1000000L + (t.tv_nsec - t0->tv_nsec) / 1000;
}

/* Polls rather than blocking on a process-shared condition variable: a process that dies or
 * is stopped while holding the mutex would leave every other waiter stuck, and robust
 * mutexes are not on every system. The first polls come soon (a ring that follows the sleep
 * closely is common), then every 200 us: at most ~5000 wake-ups per second of a long wait. */
int mdc_plat_wait(uint32_t *word, uint32_t expect, long us) {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long poll = 50;; poll = poll < 200 ? 2 * poll : 200) {
        if (__atomic_load_n(word, __ATOMIC_SEQ_CST) != expect) return 1;
        long left = us - since_us(&t0);
        if (left <= 0) return 0;
        long s = poll < left ? poll : left;
        struct timespec ts = {0, s * 1000L};
        nanosleep(&ts, NULL);
    }
}

void mdc_plat_wake(uint32_t *word) { (void)word; }

int mdc_plat_proc_state(pid_t pid) {
    if (pid <= 0) return MDC_PLAT_UNKNOWN;
    if (kill(pid, 0) == 0 || errno == EPERM) return MDC_PLAT_ALIVE; /* signal 0: only the checks */
    return errno == ESRCH ? MDC_PLAT_GONE : MDC_PLAT_UNKNOWN;
}

unsigned long long mdc_plat_proc_start(pid_t pid) {
    (void)pid;
    return 0;
}

long mdc_plat_cores_usable(void) { return mdc_plat_cores_online(); }

int mdc_plat_exe_path(char *buf, size_t len) {
#if defined(__APPLE__)
    uint32_t n = len > UINT32_MAX ? UINT32_MAX : (uint32_t)len;
    return _NSGetExecutablePath(buf, &n) == 0 ? 0 : -1;
#else
    (void)buf, (void)len;
    return -1; /* no portable way: the caller does not re-exec */
#endif
}

void mdc_plat_short_sleeps(void) {}

int mdc_plat_shm_size(int fd, size_t bytes) {
    struct stat sb;
    /* macOS refuses a second ftruncate of a segment and rounds its size up to whole pages. */
    if (fstat(fd, &sb) == 0 && sb.st_size >= (off_t)bytes) return 0;
    if (ftruncate(fd, (off_t)bytes) == 0) return 0;
    int e = errno;
    if (fstat(fd, &sb) == 0 && sb.st_size >= (off_t)bytes) return 0; /* another process sized it */
    errno = e;
    return -1;
}

double mdc_plat_rss_kib(int peak) {
    (void)peak;
    return -1;
}

int mdc_plat_rss_peak_reset(void) { return -1; }

#endif

/* The operating system behind a few functions (device/platform.c): every call of minidc
 * that is not plain C11 + POSIX + MPI goes through here. Linux gets its own calls (futex,
 * /proc, sched_getaffinity, prctl); every other system, and Linux built with MDC_PORTABLE
 * (make PORTABLE=1), a POSIX fallback; macOS adds only its executable's path. Internal (not in
 * include/minidc/): no MPI, no state, every function safe to call at any time. */
#ifndef MDC_PLATFORM_H
#define MDC_PLATFORM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#if defined(__linux__) && !defined(MDC_PORTABLE)
#define MDC_PLAT_LINUX 1
#else
#define MDC_PLAT_LINUX 0
#endif

/* shm_open's extra flag: on Linux shm_open is open() in /dev/shm, where a planted symlink must
 * not be followed; POSIX leaves other flags of shm_open undefined, so the fallback adds none. */
#if MDC_PLAT_LINUX
#include <fcntl.h>
#define MDC_PLAT_SHM_OFLAGS O_NOFOLLOW
#else
#define MDC_PLAT_SHM_OFLAGS 0
#endif

/* Waits on a 32-bit word in memory shared between processes: returns 1 once *word differs from
 * `expect` (rung, or it differed already), 0 when `us` microseconds passed without a change.
 * Linux: a futex (shared, not private: the word is in another process's mapping too).
 * Fallback: re-reads the word every 50..200 us, sleeping in between (nanosleep), so a wake
 * costs up to 200 us but a waiter that dies or a waker that never comes cannot hang anyone. */
int mdc_plat_wait(uint32_t *word, uint32_t expect, long us);
/* Wakes every waiter on `word`; the caller has changed the word first. Fallback: nothing (the
 * waiters poll). */
void mdc_plat_wake(uint32_t *word);

/* What a process is doing, as far as this system tells (mdc_plat_proc_state). */
enum {
    MDC_PLAT_UNKNOWN = -1,
    MDC_PLAT_RUNNING = 0, /* runs, or sleeps in a wait of its own */
    MDC_PLAT_STOPPED = 1, /* SIGSTOP or a debugger (Linux only) */
    MDC_PLAT_GONE = 2,    /* no such process, or a zombie (Linux only) */
    MDC_PLAT_ALIVE = 3    /* exists: running or stopped, the fallback cannot tell which */
};
/* The state of process `pid`. Linux: /proc/<pid>/stat. Fallback: kill(pid, 0), which tells
 * only whether it exists (a zombie still does). */
int mdc_plat_proc_state(pid_t pid);
/* When process `pid` started, in clock ticks since boot (with the pid it names a process even
 * after pids wrap); 0 where unknown (no such process, or the fallback). */
unsigned long long mdc_plat_proc_start(pid_t pid);

/* The host's online cores (sysconf), at least 1. */
long mdc_plat_cores_online(void);
/* The cores this process may run on (Linux: its affinity mask; fallback: the online cores). */
long mdc_plat_cores_usable(void);
/* The job's ranks on this host, from the launcher's environment: MPICH's MPI_LOCALNRANKS
 * (Hydra sets it on every system); the fallback also reads Open MPI's
 * OMPI_COMM_WORLD_LOCAL_SIZE. 0 when unknown. */
long mdc_plat_local_ranks(void);

/* The running executable's path, for re-executing it: 0 and the path in buf, or -1 where
 * unknown (then the caller does not re-exec). Linux: /proc/self/exe; macOS:
 * _NSGetExecutablePath; fallback: unknown. */
int mdc_plat_exe_path(char *buf, size_t len);

/* Lets short sleeps of the calling thread end on time: Linux rounds each sleep up by the
 * thread's timer slack (50 us by default), set here to 1 us. Fallback: nothing. */
void mdc_plat_short_sleeps(void);

/* Sizes a fresh shared-memory segment (shm_open's fd) to `bytes` and, where the system can,
 * reserves its pages now, so a full /dev/shm means "no segment" instead of a SIGBUS on first
 * touch (Linux: posix_fallocate). Several processes may call it with the same size; macOS
 * sizes a segment only once, so the fallback accepts a segment that has that size already.
 * Returns 0, or -1 (errno set). */
int mdc_plat_shm_size(int fd, size_t bytes);

/* This process's resident memory in KiB, now (peak 0) or its peak (peak 1); -1 where unknown.
 * Linux: VmRSS / VmHWM of /proc/self/status. Fallback: unknown. */
double mdc_plat_rss_kib(int peak);
/* Resets the peak that mdc_plat_rss_kib(1) reports to the current size; 0 if done, -1 if not
 * (Linux: /proc/self/clear_refs). */
int mdc_plat_rss_peak_reset(void);

#endif

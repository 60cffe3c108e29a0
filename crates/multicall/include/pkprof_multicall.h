/* pkprof_multicall.h: multi-calls on io_uring, C API of the pkprof-multicall crate.
 *
 * A multi-call runs an array of system calls in order in ONE kernel crossing (one
 * io_uring_enter), with the semantics of the multi-call in "System Call Clustering: A
 * Profile-Directed Optimization Technique" (Rajagopalan et al.), figures 2 and 3:
 *
 *   - every result slot is set: the call's return value, or -errno;
 *   - a CHECKED call (check != 0) fails if its result is < 0, or, for MC_READ, MC_WRITE,
 *     MC_PREAD and MC_PWRITE, if it transferred fewer bytes than asked (a short transfer; the
 *     slot then holds the count, >= 0); likewise MC_SENDMSG/MC_RECVMSG with MSG_WAITALL;
 *   - the batch stops at the first checked failure: later calls do not run, their slots hold
 *     -ECANCELED;
 *   - an UNCHECKED call never stops the batch;
 *   - multi_call returns the 1-based index of the first checked failure, or count + 1.
 *
 * Bad input returns a negative errno and submits nothing (result slots untouched):
 *   -EINVAL      count <= 0, NULL ring or array, a negative length or offset, an fd or flag out
 *                of int range, a length over 4 GiB, bad MC_FSYNC flags;
 *   -E2BIG       count larger than the ring (batches are never split; see mc_capacity);
 *   -EOPNOTSUPP  an unknown op code.
 * Other negative values: -EEXIST the ring was opened by another thread (nothing submitted);
 * -EIO the ring is retired after an earlier partial submission (open a new one); another -errno
 * from io_uring_enter (results of calls that ran are set);
 * -ENOTRECOVERABLE an internal error (a bug) was caught at the boundary.
 * No call is ever left in flight when multi_call returns.
 *
 * Link with: libpkprof_multicall.a -lgcc_s -lutil -lrt -lpthread -lm -ldl (or the .so).
 * A ring from mc_open belongs to the thread that opened it (it is set up single-issuer, so that
 * the kernel issues each linked call inside the same io_uring_enter); other threads get -EEXIST.
 */
#ifndef PKPROF_MULTICALL_H
#define PKPROF_MULTICALL_H

#ifdef __cplusplus
extern "C" {
#endif

/* Operation codes; arguments in args[], in this order (pointers and fds cast to long):
 *
 *   MC_READ     fd, void *buf, len                 read(2) at the file position
 *   MC_WRITE    fd, const void *buf, len           write(2) at the file position
 *   MC_PREAD    fd, void *buf, len, offset         pread(2)
 *   MC_PWRITE   fd, const void *buf, len, offset   pwrite(2)
 *   MC_OPENAT   dirfd, const char *path, flags, mode   openat(2); result: the new fd
 *   MC_CLOSE    fd                                 close(2)
 *   MC_FSYNC    fd, flags (0 or MC_FSYNC_DATASYNC) fsync(2) / fdatasync(2)
 *   MC_STATX    dirfd, const char *path, flags, mask, struct statx *buf   statx(2)
 *   MC_SENDMSG  fd, const struct msghdr *msg, flags    sendmsg(2), MSG_NOSIGNAL always added
 *   MC_RECVMSG  fd, struct msghdr *msg, flags          recvmsg(2)
 *
 * Unused args are ignored. Every pointer must stay valid until multi_call returns. */
enum mc_op {
    MC_READ = 1,
    MC_WRITE,
    MC_PREAD,
    MC_PWRITE,
    MC_OPENAT,
    MC_CLOSE,
    MC_FSYNC,
    MC_STATX,
    MC_SENDMSG,
    MC_RECVMSG,
};

#define MC_FSYNC_DATASYNC 1L

/* Flags ORed into mc_call.op (the code proper is op & MC_OP_MASK); see the Rust docs of Call:
 *   MC_FIXED           the fd argument is a slot of the ring's fixed-file table (a direct
 *                      descriptor): read/write/pread/pwrite/close/fsync/sendmsg/recvmsg;
 *   MC_INTO_SLOT       MC_OPENAT only: open into slot args[4] instead of a descriptor; the result
 *                      is 0 and the calls after it use the slot with MC_FIXED (the hand-off of
 *                      an openat's file within one batch); O_CLOEXEC is dropped;
 *   MC_RESOLVE_CACHED  MC_OPENAT only: try openat2 with RESOLVE_CACHED (completes inline); if
 *                      that needs I/O the rest of the batch runs again without it (a second
 *                      crossing); the slot shows only the final result.
 * A slot outside the table is -EINVAL (nothing submitted); an empty slot gives -EBADF. */
#define MC_OP_MASK 0xff
#define MC_FIXED 0x100
#define MC_RESOLVE_CACHED 0x200
#define MC_INTO_SLOT 0x400

/* mc_open_opts flags. */
#define MC_OPEN_SQPOLL 1     /* a kernel thread polls the queue: no crossing per batch while it
                              * is awake (idle 1 s); it burns CPU, counted in the process's */
#define MC_OPEN_NO_RING_FD 2 /* do not register the ring's fd (default: registered) */

/* One operation (64 bytes on LP64). */
struct mc_call {
    int op;        /* enum mc_op */
    int check;     /* nonzero: a failure stops the batch */
    long args[6];  /* per op, see above */
    long result;   /* out: return value, -errno, or -ECANCELED if not run */
};

struct mc_ring; /* opaque */

/* A multi-call ring with `entries` submission entries (1..32768; rounded up to a power of two).
 * NULL with errno set on failure: ENOSYS (no io_uring in the kernel), EPERM (io_uring disabled
 * by kernel.io_uring_disabled or a seccomp filter), EINVAL (bad size), ENOMEM...;
 * mc_last_error() then says why in words. */
struct mc_ring *mc_open(unsigned entries);

/* mc_open with options: `file_slots` empty fixed-file slots (0: none) and MC_OPEN_* flags.
 * NULL with errno set on failure, as mc_open (SQPOLL refused is an error, not dropped). */
struct mc_ring *mc_open_opts(unsigned entries, unsigned file_slots, int flags);

/* Puts fds[0..count) into the fixed-file table from slot `first` on (the table keeps its own
 * reference: the caller may close them). 0 or a negative errno. */
int mc_register_files(struct mc_ring *r, unsigned first, const int *fds, int count);

/* Kernel crossings (io_uring_enter calls; plain calls for the fallback) made so far. */
long long mc_enters(const struct mc_ring *r);

/* The fallback: same semantics and results, one plain system call per operation (more kernel
 * crossings). No size limit. NULL only if out of memory. */
struct mc_ring *mc_open_sequential(void);

/* Why the last failing mc_open on this thread failed, or NULL. */
const char *mc_last_error(void);

/* Largest batch: ring entries; 0 for the sequential fallback (no limit); -EINVAL for NULL. */
int mc_capacity(const struct mc_ring *r);

/* Runs calls[0..count) in order in one kernel crossing. Returns the 1-based index of the first
 * checked call that failed, or count + 1; a negative errno for bad input (see above). */
int multi_call(struct mc_ring *r, int count, struct mc_call *calls);

/* Several independent multi-calls in one crossing: calls[0..count) cut into nchains chains of
 * lens[0], lens[1], ... calls (summing to count). Each chain keeps multi_call's semantics on its
 * own; chains do not wait for each other and one's failure never cancels another. index[i] gets
 * chain i's 1-based index of its first checked failure, or lens[i] + 1. Returns 0 or a negative
 * errno (bad input: nothing submitted). */
int multi_call_chains(struct mc_ring *r, int count, struct mc_call *calls, int nchains,
                      const int *lens, int *index);

/* Frees the ring (NULL is ignored). */
void mc_close(struct mc_ring *r);

#ifdef __cplusplus
}
#endif

#endif /* PKPROF_MULTICALL_H */

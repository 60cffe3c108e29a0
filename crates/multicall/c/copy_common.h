/* copy_common.h: what the three copy programs share: error exits, full writes, the timing
 * driver. Usage of every copy program:  PROG SRC DST [REPEAT]
 * With REPEAT, the copy runs REPEAT times (each one opens, copies, closes) and the program prints
 * "copies=R total_ns=T" measured around the copies only (process start-up and ring set-up are
 * outside the timed region). Each repeated copy goes to a new file: a regular DST left by the
 * copy before is unlinked first, outside the timed region. Rewriting it in place (creat's
 * O_TRUNC) would time the disk instead of the calls: ext4 (auto_da_alloc) starts the writeback of
 * a file truncated and written again when it is closed, and the next O_TRUNC waits for that
 * writeback to finish, milliseconds per copy that vary with the disk's queue (seen here: 13 ms
 * against 1.4 ms per copy of 925 KiB; docs/design.md "Measured advice"). */
#ifndef COPY_COMMON_H
#define COPY_COMMON_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define N 4096 /* the paper's buffer size */

static void die(const char *what, long err)
{
    fprintf(stderr, "%s: %s\n", what, strerror((int)(err < 0 ? -err : err)));
    exit(1);
}

/* Writes all of buf (a short write is continued, as the caller of a multi-call must do). */
static inline void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            die("write", errno);
        }
        buf += w;
        len -= (size_t)w;
    }
}

static inline void pwrite_all(int fd, const char *buf, size_t len, off_t off)
{
    while (len > 0) {
        ssize_t w = pwrite(fd, buf, len, off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            die("pwrite", errno);
        }
        buf += w;
        off += w;
        len -= (size_t)w;
    }
}

static void open_pair(const char *src, const char *dst, int *in, int *out)
{
    *in = open(src, O_RDONLY);
    if (*in < 0)
        die(src, errno);
    *out = creat(dst, 0666);
    if (*out < 0)
        die(dst, errno);
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Runs copy(src, dst) once, or REPEAT times and prints the time the copies took. */
static int copy_main(int argc, char **argv, void (*copy)(const char *, const char *))
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s SRC DST [REPEAT]\n", argv[0]);
        return 2;
    }
    if (argc == 3) {
        copy(argv[1], argv[2]);
        return 0;
    }
    long repeat = strtol(argv[3], NULL, 10);
    if (repeat <= 0) {
        fprintf(stderr, "%s: REPEAT must be a positive number\n", argv[0]);
        return 2;
    }
    long long total = 0;
    for (long i = 0; i < repeat; i++) {
        struct stat st;
        if (stat(argv[2], &st) == 0 && S_ISREG(st.st_mode) && unlink(argv[2]) != 0)
            die(argv[2], errno);
        long long t0 = now_ns();
        copy(argv[1], argv[2]);
        total += now_ns() - t0;
    }
    printf("copies=%ld total_ns=%lld\n", repeat, total);
    return 0;
}

#endif

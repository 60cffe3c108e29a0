/* Kernel-heavy workload: large readv()s from /dev/zero for a fixed number of seconds, made from one
 * user function (read_zeros) so the kernel's work sits under that call site. readv, because the
 * dynamic loader never uses it: the process's readv count is exactly the printed one.
 * Usage: zero_reader SECONDS; prints "reads N". Built with frame pointers. */
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static char buf[1 << 20];

/*
 * readv made right here with the syscall instruction, not through libc's wrapper: Debian's libc is
 * built without frame pointers, so a frame-pointer walk from inside its wrapper skips the
 * wrapper's caller. With the instruction inline, read_zeros is the user frame that made the call.
 */
__attribute__((noinline)) long read_zeros(int fd)
{
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"((long)SYS_readv), "D"((long)fd), "S"(&iov), "d"(1L)
			 : "rcx", "r11", "memory");
	return ret;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 3.0;
	struct timespec t0, t;
	long total = 0, reads = 0;
	int fd = open("/dev/zero", O_RDONLY);

	if (fd < 0)
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 64; i++)
			total += read_zeros(fd);
		reads += 64;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
	printf("reads %ld %ld\n", reads, total);
	return 0;
}

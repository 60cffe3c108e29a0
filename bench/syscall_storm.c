/*
 * A syscall storm for the `pkprof syscalls` overhead benchmark: N one-byte reads from /dev/zero,
 * timed inside the process (CLOCK_MONOTONIC around the loop only, so attach and start-up are not
 * in it). Prints "ns_per_call X".
 *
 * Usage: syscall_storm N
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	int fd = open("/dev/zero", O_RDONLY);
	struct timespec a, b;
	char c;

	if (fd < 0 || n <= 0) {
		fprintf(stderr, "usage: syscall_storm N\n");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++)
		if (read(fd, &c, 1) != 1)
			return 1;
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("ns_per_call %.2f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
	return 0;
}

/*
 * io_direct_read PATH SECONDS: reads PATH (created with MIB MiB of data if shorter; default 64)
 * sequentially in 4 KiB O_DIRECT reads, wrapping around, for SECONDS of wall time. O_DIRECT
 * bypasses the page cache, so every read is a block request to the device and its completion runs
 * in interrupt context (the BLOCK softirq or the device's hard IRQ).
 *
 * Protocol (stdout): "ready" once the file exists; waits for a line on stdin (the gate); prints
 * "start MONO_NS", runs, prints "end MONO_NS READS" (CLOCK_MONOTONIC) and exits.
 * Usage: io_direct_read PATH SECONDS [MIB]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static long long mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "io_direct_read.dat";
	double secs = argc > 2 ? atof(argv[2]) : 3.0;
	long long size = (argc > 3 ? atoll(argv[3]) : 64) << 20, off = 0, reads = 0, start, stop, t;
	struct stat st;
	char line[64];
	void *buf;
	int fd;

	if (posix_memalign(&buf, 4096, 1 << 20))
		return 1;
	memset(buf, 0x5a, 1 << 20);
	if (stat(path, &st) || st.st_size < size) {
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0) {
			perror("create");
			return 1;
		}
		for (long long o = 0; o < size; o += 1 << 20)
			if (write(fd, buf, 1 << 20) != 1 << 20) {
				perror("write");
				return 1;
			}
		fsync(fd);
		close(fd);
	}
	fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0) {
		perror("open O_DIRECT");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	start = mono();
	stop = start + (long long)(secs * 1e9);
	printf("start %lld\n", start);
	fflush(stdout);
	do {
		if (pread(fd, buf, 4096, off) != 4096) {
			perror("pread");
			return 1;
		}
		reads++;
		off += 4096;
		if (off >= size)
			off = 0;
		t = mono();
	} while (t < stop);
	printf("end %lld %lld\n", t, reads);
	fflush(stdout);
	close(fd);
	return 0;
}

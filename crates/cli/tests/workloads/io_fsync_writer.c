/*
 * io_fsync_writer PATH SECONDS: overwrites a 4 MiB file (created first) 4 KiB at a time, each
 * write followed by fsync(2), for SECONDS of wall time. Every fsync sends the data block (and,
 * through the filesystem's journal, a commit and a cache flush) to the device; block completions
 * and the work items they and the writer queue run in interrupt context and in kworkers.
 *
 * Protocol (stdout): "ready" once the file exists; waits for a line on stdin (the gate); prints
 * "start MONO_NS", runs, prints "end MONO_NS FSYNCS" (CLOCK_MONOTONIC) and exits.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FILE_BYTES (4LL << 20)

static long long mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "io_fsync_writer.dat";
	double secs = argc > 2 ? atof(argv[2]) : 3.0;
	long long off = 0, n = 0, start, stop, t;
	char buf[4096], line[64];
	int fd;

	memset(buf, 0xa5, sizeof(buf));
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0) {
		perror("open");
		return 1;
	}
	for (long long o = 0; o < FILE_BYTES; o += sizeof(buf))
		if (write(fd, buf, sizeof(buf)) != sizeof(buf)) {
			perror("write");
			return 1;
		}
	if (fsync(fd)) {
		perror("fsync");
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
		buf[0] = (char)n;
		if (pwrite(fd, buf, sizeof(buf), off) != sizeof(buf) || fsync(fd)) {
			perror("pwrite/fsync");
			return 1;
		}
		n++;
		off = (off + sizeof(buf)) % FILE_BYTES;
		t = mono();
	} while (t < stop);
	printf("end %lld %lld\n", t, n);
	fflush(stdout);
	close(fd);
	return 0;
}

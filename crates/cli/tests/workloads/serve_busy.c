/* serve_busy SECONDS: spins on one CPU in user space for SECONDS (fractions allowed) of wall
 * time, then exits 0. Used by the serving and error-path tests as a process that accrues CPU time
 * steadily (and, with a short SECONDS, as a watched process that exits mid-run). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s SECONDS\n", argv[0]);
		return 2;
	}
	double end = now() + atof(argv[1]);
	volatile unsigned long x = 0;
	while (now() < end)
		for (int i = 0; i < 100000; i++)
			x += i;
	return 0;
}

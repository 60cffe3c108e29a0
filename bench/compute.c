/* compute SECONDS: a CPU-bound loop (integer work in a few stack frames, as a profiler sees real
 * code) for SECONDS of wall time; prints "iterations N". Benchmark workload for bench/record.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

__attribute__((noinline)) static unsigned long mix(unsigned long x, int n)
{
	for (int i = 0; i < n; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	return x;
}

__attribute__((noinline)) static unsigned long step(unsigned long x)
{
	return mix(x, 700) ^ mix(x + 1, 300);
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 3.0;
	unsigned long it = 0, x = 1;
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 1000; i++, it++)
			x = step(x);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
	sink = x;
	printf("iterations %lu\n", it);
	return 0;
}

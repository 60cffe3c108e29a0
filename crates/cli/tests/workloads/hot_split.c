/* Two busy functions splitting the CPU 70/30 by work, for a fixed number of seconds.
 * Usage: hot_split SECONDS. Build with frame pointers (-O1 -fno-omit-frame-pointer).
 * Each round runs hot_seventy for 7 units and hot_thirty for 3 units of the same loop, so their
 * shares of the process's CPU time are 70% and 30% whatever the machine's speed. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

__attribute__((noinline)) static void spin(unsigned long n)
{
	unsigned long x = sink;
	for (unsigned long i = 0; i < n; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	sink = x;
}

__attribute__((noinline)) void hot_seventy(void) { spin(7 * 20000); }
__attribute__((noinline)) void hot_thirty(void) { spin(3 * 20000); }

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 3.0;
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 50; i++) {
			hot_seventy();
			hot_thirty();
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
	printf("%lu\n", sink);
	return 0;
}

/* Two busy functions splitting the CPU 70/30 by work, for a fixed number of seconds.
 * Usage: hot_split SECONDS; prints "calls N", how many times each function was called.
 * Built with frame pointers.
 * Each round runs the same loop 7 units long in hot_seventy and 3 units in hot_thirty, so the two
 * functions' shares of the process's CPU time are 70% and 30% whatever the machine's speed. Each
 * function runs its own loop: the time is self time of that function.
 * The unit changes from round to round (pseudo-random, 10000..30000 iterations): with a fixed
 * unit the round is strictly periodic, and on a machine where the sampling period comes close to
 * a whole number of rounds every sample lands at the same phase of the round and the split seen
 * by sampling drifts far from 70/30 (CI once saw 87/13 at 499 Hz). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

#define SPIN(n)                                                                                    \
	do {                                                                                       \
		unsigned long x = sink;                                                            \
		for (unsigned long i = 0; i < (n); i++)                                            \
			x = x * 6364136223846793005UL + 1442695040888963407UL;                     \
		sink = x;                                                                          \
	} while (0)

__attribute__((noinline)) void hot_seventy(unsigned long unit) { SPIN(7 * unit); }
__attribute__((noinline)) void hot_thirty(unsigned long unit) { SPIN(3 * unit); }

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 3.0;
	struct timespec t0, t;
	unsigned long calls = 0, seed = 88172645463325252UL;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 50; i++) {
			/* xorshift64: a unit that no sampling period can lock onto */
			seed ^= seed << 13;
			seed ^= seed >> 7;
			seed ^= seed << 17;
			unsigned long unit = 10000 + seed % 20001;
			hot_seventy(unit);
			hot_thirty(unit);
		}
		calls += 50;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
	printf("calls %lu %lu\n", calls, sink & 1);
	return 0;
}

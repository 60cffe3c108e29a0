/* A function called a known number of times but far too short to be sampled, next to a busy one.
 * Usage: counted_calls SECONDS CALLS; spins in busy_loop for SECONDS, calling tiny_call CALLS times
 * spread over the run, and prints "calls N" (tiny_call's calls, counted by the program itself).
 * Built with frame pointers. tiny_call does almost nothing (a few ns per call), so a sampling
 * profiler practically never catches it: only an exact count (uprobe) can show it. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;
static unsigned long tiny_calls;

__attribute__((noinline)) void tiny_call(void)
{
	tiny_calls++;
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void busy_loop(unsigned long n)
{
	unsigned long x = sink;
	for (unsigned long i = 0; i < n; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	sink = x;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 1.0;
	unsigned long calls = argc > 2 ? strtoul(argv[2], NULL, 10) : 600;
	double t0 = now();
	unsigned long done = 0;
	while (done < calls || now() - t0 < secs) {
		busy_loop(100000);
		/* Spread the calls over the run: one whenever the elapsed share of the run says so. */
		double share = (now() - t0) / secs;
		while (done < calls && (share >= 1.0 || done < share * calls)) {
			tiny_call();
			done++;
		}
	}
	printf("calls %lu\n", tiny_calls);
	return 0;
}

/*
 * offcpu_short THREADS MS: THREADS threads that each block in short_nap() (a 0.5 ms nanosleep)
 * over and over for MS milliseconds, for the off-CPU rate cap test (many short blocks: more
 * chosen samples than the cap at the default period). Prints "ready", waits for a line on stdin
 * (the start gate), then prints "blocked_us N": the time all threads spent inside short_nap()'s
 * nanosleep call, by CLOCK_MONOTONIC around each call, and "done".
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long run_ms;

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* One block, timed by the caller. */
static __attribute__((noinline)) void short_nap(void)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = 500000L };

	nanosleep(&ts, NULL);
}

static void *napper(void *arg)
{
	unsigned long long *blocked = arg, end = now_ns() + run_ms * 1000000ULL, t0, t1;

	do {
		t0 = now_ns();
		short_nap();
		t1 = now_ns();
		*blocked += t1 - t0;
	} while (t1 < end);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 8;
	unsigned long long blocked[64] = { 0 }, sum = 0;
	pthread_t t[64];
	char line[64];

	run_ms = argc > 2 ? atol(argv[2]) : 3000;
	if (threads < 1 || threads > 64)
		return 1;
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, napper, &blocked[i]);
	for (int i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		sum += blocked[i];
	}
	printf("blocked_us %llu\n", sum / 1000);
	printf("done\n");
	fflush(stdout);
	return 0;
}

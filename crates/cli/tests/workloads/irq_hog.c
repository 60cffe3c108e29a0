/*
 * irq_hog CPU SECONDS: pinned to CPU, prints "hog PID", spins in user space for SECONDS, exits.
 * Interrupt work that lands on CPU (e.g. NET_RX softirq steered there by RPS) runs on top of it
 * and Linux bills it to the hog.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long long ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	cpu_set_t set;
	long long stop;

	CPU_ZERO(&set);
	CPU_SET(argc > 1 ? atoi(argv[1]) : 1, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("sched_setaffinity");
		return 1;
	}
	printf("hog %d\n", (int)getpid());
	fflush(stdout);
	stop = ns() + (long long)((argc > 2 ? atof(argv[2]) : 5.0) * 1e9);
	while (ns() < stop)
		;
	return 0;
}

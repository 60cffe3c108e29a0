/*
 * net_hog CPU: pinned to CPU, prints "hog", spins in user space until stdin reaches EOF, prints
 * "spun ITERATIONS". Receive work steered to CPU (RPS) runs on top of it: Linux bills it to the hog.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static atomic_int stop;

static void *watch_stdin(void *arg)
{
	char buf[64];

	(void)arg;
	while (read(0, buf, sizeof(buf)) > 0)
		;
	atomic_store(&stop, 1);
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long long spun = 0;
	cpu_set_t set;
	pthread_t w;

	CPU_ZERO(&set);
	CPU_SET(argc > 1 ? atoi(argv[1]) : 1, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("sched_setaffinity");
		return 1;
	}
	/* The watcher inherits the pin but sleeps in read(2). */
	pthread_create(&w, NULL, watch_stdin, NULL);
	printf("hog\n");
	fflush(stdout);
	while (!atomic_load_explicit(&stop, memory_order_relaxed))
		spun++;
	printf("spun %llu\n", spun);
	fflush(stdout);
	return 0;
}

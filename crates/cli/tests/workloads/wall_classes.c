/*
 * wall_classes SECONDS: threads whose off-CPU time has one known reason each, for the wall-time
 * classes test (tests/wall_time.rs):
 *   sleep  nanosleep of 2 ms in a loop                      -> blocked: sleep
 *   pipe   blocking read of a pipe written every 2 ms       -> blocked: ipc
 *   lock   pthread_mutex_lock of a mutex held ~2 ms at a time -> blocked: lock (futex)
 *   poll   poll() on a pipe nobody writes, 2 ms timeout     -> blocked: poll
 *   spin0, spin1  busy, both pinned to CPU 0                -> runnable half their time
 * (the pipe's writer and the lock's holder are a seventh thread, "feeder").
 *
 * Protocol (stdout): waits for a line on stdin (the gate), creates the threads, each runs for
 * SECONDS and prints, as the last thing before it returns,
 *   "thread TID KIND CREATE_NS START_NS END_NS RUN_NS WAIT_NS"
 * with CLOCK_MONOTONIC just before its pthread_create, at its own start and at its end, and its
 * /proc/thread-self/schedstat run and run-queue wait times (the kernel's own clocks); once every
 * thread is joined the main thread prints "joined TID JOIN_NS" for each (when its join returned).
 * Then the process exits.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double secs;
static int feed[2], quiet[2];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int stop_feeder;

static long long mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void nap(long ns)
{
	struct timespec ts = { 0, ns };

	nanosleep(&ts, NULL);
}

struct job {
	const char *kind;
	long long create_ns;
	pthread_t th;
	pid_t tid;
};

static void *run(void *arg)
{
	struct job *j = arg;
	long long start = mono(), end = start + (long long)(secs * 1e9);
	unsigned long long run_ns = 0, wait_ns = 0;
	char c;
	FILE *f;

	j->tid = syscall(SYS_gettid);
	if (!strncmp(j->kind, "spin", 4)) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(0, &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	while (mono() < end) {
		if (!strcmp(j->kind, "sleep")) {
			nap(2000000);
		} else if (!strcmp(j->kind, "pipe")) {
			if (read(feed[0], &c, 1) != 1)
				break;
		} else if (!strcmp(j->kind, "lock")) {
			pthread_mutex_lock(&lock);
			pthread_mutex_unlock(&lock);
			nap(100000);
		} else if (!strcmp(j->kind, "poll")) {
			struct pollfd p = { .fd = quiet[0], .events = POLLIN };

			poll(&p, 1, 2);
		} else {
			for (volatile int i = 0; i < 100000; i++)
				;
		}
	}
	/* Off the CPU a while before the end: the spinners both stop spinning before either exits,
	 * so no exit path waits behind the other spinner. */
	nap(20000000);
	f = fopen("/proc/thread-self/schedstat", "r");
	if (f) {
		if (fscanf(f, "%llu %llu", &run_ns, &wait_ns) != 2)
			run_ns = wait_ns = 0;
		fclose(f);
	}
	pthread_mutex_lock(&out_lock);
	printf("thread %d %s %lld %lld %lld %llu %llu\n", j->tid, j->kind, j->create_ns, start, mono(),
	       run_ns, wait_ns);
	fflush(stdout);
	pthread_mutex_unlock(&out_lock);
	return NULL;
}

/* Writes the pipe every 2 ms and holds the lock 2 ms of every 2.5 ms. */
static void *feeder(void *arg)
{
	while (!stop_feeder) {
		pthread_mutex_lock(&lock);
		nap(2000000);
		pthread_mutex_unlock(&lock);
		if (write(feed[1], "x", 1) != 1)
			break;
		nap(500000);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	static struct job jobs[] = { { "sleep" }, { "pipe" }, { "lock" }, { "poll" }, { "spin0" },
				     { "spin1" } };
	const int n = sizeof(jobs) / sizeof(jobs[0]);
	pthread_t fth;
	char line[64];

	if (argc != 2 || (secs = atof(argv[1])) <= 0) {
		fprintf(stderr, "usage: wall_classes SECONDS\n");
		return 2;
	}
	if (pipe(feed) || pipe(quiet))
		return 1;
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	pthread_create(&fth, NULL, feeder, NULL);
	for (int i = 0; i < n; i++) {
		jobs[i].create_ns = mono();
		pthread_create(&jobs[i].th, NULL, run, &jobs[i]);
	}
	long long joined[sizeof(jobs) / sizeof(jobs[0])];

	for (int i = 0; i < n; i++) {
		pthread_join(jobs[i].th, NULL);
		joined[i] = mono();
	}
	for (int i = 0; i < n; i++)
		printf("joined %d %lld\n", jobs[i].tid, joined[i]);
	fflush(stdout);
	stop_feeder = 1;
	if (write(feed[1], "x", 1) != 1)
		return 1;
	pthread_join(fth, NULL);
	return 0;
}

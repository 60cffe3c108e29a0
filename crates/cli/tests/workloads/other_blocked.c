/*
 * other_blocked: a process whose threads block where the wall chain's classifier has no reason
 * but OTHER, for the OTHER-function test (tests/wall_time.rs):
 *   waiter  waitpid() on a child that sleeps 200 ms, 3 times (wait4: OTHER), then exits;
 *   main    stops itself with SIGSTOP (state stopped: OTHER) until the test sends SIGCONT.
 *
 * Protocol (stdout): waits for a line on stdin (the gate); the waiter prints "waiter TID", then
 * "waited NS": the sum over its waitpid calls of CLOCK_MONOTONIC from just before the call to
 * just after it returned, less the time the thread then waited for a CPU (the gain of the
 * kernel's own run_delay, /proc/thread-self/schedstat): the time it was blocked. After the
 * waiter is joined, main prints "stopping" and stops itself; once continued it prints
 * "stopped NS", the same from just before its raise() to just after. Then it waits for a
 * second line on stdin and exits.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The calling thread's run-queue wait so far (ns; schedstat's second field). */
static long long run_delay(void)
{
	long long run = 0, delay = 0;
	FILE *f = fopen("/proc/thread-self/schedstat", "r");

	if (!f || fscanf(f, "%lld %lld", &run, &delay) != 2) {
		perror("schedstat");
		exit(1);
	}
	fclose(f);
	return delay;
}

static void *waiter(void *arg)
{
	long long waited = 0;

	(void)arg;
	printf("waiter %ld\n", (long)syscall(SYS_gettid));
	fflush(stdout);
	for (int i = 0; i < 3; i++) {
		long long t0, d0;
		pid_t child = fork();

		if (child < 0) {
			perror("fork");
			exit(1);
		}
		if (child == 0) {
			struct timespec nap = { 0, 200 * 1000 * 1000 };

			nanosleep(&nap, NULL);
			_exit(0);
		}
		d0 = run_delay();
		t0 = mono();
		if (waitpid(child, NULL, 0) != child) {
			perror("waitpid");
			exit(1);
		}
		waited += mono() - t0 - (run_delay() - d0);
	}
	printf("waited %lld\n", waited);
	fflush(stdout);
	return NULL;
}

int main(void)
{
	char line[64];
	pthread_t t;
	long long t0, d0;

	if (!fgets(line, sizeof(line), stdin))
		return 1;
	if (pthread_create(&t, NULL, waiter, NULL))
		return 1;
	pthread_join(t, NULL);
	printf("stopping\n");
	fflush(stdout);
	d0 = run_delay();
	t0 = mono();
	raise(SIGSTOP);
	t0 = mono() - t0;
	printf("stopped %lld\n", t0 - (run_delay() - d0));
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	return 0;
}

/*
 * offcpu_mix ROUNDS: three threads that block in three different ways, for off-CPU tests.
 * Prints "ready RSEQ" (the size of the rseq area glibc registers for each thread; 0: none,
 * as with glibc before 2.35 or glibc.pthread.rseq=0), waits for a line on stdin (the start gate, so that tracers attach first), then runs
 * ROUNDS rounds and prints "done":
 *   - the sleeper: nanosleep 20 ms in nap() (blocked in do_nanosleep);
 *   - the reader: read() of a pipe in wait_pipe() (blocked in pipe_read), woken by the writer;
 *   - the writer: sleeps 30 ms in pace() (clock_nanosleep), then writes a byte to the pipe and waits on a futex
 *     (pthread_cond_timedwait, 10 ms, in wait_cond()) that nobody signals.
 * So the reader's blocks are woken by the writer, which was itself woken by a timer: a wake
 * chain of depth 2.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* glibc >= 2.35 (weak: absent before, read as 0). */
extern const unsigned int __rseq_size __attribute__((weak));

static int rounds;
static int pipefd[2];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static __attribute__((noinline)) void nap(long ms)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = ms * 1000000L };

	nanosleep(&ts, NULL);
}

/* A different call from nap()'s, so that the compiler cannot fold the two into one. */
static __attribute__((noinline)) void pace(long ms)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = ms * 1000000L };

	clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
}

static __attribute__((noinline)) int wait_pipe(void)
{
	char c;

	return read(pipefd[0], &c, 1);
}

static __attribute__((noinline)) void wait_cond(long ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += ms * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&mu);
	pthread_cond_timedwait(&cv, &mu, &ts);
	pthread_mutex_unlock(&mu);
}

static void *sleeper(void *arg)
{
	for (int i = 0; i < rounds * 2; i++)
		nap(20);
	return arg;
}

static void *reader(void *arg)
{
	for (int i = 0; i < rounds; i++)
		if (wait_pipe() != 1)
			exit(1);
	return arg;
}

static void *writer(void *arg)
{
	for (int i = 0; i < rounds; i++) {
		pace(30);
		if (write(pipefd[1], "x", 1) != 1)
			exit(1);
		wait_cond(10);
	}
	return arg;
}

int main(int argc, char **argv)
{
	pthread_t t[3];
	char line[64];

	rounds = argc > 1 ? atoi(argv[1]) : 30;
	if (pipe(pipefd))
		return 1;
	printf("ready %u\n", &__rseq_size ? __rseq_size : 0);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	pthread_create(&t[0], NULL, sleeper, NULL);
	pthread_create(&t[1], NULL, reader, NULL);
	pthread_create(&t[2], NULL, writer, NULL);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	printf("done\n");
	fflush(stdout);
	return 0;
}

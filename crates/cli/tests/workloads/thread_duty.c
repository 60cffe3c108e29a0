/*
 * thread_duty SECONDS PERIOD_MS FRACTION...: one thread per FRACTION (e.g. 0.2 0.5 0.8), each busy
 * that fraction of every PERIOD_MS (by its own CPU clock, then asleep until the next period) for
 * SECONDS.
 *
 * Protocol (stdout): waits for a line on stdin (the gate), starts the threads; each prints
 * "thread TID FRACTION CPU_NS CSW" (CLOCK_THREAD_CPUTIME_ID, its context switches so far) just
 * before it exits; then the process exits.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double secs;
static long long period_ns;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static long long ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* This thread's context switches so far (voluntary + involuntary), from /proc/thread-self/status. */
static long ctx_switches(void)
{
	char buf[4096], *p;
	long n = 0;
	size_t len;
	FILE *f = fopen("/proc/thread-self/status", "r");

	if (!f)
		return -1;
	len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = 0;
	for (p = buf; (p = strstr(p, "voluntary_ctxt_switches:")); p += 24)
		n += atol(p + 24); /* matches both voluntary_ and nonvoluntary_ */
	return n;
}

static void *duty(void *arg)
{
	double frac = *(double *)arg;
	long long busy = (long long)(frac * period_ns);
	long long t = ns(CLOCK_MONOTONIC), stop = t + (long long)(secs * 1e9);

	for (; t < stop; t += period_ns) {
		struct timespec ts = { .tv_sec = t / 1000000000LL, .tv_nsec = t % 1000000000LL };
		long long until;

		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		until = ns(CLOCK_THREAD_CPUTIME_ID) + busy;
		while (ns(CLOCK_THREAD_CPUTIME_ID) < until)
			;
	}
	pthread_mutex_lock(&out_lock);
	printf("thread %ld %.2f %lld %ld\n", (long)gettid(), frac, ns(CLOCK_THREAD_CPUTIME_ID),
	       ctx_switches());
	fflush(stdout);
	pthread_mutex_unlock(&out_lock);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc - 3;
	pthread_t th[16];
	double fr[16];
	char line[64];

	if (n < 1 || n > 16)
		return 2;
	secs = atof(argv[1]);
	period_ns = atoll(argv[2]) * 1000000LL;
	/* Highest CFS weight (root): other tasks on this noisy VM rarely preempt the threads, so their
	 * time is in few, long slices. */
	setpriority(PRIO_PROCESS, 0, -20);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	for (int i = 0; i < n; i++) {
		fr[i] = atof(argv[i + 3]);
		pthread_create(&th[i], NULL, duty, &fr[i]);
	}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	return 0;
}

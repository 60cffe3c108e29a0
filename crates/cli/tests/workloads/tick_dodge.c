/*
 * tick_dodge CPU SECONDS: pinned to CPU, busy ~2 ms of every 4 ms for SECONDS, phase-locked to the
 * 250 Hz scheduler tick so that every tick finds the CPU idle (tick sampling then sees ~0% busy).
 *
 * The tick phase is found by spinning on CLOCK_MONOTONIC and collecting the gaps the tick
 * interrupt leaves in the loop; the 100 us phase bin (modulo 4 ms) with the most gaps is the tick.
 * Each busy window then starts 300 us after a tick (clock_nanosleep TIMER_ABSTIME) and ends 1.7 ms
 * before the next one.
 *
 * Protocol (stdout, one line each): "ready TICKS_FOUND TICKS_EXPECTED PHASE_NS GAPS" after
 * calibration (GAPS: all gaps seen, TICKS_FOUND: those at the tick's phase);
 * then it waits for a line on stdin (the gate: "go", or "go PHASE_NS" to dodge a tick phase found
 * elsewhere, e.g. from the kernel's own timer interrupt events), prints "gate CPU_NS MONO_NS CSW"
 * (CLOCK_PROCESS_CPUTIME_ID, CLOCK_MONOTONIC, context switches so far), runs, prints
 * "end CPU_NS WINDOWS MONO_NS CSW" and exits.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#define TICK_NS 4000000LL
#define BINS 40 /* 100 us bins over one tick period */
#define GAP_NS 8000LL /* tick handling here takes 20-70 us; smaller gaps are other noise */
#define START_AFTER_TICK_NS 300000LL
#define BUSY_NS 2000000LL

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

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("sched_setaffinity");
		exit(1);
	}
}

/* Spins for 400 ms and returns the tick phase (ns modulo TICK_NS); reports what it found. */
static long long calibrate(int *found, int *expected, int *gaps_seen)
{
	static long long gaps[4096];
	int counts[BINS] = { 0 }, n = 0, best = 0;
	long long start = ns(CLOCK_MONOTONIC), prev = start, now, sum = 0;

	while ((now = ns(CLOCK_MONOTONIC)) - start < 400000000LL) {
		if (now - prev > GAP_NS && n < 4096)
			gaps[n++] = prev; /* the interrupt arrived between prev and now */
		prev = now;
	}
	for (int i = 0; i < n; i++)
		counts[(gaps[i] % TICK_NS) * BINS / TICK_NS]++;
	for (int b = 1; b < BINS; b++)
		if (counts[b] > counts[best])
			best = b;
	/* Count the neighbouring bins too (a phase at a bin edge splits its gaps). */
	*found = 0;
	for (int i = 0; i < n; i++) {
		long long off = gaps[i] % TICK_NS - (best * TICK_NS / BINS + TICK_NS / BINS / 2);

		if (off > TICK_NS / 2)
			off -= TICK_NS;
		if (off < -TICK_NS / 2)
			off += TICK_NS;
		if (off >= -TICK_NS / BINS * 3 / 2 && off <= TICK_NS / BINS * 3 / 2) {
			sum += off;
			(*found)++;
		}
	}
	*expected = (int)(400000000LL / TICK_NS);
	*gaps_seen = n;
	return (best * TICK_NS / BINS + TICK_NS / BINS / 2 + (*found ? sum / *found : 0) + TICK_NS) %
	       TICK_NS;
}

int main(int argc, char **argv)
{
	int cpu = argc > 1 ? atoi(argv[1]) : 1, found, expected, gaps_seen;
	double secs = argc > 2 ? atof(argv[2]) : 10.0;
	long long phase, t, stop, windows = 0;
	char line[64];

	pin(cpu);
	prctl(PR_SET_TIMERSLACK, 1UL);
	phase = calibrate(&found, &expected, &gaps_seen);
	printf("ready %d %d %lld %d\n", found, expected, phase, gaps_seen);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	if (sscanf(line, "go %lld", &t) == 1 && t >= 0)
		phase = t % TICK_NS;
	printf("gate %lld %lld %ld\n", ns(CLOCK_PROCESS_CPUTIME_ID), ns(CLOCK_MONOTONIC), ctx_switches());
	fflush(stdout);

	t = ns(CLOCK_MONOTONIC);
	stop = t + (long long)(secs * 1e9);
	/* First window start: the next tick + START_AFTER_TICK_NS. */
	t = t - (t % TICK_NS) + phase + START_AFTER_TICK_NS;
	while (t < ns(CLOCK_MONOTONIC))
		t += TICK_NS;
	for (; t < stop; t += TICK_NS) {
		struct timespec ts = { .tv_sec = t / 1000000000LL, .tv_nsec = t % 1000000000LL };

		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		while (ns(CLOCK_MONOTONIC) < t + BUSY_NS)
			;
		windows++;
	}
	printf("end %lld %lld %lld %ld\n", ns(CLOCK_PROCESS_CPUTIME_ID), windows, ns(CLOCK_MONOTONIC),
	       ctx_switches());
	fflush(stdout);
	return 0;
}

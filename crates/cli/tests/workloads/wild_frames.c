/*
 * wild_frames SECONDS: three threads burn CPU in hot loops while rbp holds what a frame-pointer
 * walk must not follow (built with -fomit-frame-pointer, where rbp is just another register), and
 * a fourth burns CPU in code with frame pointers, as a control:
 *
 *   spin_ascii_rbp   rbp = ASCII bytes ("21000 OK\r" as if a string were in it): no frame can be
 *                    read there, so the walk ends at the sampled function.
 *   spin_self_frame  rbp -> a frame on the stack whose saved rbp points to itself and whose
 *                    return address is in fake_caller: the kernel's walk repeats fake_caller up
 *                    to its depth limit (126 times); a correct walk stops at the first repeat,
 *                    because the frame pointer did not increase, and marks the stack truncated.
 *   spin_ascii_ret   rbp -> a frame whose return address is ASCII data and whose saved rbp is 0
 *                    (a normal end): the walk yields an address outside every mapping, which must
 *                    be cut and the stack marked truncated, not shown as an `[unknown]+0x...` root.
 *   normal_spin      called by normal_outer, called by normal_thread, all with frame pointers
 *                    from the thread's entry on: a sound chain, shown whole and not marked.
 *                    (A function without frame pointers in the chain, main for one, leaves rbp
 *                    holding its own data, and whatever the walk reads beyond it is cut.)
 *
 * Prints "ready" once the threads run.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ASCII_WORD 0x0d4b4f2030303132ULL /* "21000 OK\r" less its last byte, little-endian */
#define WITH_FP __attribute__((noinline, optimize("no-omit-frame-pointer")))

static volatile int stop;

/* Never called: an address in it is the fake return address of spin_self_frame's frame. */
__attribute__((noinline)) void fake_caller(void)
{
	__asm__ volatile("nop; nop; nop; nop");
}

/*
 * A function that spins with rbp = `rbp` (saved and restored around each loop) until told to stop.
 * Not inlined, so that the frame its caller builds lies above its stack pointer, as real frames do.
 */
#define SPIN_WITH_RBP(name)                                                                        \
	__attribute__((noinline)) void name(uint64_t rbp)                                          \
	{                                                                                          \
		while (!stop) {                                                                    \
			unsigned long n = 1000000;                                                 \
			__asm__ volatile("push %%rbp\n\t"                                          \
					 "mov %1, %%rbp\n\t"                                       \
					 "1: dec %0\n\t"                                           \
					 "jnz 1b\n\t"                                              \
					 "pop %%rbp"                                               \
					 : "+r"(n)                                                 \
					 : "r"(rbp)                                                \
					 : "memory", "cc");                                        \
		}                                                                                  \
	}

SPIN_WITH_RBP(spin_ascii_rbp)
SPIN_WITH_RBP(spin_self_frame)
SPIN_WITH_RBP(spin_ascii_ret)

static void *burn_ascii_rbp(void *arg)
{
	spin_ascii_rbp(ASCII_WORD);
	return arg;
}

static void *burn_self_frame(void *arg)
{
	volatile uint64_t frame[2] __attribute__((aligned(16)));

	frame[0] = (uint64_t)(uintptr_t)frame;
	frame[1] = (uint64_t)(uintptr_t)fake_caller + 2;
	spin_self_frame((uint64_t)(uintptr_t)frame);
	__asm__ volatile("" ::: "memory"); /* the frame lives through the call */
	return arg;
}

static void *burn_ascii_ret(void *arg)
{
	volatile uint64_t frame[2] __attribute__((aligned(16)));

	frame[0] = 0;
	frame[1] = ASCII_WORD;
	spin_ascii_ret((uint64_t)(uintptr_t)frame);
	__asm__ volatile("" ::: "memory");
	return arg;
}

WITH_FP void normal_spin(void)
{
	while (!stop)
		for (volatile int i = 0; i < 100000; i++)
			;
}

WITH_FP void normal_outer(void)
{
	normal_spin();
	__asm__ volatile("" ::: "memory"); /* not a tail call */
}

/* With frame pointers from the thread's entry on: glibc starts threads with rbp = 0. */
WITH_FP static void *normal_thread(void *arg)
{
	normal_outer();
	__asm__ volatile("" ::: "memory");
	return arg;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 1.0;
	void *(*fns[])(void *) = {burn_ascii_rbp, burn_self_frame, burn_ascii_ret, normal_thread};
	struct timespec ts = {(time_t)secs, (long)((secs - (time_t)secs) * 1e9)};
	pthread_t t[4];

	for (int i = 0; i < 4; i++)
		if (pthread_create(&t[i], NULL, fns[i], NULL))
			return 1;
	printf("ready\n");
	fflush(stdout);
	nanosleep(&ts, NULL);
	stop = 1;
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	return 0;
}

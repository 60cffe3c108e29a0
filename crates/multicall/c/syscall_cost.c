/* syscall_cost.c: what a kernel crossing costs next to a procedure call (the paper: ~329 vs ~7
 * cycles on its Pentium). Times ITER getppid system calls (raw syscall(2), nothing cached) and
 * ITER calls of a noinline procedure, in TSC cycles (rdtsc) and ns, and prints both and the
 * ratio.  Usage: syscall_cost [ITER]   (default 1000000) */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static unsigned long long cycles(void) { return __rdtsc(); }
#else
static unsigned long long cycles(void) { return 0; } /* no TSC: cycles print as 0 */
#endif

static long sink;

__attribute__((noinline)) static long procedure(long x)
{
    __asm__ volatile("" : : : "memory"); /* not optimised away */
    return x + 1;
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    long iter = argc > 1 ? strtol(argv[1], NULL, 10) : 1000000;
    if (iter <= 0) {
        fprintf(stderr, "usage: %s [ITER]\n", argv[0]);
        return 2;
    }
    for (long i = 0; i < iter / 10; i++) /* warm up */
        sink += syscall(SYS_getppid) + procedure(i);

    long long t0 = now_ns();
    unsigned long long c0 = cycles();
    for (long i = 0; i < iter; i++)
        sink += syscall(SYS_getppid);
    unsigned long long c1 = cycles();
    long long t1 = now_ns();
    for (long i = 0; i < iter; i++)
        sink = procedure(sink);
    unsigned long long c2 = cycles();
    long long t2 = now_ns();

    double sys_cyc = (double)(c1 - c0) / iter, proc_cyc = (double)(c2 - c1) / iter;
    double sys_ns = (double)(t1 - t0) / iter, proc_ns = (double)(t2 - t1) / iter;
    printf("getppid syscall: %8.1f cycles %7.1f ns\n", sys_cyc, sys_ns);
    printf("procedure call:  %8.1f cycles %7.1f ns\n", proc_cyc, proc_ns);
    printf("ratio:           %8.1f x cycles, %.1f x ns (paper: ~329 vs ~7 cycles, ~47 x)\n",
           proc_cyc > 0 ? sys_cyc / proc_cyc : 0.0, sys_ns / proc_ns);
    return sink == 42 ? 1 : 0;
}

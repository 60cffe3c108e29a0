/* Known call chains for the unwinding tests (tests/unwind.rs), built -O2 -fomit-frame-pointer: no
 * function here keeps a frame pointer, so only unwind tables (.eh_frame) give the callers.
 *
 * Usage: unwind_chains MODE SECONDS [ARG]; burns SECONDS of CPU in the chain of MODE, then prints
 * "done MODE". Every chain's functions are noinline + noclone (no inlining, no `.isra`/`.constprop`
 * copies with other names) and use their callee's result after the call (no tail calls: a tail
 * call would drop the caller from the stack, and the truth with it). Expected stacks, root first,
 * from `_start` > `__libc_start_call_main` > main:
 *   chain     main > chain_outer > chain_middle > chain_inner > chain_hot
 *   qsort     main > sort_outer > sort_qsort > qsort_r > msort_with_tmp (repeated) > cmp_hot
 *   bsearch   main > sort_outer > sort_bsearch > bsearch > bsearch_cmp_hot
 *   signal    main > sig_outer > sig_busy > __restore_rt (signal frame) > sig_handler_hot
 *   recurse N main > recurse_outer > recurse (N times) > recurse_hot
 *   thread    clone3 > start_thread > thread_entry > thread_outer > thread_hot
 *   dlopen L  main > dl_outer > lib_outer (in L) > lib_hot (in L)
 *   syscall   main > sys_outer > sys_inner > read (libc) > [kernel: sys_read ...]
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))
/* After a call: the compiler must assume memory changed, so the call is not a tail call. */
#define KEEP() __asm__ volatile("" ::: "memory")

static double end_time;
static volatile unsigned long sink;

/* The process's CPU time: the number of samples does not depend on how busy the machine is. */
static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int over(void)
{
	return now() >= end_time;
}

/* ~1 ms of arithmetic the compiler cannot fold. */
#define SPIN(n)                                                                            \
	do {                                                                               \
		unsigned long x_ = sink;                                                   \
		for (long i_ = 0; i_ < (n); i_++)                                          \
			x_ = x_ * 6364136223846793005UL + 1442695040888963407UL;           \
		sink = x_;                                                                 \
	} while (0)

/* a. a chain several levels deep */
NOINLINE long chain_hot(long n)
{
	SPIN(n);
	return (long)(sink & 1);
}

NOINLINE long chain_inner(long n)
{
	long r = chain_hot(n);
	KEEP();
	return r + 1;
}

NOINLINE long chain_middle(long n)
{
	long r = chain_inner(n);
	KEEP();
	return r + 1;
}

NOINLINE long chain_outer(long n)
{
	long r = chain_middle(n);
	KEEP();
	return r + 1;
}

/* b. callbacks called from inside libc */
static long cmp_work;

NOINLINE int cmp_hot(const void *a, const void *b)
{
	SPIN(cmp_work);
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
	return (x > y) - (x < y);
}

NOINLINE int bsearch_cmp_hot(const void *key, const void *elem)
{
	SPIN(cmp_work);
	unsigned x = *(const unsigned *)key, y = *(const unsigned *)elem;
	return (x > y) - (x < y);
}

#define NSORT 4096
static unsigned sort_buf[NSORT];

NOINLINE long sort_qsort(void)
{
	unsigned s = 12345;
	for (int i = 0; i < NSORT; i++)
		sort_buf[i] = s = s * 1103515245 + 12345;
	qsort(sort_buf, NSORT, sizeof(unsigned), cmp_hot);
	KEEP();
	return sort_buf[0];
}

/* <stdlib.h> defines bsearch inline at -O2 (bits/stdlib-bsearch.h): through a volatile pointer
 * the call goes to libc's own bsearch, which then calls the comparator. */
static void *(*volatile bsearch_fn)(const void *, const void *, size_t, size_t,
				   int (*)(const void *, const void *)) = bsearch;

NOINLINE long sort_bsearch(void)
{
	long found = 0;
	for (int i = 0; i < NSORT; i += 7)
		found += bsearch_fn(&sort_buf[i], sort_buf, NSORT, sizeof(unsigned),
				    bsearch_cmp_hot) != NULL;
	KEEP();
	return found;
}

NOINLINE long sort_outer(int use_bsearch)
{
	long r = use_bsearch ? sort_bsearch() : sort_qsort();
	KEEP();
	return r + 1;
}

/* c. a signal handler on top of a running function */
static volatile int sig_done;

NOINLINE void sig_handler_hot(int sig)
{
	(void)sig;
	SPIN(5000000);
	if (over())
		sig_done = 1;
}

NOINLINE long sig_busy(void)
{
	unsigned long x = 1;
	while (!sig_done)
		x = x * 2862933555777941757UL + 3037000493UL;
	return (long)x;
}

NOINLINE long sig_outer(void)
{
	long r = sig_busy();
	KEEP();
	return r + 1;
}

/* d. recursion */
NOINLINE long recurse_hot(long n)
{
	SPIN(n);
	return (long)(sink & 1);
}

NOINLINE long recurse(int depth, long n)
{
	/* A volatile slot read after the call: no tail-recursion elimination into a loop. */
	volatile long keep = depth;
	long r = depth <= 1 ? recurse_hot(n) : recurse(depth - 1, n);
	return r + keep;
}

NOINLINE long recurse_outer(int depth, long n)
{
	long r = recurse(depth, n);
	KEEP();
	return r + 1;
}

/* e. a thread */
NOINLINE long thread_hot(long n)
{
	SPIN(n);
	return (long)(sink & 1);
}

NOINLINE long thread_outer(long n)
{
	long r = thread_hot(n);
	KEEP();
	return r + 1;
}

static void *thread_entry(void *arg)
{
	long r = 0;
	(void)arg;
	while (!over())
		r += thread_outer(300000);
	KEEP();
	return (void *)r;
}

/* f. dlopen: lib_outer and lib_hot live in the library */
NOINLINE long dl_outer(long (*lib_outer)(long), long n)
{
	long r = lib_outer(n);
	KEEP();
	return r + 1;
}

/* syscall: the time is in the kernel, under a known user chain */
static char zero_buf[1 << 20];

NOINLINE long sys_inner(int fd)
{
	long r = read(fd, zero_buf, sizeof(zero_buf));
	KEEP();
	return r;
}

NOINLINE long sys_outer(int fd)
{
	long r = sys_inner(fd);
	KEEP();
	return r + 1;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s MODE SECONDS [ARG]\n", argv[0]);
		return 2;
	}
	const char *mode = argv[1];
	end_time = now() + atof(argv[2]);
	long r = 0;

	if (!strcmp(mode, "chain")) {
		while (!over())
			r += chain_outer(300000);
	} else if (!strcmp(mode, "qsort") || !strcmp(mode, "bsearch")) {
		int bs = !strcmp(mode, "bsearch");
		if (bs)
			sort_qsort(); /* sorted once, cheaply, for bsearch */
		cmp_work = 300;
		while (!over())
			r += sort_outer(bs);
	} else if (!strcmp(mode, "signal")) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = sig_handler_hot;
		sigaction(SIGPROF, &sa, NULL);
		struct itimerval it = { { 0, 10000 }, { 0, 10000 } };
		setitimer(ITIMER_PROF, &it, NULL);
		r = sig_outer();
		it = (struct itimerval){ { 0, 0 }, { 0, 0 } };
		setitimer(ITIMER_PROF, &it, NULL);
	} else if (!strcmp(mode, "recurse")) {
		int depth = argc > 3 ? atoi(argv[3]) : 150;
		while (!over())
			r += recurse_outer(depth, 300000);
	} else if (!strcmp(mode, "thread")) {
		pthread_t t;
		void *ret;
		pthread_create(&t, NULL, thread_entry, NULL);
		pthread_join(t, &ret);
		r = (long)ret;
	} else if (!strcmp(mode, "dlopen")) {
		if (argc < 4) {
			fprintf(stderr, "dlopen needs the library's path\n");
			return 2;
		}
		void *h = dlopen(argv[3], RTLD_NOW);
		if (!h) {
			fprintf(stderr, "dlopen: %s\n", dlerror());
			return 1;
		}
		long (*lib_outer)(long) = (long (*)(long))dlsym(h, "lib_outer");
		while (!over())
			r += dl_outer(lib_outer, 300000);
	} else if (!strcmp(mode, "syscall")) {
		int fd = open("/dev/zero", O_RDONLY);
		if (fd < 0) {
			perror("/dev/zero");
			return 1;
		}
		while (!over())
			r += sys_outer(fd);
	} else {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	printf("done %s %ld\n", mode, r & 1);
	return 0;
}

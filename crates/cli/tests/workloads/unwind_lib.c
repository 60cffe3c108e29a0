/* The dlopen()ed half of unwind_chains' `dlopen` mode (tests/unwind.rs): built as a shared object
 * -O2 -fomit-frame-pointer -fPIC, loaded after the process started, so its unwind tables come from
 * a mapping made mid-run. Stack: ... > dl_outer (executable) > lib_outer > lib_hot. */
#define NOINLINE __attribute__((noinline, noclone))

static volatile unsigned long lib_sink;

NOINLINE long lib_hot(long n)
{
	unsigned long x = lib_sink;
	for (long i = 0; i < n; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	lib_sink = x;
	return (long)(x & 1);
}

/* Exported; calls lib_hot directly (a local call: -fvisibility would not change the stack). */
NOINLINE long lib_outer(long n)
{
	long r = lib_hot(n);
	__asm__ volatile("" ::: "memory");
	return r + 1;
}

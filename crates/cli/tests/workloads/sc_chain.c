/*
 * A known call chain into two syscalls, for the call sites of `pkprof syscalls` unwound without
 * frame pointers: the test builds it `-O2 -fomit-frame-pointer`, so that only the unwind tables
 * (.eh_frame) lead from the syscall back to main.
 *
 *   main -> outer -> inner -> read(/dev/zero, 64 bytes) then write(/dev/null, 64 bytes), N times
 *
 * Usage: sc_chain [N]   (default 20000)
 *
 * noipa: no inlining, cloning (inner.constprop.0) or other interprocedural change, so the
 * functions keep their names; the volatile store after each call keeps it from being a tail call
 * (a jump leaves no frame: perf would not see the caller either).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

volatile int sink;

__attribute__((noipa)) void inner(int in, int out, long n)
{
	char buf[64];

	for (long i = 0; i < n; i++) {
		if (read(in, buf, sizeof(buf)) != sizeof(buf) ||
		    write(out, buf, sizeof(buf)) != sizeof(buf))
			exit(1);
	}
	sink = buf[0];
}

__attribute__((noipa)) void outer(int in, int out, long n)
{
	inner(in, out, n);
	sink++;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000;
	int in = open("/dev/zero", O_RDONLY), out = open("/dev/null", O_WRONLY);

	if (in < 0 || out < 0)
		return 1;
	outer(in, out, n);
	sink++;
	return 0;
}

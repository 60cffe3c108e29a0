/* sys_mix N SECONDS: waits for a line on stdin, makes exactly N getppid() syscalls, then spins in
 * user space for SECONDS without any syscall, prints "done", and exits. Used to check the exact
 * per-syscall count and the user/kernel split of `pkprof top --syscalls`. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO: no syscall */
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	char line[16];

	if (argc != 3)
		return 2;
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	long n = atol(argv[1]);
	for (long i = 0; i < n; i++)
		syscall(SYS_getppid);
	double end = now() + atof(argv[2]);
	volatile unsigned long x = 0;
	while (now() < end)
		for (int i = 0; i < 100000; i++)
			x += i;
	printf("done\n");
	fflush(stdout);
	return 0;
}

/*
 * fork_children N SPIN_US: waits for a line on stdin (the gate), then forks N children (at most 4
 * alive at once), each spinning SPIN_US of its own CPU time before _exit(0). After reaping them
 * all it prints "children N CPU_NS": getrusage(RUSAGE_CHILDREN) user+sys, which the kernel scales
 * to the children's exact runtime (sum_exec_runtime).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000, alive = 0, reaped = 0;
	long long spin = (argc > 2 ? atoll(argv[2]) : 1500) * 1000LL;
	struct rusage ru;
	char line[64];

	if (!fgets(line, sizeof(line), stdin))
		return 1;
	for (int i = 0; i < n; i++) {
		pid_t pid;

		if (alive == 4) {
			if (wait(NULL) > 0)
				reaped++;
			alive--;
		}
		pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			long long until = ns(CLOCK_PROCESS_CPUTIME_ID) + spin;

			while (ns(CLOCK_PROCESS_CPUTIME_ID) < until)
				;
			_exit(0);
		}
		alive++;
	}
	while (wait(NULL) > 0)
		reaped++;
	getrusage(RUSAGE_CHILDREN, &ru);
	printf("children %d %lld\n", reaped,
	       (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
		       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL);
	fflush(stdout);
	return 0;
}

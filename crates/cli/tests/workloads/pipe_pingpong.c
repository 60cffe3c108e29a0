/*
 * pipe_pingpong SECONDS: a parent and a child pass one byte back and forth over two pipes for
 * SECONDS seconds, so every round trip is two context switches on each side (a sched_switch-heavy
 * load for tests of what runs at every switch). Prints the round trips done.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
	perror(what);
	exit(1);
}

int main(int argc, char **argv)
{
	int ping[2], pong[2];
	double secs = argc > 1 ? atof(argv[1]) : 1.0;
	struct timespec start, now;
	unsigned long trips = 0;
	char c = 0;
	pid_t child;

	if (pipe(ping) || pipe(pong))
		die("pipe");
	child = fork();
	if (child < 0)
		die("fork");
	if (child == 0) {
		/* Echo until the parent closes its end (the child holds no write end of ping). */
		close(ping[1]);
		close(pong[0]);
		while (read(ping[0], &c, 1) == 1)
			if (write(pong[1], &c, 1) != 1)
				die("write");
		return 0;
	}
	close(ping[0]);
	close(pong[1]);
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1)
			die("ping-pong");
		trips++;
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < secs);
	close(ping[1]);
	waitpid(child, NULL, 0);
	printf("%lu round trips\n", trips);
	return 0;
}

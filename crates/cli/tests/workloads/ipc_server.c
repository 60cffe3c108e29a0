/*
 * ipc_server KIND MODE SECONDS [THINK_A_US THINK_B_US]: a server process and two client
 * processes, A and B, that send it requests and wait for each reply. Every request costs the
 * server the same fixed work (a spin loop), so its CPU time per client follows the requests it
 * served, which it counts itself: the ground truth of the server chain's tests.
 *
 * KIND: `unix` (a stream socketpair per connection), `pipe` (a request and a reply pipe per
 * connection) or `tcp` (a loopback TCP connection per connection).
 * MODE: `single` (one server thread, polling one connection per client), `pool` (two worker
 * threads, each polling its own connection from each client; the clients alternate), `exit`
 * (single, and client B exits after half the time).
 * Clients A and B think THINK_A_US and THINK_B_US between requests on average (default 1000 and
 * 3000: about 3:1), each think drawn uniformly over [0.5, 1.5) of it, with no timer slack.
 *
 * Protocol on stdout/stdin: "ready SERVER_PID A_PID B_PID", then waits for a line on stdin, then
 * "start", and at the end "end SERVED_A SERVED_B CPU_A_NS CPU_B_NS" (requests the server served per
 * client, and its thread CPU time from each request read to its reply written, per client).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WORK_ITERS 600000
#define MAX_CONN 2

struct conn {
	int srv_rd, srv_wr; /* the server's ends */
	int cli_rd, cli_wr; /* the client's ends */
};

struct msg {
	uint32_t client;
	uint32_t seq;
};

static struct conn conns[2][MAX_CONN]; /* [client][connection] */
static int nconn = 1;
static unsigned long served[2][MAX_CONN]; /* [client][worker] */
/* The serving thread's own CPU time per client (CLOCK_THREAD_CPUTIME_ID, the kernel's clock of the
 * thread), from each request read to its reply written: [client][worker], ns. */
static unsigned long long cpu_ns[2][MAX_CONN];

static unsigned long long thread_cpu_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (unsigned long long)t.tv_sec * 1000000000ull + t.tv_nsec;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void full_write(int fd, const void *buf, size_t n)
{
	if (write(fd, buf, n) != (ssize_t)n)
		die("write");
}

/* Reads exactly n bytes; 0 at EOF. */
static int full_read(int fd, void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, (char *)buf + got, n - got);

		if (r == 0)
			return 0;
		if (r < 0)
			die("read");
		got += r;
	}
	return 1;
}

static void work(void)
{
	volatile unsigned long x = 0;

	for (unsigned long i = 0; i < WORK_ITERS; i++)
		x += i * i;
}

static void *worker(void *arg)
{
	long w = (long)arg;
	struct pollfd p[2];
	int open = 2;

	for (int c = 0; c < 2; c++) {
		p[c].fd = conns[c][w].srv_rd;
		p[c].events = POLLIN;
	}
	while (open) {
		if (poll(p, 2, -1) < 0)
			die("poll");
		for (int c = 0; c < 2; c++) {
			struct msg m;

			if (p[c].fd < 0 || !(p[c].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (!full_read(p[c].fd, &m, sizeof(m))) {
				p[c].fd = -1;
				open--;
				continue;
			}
			unsigned long long t0 = thread_cpu_ns();
			work();
			served[m.client & 1][w]++;
			full_write(conns[c][w].srv_wr, &m, sizeof(m));
			cpu_ns[m.client & 1][w] += thread_cpu_ns() - t0;
		}
	}
	return NULL;
}

static void client(int c, int gate, double secs, long think_us)
{
	struct msg m = { .client = c };
	unsigned seed = 0x9e3779b9u * (unsigned)(c + 1);
	char go;
	double end;

	/*
	 * Thinking at a fixed period close to a sampler's (1 ms at -F 999) would phase-lock the
	 * requests to the samples, more so as a sleep's timer slack lets it expire with the
	 * sampler's own timer interrupt: the samples of the server's work would then not be
	 * independent draws. So: no slack, and a think time drawn uniformly over [0.5, 1.5) of the
	 * mean (the same mean: the 3:1 rate stays).
	 */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

	/* The gate opens at EOF: no data, so no mark from the server. */
	if (read(gate, &go, 1) != 0)
		die("gate");
	end = now_s() + secs;
	for (unsigned k = 0; now_s() < end; k++) {
		struct conn *x = &conns[c][k % nconn];

		m.seq = k;
		full_write(x->cli_wr, &m, sizeof(m));
		if (!full_read(x->cli_rd, &m, sizeof(m)))
			die("server closed");
		if (think_us)
			usleep(think_us / 2 + rand_r(&seed) % (think_us > 0 ? think_us : 1));
	}
	exit(0);
}

static int tcp_listen(struct sockaddr_in *a)
{
	socklen_t len = sizeof(*a);
	int l = socket(AF_INET, SOCK_STREAM, 0);

	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (l < 0 || bind(l, (struct sockaddr *)a, sizeof(*a)) || listen(l, 8) ||
	    getsockname(l, (struct sockaddr *)a, &len))
		die("listen");
	return l;
}

static void make_conn(const char *kind, struct conn *x, int l, struct sockaddr_in *a)
{
	if (!strcmp(kind, "unix")) {
		int sv[2];

		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
			die("socketpair");
		x->srv_rd = x->srv_wr = sv[0];
		x->cli_rd = x->cli_wr = sv[1];
	} else if (!strcmp(kind, "pipe")) {
		int req[2], rep[2];

		if (pipe(req) || pipe(rep))
			die("pipe");
		x->srv_rd = req[0];
		x->cli_wr = req[1];
		x->cli_rd = rep[0];
		x->srv_wr = rep[1];
	} else if (!strcmp(kind, "tcp")) {
		int one = 1;
		int s = socket(AF_INET, SOCK_STREAM, 0);

		if (s < 0 || connect(s, (struct sockaddr *)a, sizeof(*a)))
			die("connect");
		x->srv_rd = x->srv_wr = accept(l, NULL, NULL);
		if (x->srv_rd < 0)
			die("accept");
		setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		setsockopt(x->srv_rd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		x->cli_rd = x->cli_wr = s;
	} else {
		fprintf(stderr, "ipc_server: unknown kind %s\n", kind);
		exit(2);
	}
}

/* Closes in this process every end that is not the given side's (client c, or the server: -1). */
static void keep_ends(int c)
{
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < nconn; k++) {
			struct conn *x = &conns[i][k];

			if (c < 0) {
				if (x->cli_rd != x->srv_rd)
					close(x->cli_rd);
				if (x->cli_wr != x->cli_rd && x->cli_wr != x->srv_wr)
					close(x->cli_wr);
			} else {
				if (x->srv_rd != x->cli_rd)
					close(x->srv_rd);
				if (x->srv_wr != x->srv_rd && x->srv_wr != x->cli_wr)
					close(x->srv_wr);
				if (i != c) {
					close(x->cli_rd);
					if (x->cli_wr != x->cli_rd)
						close(x->cli_wr);
				}
			}
		}
}

int main(int argc, char **argv)
{
	const char *kind, *mode;
	double secs;
	long think[2] = { 1000, 3000 };
	int gate[2][2], l = -1;
	struct sockaddr_in a;
	pid_t pids[2];
	pthread_t th[MAX_CONN];
	char line[64];

	if (argc < 4) {
		fprintf(stderr, "usage: ipc_server unix|pipe|tcp single|pool|exit SECONDS [THINK_A_US THINK_B_US]\n");
		return 2;
	}
	kind = argv[1];
	mode = argv[2];
	secs = atof(argv[3]);
	if (argc > 5) {
		think[0] = atol(argv[4]);
		think[1] = atol(argv[5]);
	}
	if (!strcmp(mode, "pool"))
		nconn = 2;
	else if (strcmp(mode, "single") && strcmp(mode, "exit")) {
		fprintf(stderr, "ipc_server: unknown mode %s\n", mode);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(kind, "tcp"))
		l = tcp_listen(&a);
	for (int c = 0; c < 2; c++)
		for (int k = 0; k < nconn; k++)
			make_conn(kind, &conns[c][k], l, &a);
	for (int c = 0; c < 2; c++) {
		if (pipe(gate[c]))
			die("pipe");
		pids[c] = fork();
		if (pids[c] < 0)
			die("fork");
		if (pids[c] == 0) {
			keep_ends(c);
			for (int j = 0; j <= c; j++)
				close(gate[j][1]); /* an earlier client's gate opens at its EOF */
			client(c, gate[c][0],
			       c == 1 && !strcmp(mode, "exit") ? secs / 2 : secs, think[c]);
		}
		close(gate[c][0]);
	}
	keep_ends(-1);
	printf("ready %d %d %d\n", getpid(), pids[0], pids[1]);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	printf("start\n");
	fflush(stdout);
	for (int c = 0; c < 2; c++)
		close(gate[c][1]);
	/* The clients close their ends when they exit: each worker ends at its EOFs. */
	if (nconn == 1) {
		worker(0); /* single-threaded: the main thread serves */
	} else {
		for (long w = 0; w < nconn; w++)
			if (pthread_create(&th[w], NULL, worker, (void *)w))
				die("pthread_create");
		for (int w = 0; w < nconn; w++)
			pthread_join(th[w], NULL);
	}
	for (int c = 0; c < 2; c++)
		waitpid(pids[c], NULL, 0);
	printf("end %lu %lu %llu %llu\n", served[0][0] + served[0][1], served[1][0] + served[1][1],
	       cpu_ns[0][0] + cpu_ns[0][1], cpu_ns[1][0] + cpu_ns[1][1]);
	fflush(stdout);
	return 0;
}

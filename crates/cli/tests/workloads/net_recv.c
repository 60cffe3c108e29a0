/*
 * net_recv NETNS PROTO ADDR PORT CPU [spin]: a socket receiver for the NET attribution tests.
 * Enters network namespace NETNS (/run/netns/NETNS; "-" stays put), pins itself to CPU (-1: no
 * pinning), binds ADDR:PORT (IPv4 or IPv6 literal) with PROTO "udp" or "tcp" and prints "ready".
 * UDP: receives datagrams until stdin reaches EOF, then drains what is queued. TCP: accepts one
 * connection and reads until the peer closes it (or stdin reaches EOF).
 * With "spin" it polls with non-blocking reads and never sleeps, so the sender never has to wake
 * it up (the kernel's receive work per packet is then the same for every socket).
 * Prints "received PACKETS BYTES" (PACKETS: datagrams for UDP, successful reads for TCP).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static atomic_int stop;

static void *watch_stdin(void *arg)
{
	char buf[64];

	(void)arg;
	while (read(0, buf, sizeof(buf)) > 0)
		;
	atomic_store(&stop, 1);
	return NULL;
}

static void enter_netns(const char *name)
{
	char path[256];
	int fd;

	if (!strcmp(name, "-"))
		return;
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET)) {
		perror(path);
		exit(1);
	}
	close(fd);
}

static void pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("sched_setaffinity");
		exit(1);
	}
}

/* Fills ss from an IPv4 or IPv6 literal; returns the address length. */
static socklen_t parse_addr(const char *addr, int port, struct sockaddr_storage *ss)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons(port);
		return sizeof(*a4);
	}
	if (inet_pton(AF_INET6, addr, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(port);
		return sizeof(*a6);
	}
	fprintf(stderr, "bad address %s\n", addr);
	exit(1);
}

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	struct timeval tmo = { .tv_sec = 0, .tv_usec = 100000 };
	long long packets = 0, bytes = 0;
	int tcp, spin, fd, one = 1, rcvbuf = 4 << 20;
	static char buf[1 << 16];
	socklen_t len;
	pthread_t w;
	ssize_t n;

	if (argc != 6 && argc != 7) {
		fprintf(stderr, "usage: net_recv NETNS udp|tcp ADDR PORT CPU [spin]\n");
		return 2;
	}
	enter_netns(argv[1]);
	pin(atoi(argv[5]));
	tcp = !strcmp(argv[2], "tcp");
	spin = argc == 7 && !strcmp(argv[6], "spin");
	len = parse_addr(argv[3], atoi(argv[4]), &ss);
	fd = socket(ss.ss_family, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (bind(fd, (struct sockaddr *)&ss, len) || (tcp && listen(fd, 4))) {
		perror("bind/listen");
		return 1;
	}
	pthread_create(&w, NULL, watch_stdin, NULL);
	printf("ready\n");
	fflush(stdout);
	if (tcp) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int c;

		while (!atomic_load(&stop) && poll(&p, 1, 100) <= 0)
			;
		if (atomic_load(&stop)) {
			printf("received 0 0\n");
			return 0;
		}
		c = accept(fd, NULL, NULL);
		if (c < 0) {
			perror("accept");
			return 1;
		}
		close(fd);
		fd = c;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tmo, sizeof(tmo));
	for (;;) {
		int stopping = atomic_load(&stop);

		n = recv(fd, buf, sizeof(buf), stopping || spin ? MSG_DONTWAIT : 0);
		if (n > 0) {
			packets++;
			bytes += n;
		} else if (n == 0 && tcp) {
			break; /* the peer closed the stream */
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
			if (stopping && errno != EINTR)
				break; /* drained after the stop */
		} else if (n < 0) {
			perror("recv");
			return 1;
		}
	}
	printf("received %lld %lld\n", packets, bytes);
	fflush(stdout);
	return 0;
}

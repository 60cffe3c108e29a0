/*
 * net_send NETNS PROTO ADDR PORTS CPU SECONDS SIZE PPS: a socket sender for the NET attribution
 * tests. Enters network namespace NETNS ("-" stays put), pins itself to CPU (-1: no pinning).
 * UDP: sends SIZE-byte datagrams to ADDR for SECONDS, at about PPS datagrams per second in bursts
 * of 16 (PPS 0: as fast as possible). PORTS is "PORT" or "PORT:WEIGHT,PORT:WEIGHT,..." and the
 * datagrams go round-robin, WEIGHT in a row to each port. TCP: connects to ADDR:PORT and writes
 * SIZE-byte chunks for SECONDS (PPS ignored), then closes the stream.
 * Prints "sent PACKETS BYTES" and, for UDP, "port PORT PACKETS" per destination.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_PORTS 8
#define BURST 16

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
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
	struct sockaddr_storage dst[MAX_PORTS];
	int port[MAX_PORTS], weight[MAX_PORTS];
	long long per_port[MAX_PORTS] = { 0 };
	long long end, next, period, pps, packets = 0, bytes = 0;
	int nports = 0, tcp, fd, size, p = 0, k = 0;
	socklen_t len = 0;
	char *spec, *tok, *save;
	static char buf[1 << 20];
	struct timespec ts;

	if (argc != 9) {
		fprintf(stderr, "usage: net_send NETNS udp|tcp ADDR PORTS CPU SECONDS SIZE PPS\n");
		return 2;
	}
	enter_netns(argv[1]);
	pin(atoi(argv[5]));
	tcp = !strcmp(argv[2], "tcp");
	spec = strdup(argv[4]);
	for (tok = strtok_r(spec, ",", &save); tok && nports < MAX_PORTS; tok = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(tok, ':');

		port[nports] = atoi(tok);
		weight[nports] = colon ? atoi(colon + 1) : 1;
		len = parse_addr(argv[3], port[nports], &dst[nports]);
		nports++;
	}
	size = atoi(argv[7]);
	if (size < 1 || size > (int)sizeof(buf) || !nports) {
		fprintf(stderr, "bad size or ports\n");
		return 2;
	}
	memset(buf, 'p', size);
	pps = atoll(argv[8]);
	period = pps > 0 ? BURST * 1000000000LL / pps : 0;
	fd = socket(dst[0].ss_family, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
	if (tcp && connect(fd, (struct sockaddr *)&dst[0], len)) {
		perror("connect");
		return 1;
	}
	end = now_ns() + (long long)(atof(argv[6]) * 1e9);
	next = now_ns();
	while (now_ns() < end) {
		if (tcp) {
			ssize_t n = send(fd, buf, size, 0);

			if (n < 0) {
				perror("send");
				return 1;
			}
			packets++;
			bytes += n;
			continue;
		}
		for (int i = 0; i < BURST; i++) {
			if (sendto(fd, buf, size, 0, (struct sockaddr *)&dst[p], len) == size) {
				packets++;
				bytes += size;
				per_port[p]++;
			} else if (errno != ENOBUFS && errno != EAGAIN) {
				perror("sendto");
				return 1;
			}
			if (++k >= weight[p]) {
				k = 0;
				p = (p + 1) % nports;
			}
		}
		if (period) {
			next += period;
			ts.tv_sec = next / 1000000000LL;
			ts.tv_nsec = next % 1000000000LL;
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		}
	}
	close(fd);
	printf("sent %lld %lld\n", packets, bytes);
	for (int i = 0; i < nports && !tcp; i++)
		printf("port %d %lld\n", port[i], per_port[i]);
	fflush(stdout);
	return 0;
}

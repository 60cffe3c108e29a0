/*
 * udp_flood CPU PPS BURST: a sender and a receiver thread, both pinned to CPU, exchanging 64-byte
 * UDP datagrams over 127.0.0.1 at about PPS packets per second, sent in bursts of BURST. Prints
 * "flood PORT" once running; stops when stdin reaches EOF and prints "sent N received M".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop;
static int cpu, rx;
static long long received;

static void pin(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("sched_setaffinity");
		exit(1);
	}
}

static void *receiver(void *arg)
{
	char buf[2048];

	(void)arg;
	pin();
	while (!atomic_load(&stop))
		if (recv(rx, buf, sizeof(buf), 0) > 0)
			received++;
	return NULL;
}

static void *watch_stdin(void *arg)
{
	char buf[64];

	(void)arg;
	while (read(0, buf, sizeof(buf)) > 0)
		;
	atomic_store(&stop, 1);
	return NULL;
}

int main(int argc, char **argv)
{
	long long pps = argc > 2 ? atoll(argv[2]) : 20000, burst = argc > 3 ? atoll(argv[3]) : 8;
	long long period = burst * 1000000000LL / pps, sent = 0;
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timeval tmo = { .tv_sec = 0, .tv_usec = 100000 };
	socklen_t len = sizeof(addr);
	int tx, rcvbuf = 4 << 20;
	pthread_t r, w;
	struct timespec ts;
	char payload[64] = "pkprof";

	cpu = argc > 1 ? atoi(argv[1]) : 0;
	pin();
	rx = socket(AF_INET, SOCK_DGRAM, 0);
	tx = socket(AF_INET, SOCK_DGRAM, 0);
	setsockopt(rx, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	setsockopt(rx, SOL_SOCKET, SO_RCVTIMEO, &tmo, sizeof(tmo));
	if (bind(rx, (struct sockaddr *)&addr, sizeof(addr)) || getsockname(rx, (struct sockaddr *)&addr, &len)) {
		perror("bind");
		return 1;
	}
	pthread_create(&r, NULL, receiver, NULL);
	pthread_create(&w, NULL, watch_stdin, NULL);
	printf("flood %d\n", ntohs(addr.sin_port));
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	while (!atomic_load(&stop)) {
		for (int i = 0; i < burst; i++)
			if (sendto(tx, payload, sizeof(payload), 0, (struct sockaddr *)&addr, sizeof(addr)) > 0)
				sent++;
		ts.tv_nsec += period;
		while (ts.tv_nsec >= 1000000000L) {
			ts.tv_nsec -= 1000000000L;
			ts.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	}
	pthread_join(r, NULL);
	printf("sent %lld received %lld\n", sent, received);
	fflush(stdout);
	return 0;
}

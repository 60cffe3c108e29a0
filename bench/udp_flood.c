// 64-byte UDP loopback flood: one sender thread, one receiver thread, one packet per syscall
// (send/recv, no batching), for a fixed measured duration after a short warm-up.
//
// Usage: udp_flood [SECONDS [PAYLOAD_BYTES [SENDER_CPU RECEIVER_CPU]]]   (defaults 3 s, 64 bytes,
//        threads unpinned; a CPU of -1 leaves that thread unpinned)
// Prints one line:
//   udp_flood: rx_pps=<received packets/s> tx_pps=<sent packets/s> rx=<n> tx=<n> secs=<measured>
// rx_pps is the figure of merit; tx_pps is higher when the receiver cannot keep up (the kernel drops
// the excess at the full socket buffer).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static atomic_bool stop;
static atomic_ullong rx_count, tx_count;
static int rx_fd, tx_fd;
static size_t payload = 64;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what) {
    fprintf(stderr, "udp_flood: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void pin_self(int cpu) {
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int err = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (err) {
        errno = err;
        die("pthread_setaffinity_np");
    }
}

static int sender_cpu = -1, receiver_cpu = -1;

static void *receiver(void *arg) {
    (void)arg;
    pin_self(receiver_cpu);
    char buf[2048];
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        ssize_t n = recv(rx_fd, buf, sizeof buf, 0);
        if (n >= 0)
            atomic_fetch_add_explicit(&rx_count, 1, memory_order_relaxed);
        else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            die("recv");
    }
    return NULL;
}

static void *sender(void *arg) {
    (void)arg;
    pin_self(sender_cpu);
    char buf[2048];
    memset(buf, 'x', sizeof buf);
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        ssize_t n = send(tx_fd, buf, payload, 0);
        if (n >= 0)
            atomic_fetch_add_explicit(&tx_count, 1, memory_order_relaxed);
        else if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR && errno != ECONNREFUSED)
            die("send");
    }
    return NULL;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 3.0;
    if (argc > 2)
        payload = (size_t)atoi(argv[2]);
    if (argc > 4) {
        sender_cpu = atoi(argv[3]);
        receiver_cpu = atoi(argv[4]);
    }
    if (secs <= 0 || payload < 1 || payload > 1400) {
        fprintf(stderr, "usage: udp_flood [SECONDS [PAYLOAD_BYTES (1..1400) [SENDER_CPU RECEIVER_CPU]]]\n");
        return 2;
    }

    rx_fd = socket(AF_INET, SOCK_DGRAM, 0);
    tx_fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (rx_fd < 0 || tx_fd < 0)
        die("socket");
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(rx_fd, (struct sockaddr *)&addr, sizeof addr) < 0)
        die("bind");
    socklen_t len = sizeof addr;
    if (getsockname(rx_fd, (struct sockaddr *)&addr, &len) < 0)
        die("getsockname");
    if (connect(tx_fd, (struct sockaddr *)&addr, sizeof addr) < 0)
        die("connect");
    // The receiver wakes at least every 100 ms so it notices the stop flag even if nothing arrives.
    struct timeval tv = {.tv_sec = 0, .tv_usec = 100000};
    if (setsockopt(rx_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0)
        die("setsockopt");

    pthread_t rt, st;
    if (pthread_create(&rt, NULL, receiver, NULL) || pthread_create(&st, NULL, sender, NULL)) {
        fprintf(stderr, "udp_flood: pthread_create failed\n");
        return 1;
    }

    // Warm-up, then count only over the measured window.
    usleep(300000);
    unsigned long long rx0 = atomic_load(&rx_count), tx0 = atomic_load(&tx_count);
    double t0 = now_s();
    struct timespec req = {.tv_sec = (time_t)secs, .tv_nsec = (long)((secs - (time_t)secs) * 1e9)};
    while (nanosleep(&req, &req) < 0 && errno == EINTR) {
    }
    unsigned long long rx1 = atomic_load(&rx_count), tx1 = atomic_load(&tx_count);
    double t1 = now_s();

    atomic_store(&stop, true);
    pthread_join(st, NULL);
    pthread_join(rt, NULL);

    double dt = t1 - t0;
    unsigned long long rx = rx1 - rx0, tx = tx1 - tx0;
    printf("udp_flood: rx_pps=%.0f tx_pps=%.0f rx=%llu tx=%llu secs=%.3f payload=%zu\n", rx / dt,
           tx / dt, rx, tx, dt, payload);
    return rx > 0 ? 0 : 1;
}

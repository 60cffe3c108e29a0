/*
 * Deterministic syscall patterns for `pkprof syscalls` tests: every run makes exactly the same
 * calls (no output, no timing-dependent waits except one 200 ms sleep that lets a thread finish
 * before it is joined), so its counts can be compared with `strace -f -c`'s.
 *
 * Usage: syscall_patterns DIR [PATTERN...]   (default: all patterns)
 *   copy    4 KiB read/write loop copying a 200 KiB file      -> copy_file_range / sendfile
 *   writes  300 consecutive 64-byte writes                     -> writev
 *   closes  dup an fd 64 times, then close them one by one     -> close_range
 *   dgrams  200 sendmsg, then 200 recvmsg on a datagram pair   -> sendmmsg / recvmmsg
 *   polls   100 x (poll a pipe, read it)                       -> epoll
 *   stats   100 x (openat, fstat, read, close) of a small file -> one multi-call
 *   thread  a thread doing 50 getppid                          (per-thread graphs)
 *   child   a forked child doing 40 getpid, waited for         (strace -f)
 *   signals 20 signals handled (each returns through rt_sigreturn)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char path_in[4096], path_out[4096], path_small[4096];

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* Files are made with raw syscalls only, like everything else: counts stay exact. */
static void make_file(const char *path, size_t size)
{
	static char block[4096];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0)
		die("open");
	memset(block, 'x', sizeof(block));
	for (size_t done = 0; done < size; done += sizeof(block))
		if (write(fd, block, size - done < sizeof(block) ? size - done : sizeof(block)) < 0)
			die("write");
	close(fd);
}

static __attribute__((noinline)) void copy_file(void)
{
	static char buf[4096];
	int in = open(path_in, O_RDONLY), out = open(path_out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ssize_t n;

	if (in < 0 || out < 0)
		die("open");
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n)
			die("write");
	close(in);
	close(out);
}

static __attribute__((noinline)) void many_writes(void)
{
	char line[64];
	int fd = open(path_out, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	memset(line, 'y', sizeof(line));
	for (int i = 0; i < 300; i++)
		if (write(fd, line, sizeof(line)) != sizeof(line))
			die("write");
	close(fd);
}

static __attribute__((noinline)) void many_closes(void)
{
	int fds[64];

	for (int i = 0; i < 64; i++)
		fds[i] = dup(0);
	for (int i = 0; i < 64; i++)
		close(fds[i]);
}

static __attribute__((noinline)) void datagrams(void)
{
	int sv[2];
	char byte = 'z';
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv))
		die("socketpair");
	for (int i = 0; i < 200; i++)
		if (sendmsg(sv[0], &msg, 0) != 1)
			die("sendmsg");
	for (int i = 0; i < 200; i++)
		if (recvmsg(sv[1], &msg, 0) != 1)
			die("recvmsg");
	close(sv[0]);
	close(sv[1]);
}

static __attribute__((noinline)) void polls(void)
{
	int p[2];
	char c;

	if (pipe(p))
		die("pipe");
	for (int i = 0; i < 100; i++) {
		struct pollfd pfd = { .fd = p[0], .events = POLLIN };

		if (write(p[1], "p", 1) != 1 || poll(&pfd, 1, -1) != 1 || read(p[0], &c, 1) != 1)
			die("poll loop");
	}
	close(p[0]);
	close(p[1]);
}

static __attribute__((noinline)) void stats(void)
{
	char buf[256];
	struct stat st;

	for (int i = 0; i < 100; i++) {
		int fd = open(path_small, O_RDONLY);

		if (fd < 0 || fstat(fd, &st) || read(fd, buf, sizeof(buf)) < 0)
			die("stat loop");
		close(fd);
	}
}

static void *thread_main(void *arg)
{
	(void)arg;
	for (int i = 0; i < 50; i++)
		syscall(SYS_getppid);
	return NULL;
}

static __attribute__((noinline)) void thread(void)
{
	pthread_t t;
	struct timespec settle = { 0, 200 * 1000 * 1000 };

	if (pthread_create(&t, NULL, thread_main, NULL))
		die("pthread_create");
	nanosleep(&settle, NULL); /* the thread has exited: the join never waits (no futex) */
	pthread_join(t, NULL);
}

static __attribute__((noinline)) void child(void)
{
	pid_t pid = fork();

	if (pid < 0)
		die("fork");
	if (pid == 0) {
		for (int i = 0; i < 40; i++)
			syscall(SYS_getpid);
		_exit(0);
	}
	waitpid(pid, NULL, 0);
}

static volatile sig_atomic_t handled;

static void on_usr1(int sig)
{
	(void)sig;
	handled++;
}

static __attribute__((noinline)) void signals(void)
{
	struct sigaction sa = { .sa_handler = on_usr1 };

	sigaction(SIGUSR1, &sa, NULL);
	for (int i = 0; i < 20; i++)
		kill(getpid(), SIGUSR1); /* delivered before kill returns to user space */
	if (handled != 20)
		die("signals");
}

static const struct {
	const char *name;
	void (*run)(void);
} patterns[] = {
	{ "copy", copy_file }, { "writes", many_writes }, { "closes", many_closes },
	{ "dgrams", datagrams }, { "polls", polls }, { "stats", stats },
	{ "thread", thread }, { "child", child }, { "signals", signals },
};

int main(int argc, char **argv)
{
	int n = sizeof(patterns) / sizeof(patterns[0]);

	if (argc < 2) {
		fprintf(stderr, "usage: %s DIR [PATTERN...]\n", argv[0]);
		return 2;
	}
	snprintf(path_in, sizeof(path_in), "%s/in.dat", argv[1]);
	snprintf(path_out, sizeof(path_out), "%s/out.dat", argv[1]);
	snprintf(path_small, sizeof(path_small), "%s/small.dat", argv[1]);
	make_file(path_in, 200 * 1024);
	make_file(path_small, 100);
	for (int i = 0; i < n; i++) {
		int wanted = argc == 2;

		for (int a = 2; a < argc; a++)
			wanted |= !strcmp(argv[a], patterns[i].name);
		if (wanted)
			patterns[i].run();
	}
	return 0;
}

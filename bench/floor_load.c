// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Loads bench/floor.bpf.o and attaches its empty programs, then waits for SIGTERM/SIGINT (the
 * links go with the process). Usage: floor_load OBJECT [PROGRAM...]: with names, only those
 * programs (e.g. floor_sched_switch); without, all of them. Prints "attached N" once they run.
 * A tracepoint missing on this kernel fails the load with one line (name the others). Also loads
 * floor_acc.bpf.o (its tid-indexed array sized to pid_max).
 */
#include <bpf/libbpf.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int wanted(const char *name, int argc, char **argv)
{
	if (argc < 3)
		return 1;
	for (int i = 2; i < argc; i++)
		if (!strcmp(name, argv[i]))
			return 1;
	return 0;
}

/* floor_acc.bpf.c's tid-indexed array holds every possible tid: pid_max entries. */
static void size_tid_array(struct bpf_object *obj)
{
	struct bpf_map *map = bpf_object__find_map_by_name(obj, "acc_thread_ns");
	FILE *f;
	unsigned int pid_max = 0;

	if (!map)
		return;
	f = fopen("/proc/sys/kernel/pid_max", "r");
	if (f && fscanf(f, "%u", &pid_max) == 1 && pid_max)
		bpf_map__set_max_entries(map, pid_max);
	if (f)
		fclose(f);
}

int main(int argc, char **argv)
{
	struct bpf_object *obj;
	struct bpf_program *prog;
	int attached = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: floor_load OBJECT [PROGRAM...]\n");
		return 2;
	}
	libbpf_set_print(NULL);
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj) {
		fprintf(stderr, "floor_load: cannot open %s\n", argv[1]);
		return 1;
	}
	bpf_object__for_each_program(prog, obj)
		bpf_program__set_autoload(prog, wanted(bpf_program__name(prog), argc, argv));
	size_tid_array(obj);
	if (bpf_object__load(obj)) {
		fprintf(stderr, "floor_load: loading %s failed; is one of its tracepoints missing on "
				"this kernel? (name the programs to load)\n", argv[1]);
		return 1;
	}
	bpf_object__for_each_program(prog, obj) {
		if (!bpf_program__autoload(prog))
			continue;
		if (!bpf_program__attach(prog)) {
			fprintf(stderr, "floor_load: %s: attach failed, skipped\n", bpf_program__name(prog));
			continue;
		}
		attached++;
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	printf("attached %d\n", attached);
	fflush(stdout);
	while (!stop)
		pause();
	bpf_object__close(obj);
	return 0;
}

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * pkprof record: the CPython frame walk of a sample (docs/design.md, "Python frames"). For a
 * process in `py_procs` (filled by user space with the interpreter's address and structure
 * offsets it found in the binary), finds the sampled thread's PyThreadState (cached per thread in
 * `py_tstates`, checked against its native thread id, else searched in the interpreter's thread
 * list) and copies each frame's code object and instruction pointer into a `py_scratch` slot, leaf
 * first, marking the first frame of each evaluation loop's run: 3.11's `is_entry`, or, from 3.12,
 * the frame above an entry shim owned by the C stack (the shim itself is skipped). Both walks are
 * bpf_loop callbacks: bounded, verified once, whatever the depth. The frames go to the ring after
 * the record, as many as were found (py_emit): a native sample carries none.
 */
#ifndef PKPROF_RECORD_PYTHON_BPF_H
#define PKPROF_RECORD_PYTHON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "pkprof.h"
#include "record/links.bpf.h"

/* The enums Rust reads from the generated types (the fields holding them are plain integers). */
enum pkprof_py_state pkprof_py_state_btf_anchor SEC(".data.btf_anchor");
enum pkprof_py_frame_flags pkprof_py_frame_flags_btf_anchor SEC(".data.btf_anchor");
struct pkprof_exec pkprof_exec_btf_anchor SEC(".data.btf_anchor");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* tgid */
	__type(value, struct pkprof_py_proc);
} py_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);   /* tid */
	__type(value, __u64); /* its PyThreadState */
} py_tstates SEC(".maps");

/*
 * Where a sample's Python frames are built: slot 2 * cpu for cpu-clock samples, 2 * cpu + 1 for
 * off-CPU samples (a cpu-clock sample may interrupt an off-CPU sample's syscall exit). An array
 * rather than a per-CPU array, as sample_scratch. Sized to twice the possible CPUs by the loader.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct pkprof_py_frames);
} py_scratch SEC(".maps");

enum py_slot_kind {
	PY_SLOT_SAMPLE = 0,
	PY_SLOT_OFFCPU = 1,
};

static __always_inline __u32 py_slot(__u32 kind)
{
	return 2 * bpf_get_smp_processor_id() + kind;
}

struct py_walk {
	struct pkprof_py_proc p;
	__u64 ts;    /* thread search: the thread state looked at */
	__u64 found; /* the sampled thread's state */
	__u64 frame; /* frame walk: the next frame */
	__u32 tid;
	__u32 n;     /* frames written */
	__u32 state; /* enum pkprof_py_state */
	__u32 slot;  /* py_scratch slot */
	__u32 span;  /* bytes read of each frame (py_frame_span) */
	__u32 pad;
};

static long py_thread_step(__u64 i, void *arg)
{
	struct py_walk *w = arg;
	__u64 ntid = 0;

	if (!w->ts)
		return 1;
	if (bpf_probe_read_user(&ntid, sizeof(ntid), (void *)(w->ts + w->p.tstate_native_thread_id))) {
		w->state = PKPROF_PY_READ_FAULT;
		return 1;
	}
	if (ntid == w->tid) {
		w->found = w->ts;
		return 1;
	}
	if (bpf_probe_read_user(&w->ts, sizeof(w->ts), (void *)(w->ts + w->p.tstate_next))) {
		w->state = PKPROF_PY_READ_FAULT;
		return 1;
	}
	return 0;
}

/* Bytes of a frame read at once: its fields of interest lie in its first ones (72 at most in
 * 3.11-3.13). */
#define PY_FRAME_SPAN 128

static long py_frame_step(__u64 i, void *arg)
{
	struct py_walk *w = arg;
	struct pkprof_py_frames *buf;
	struct pkprof_py_frame *f;
	/* The frame's first w->span bytes, in one read rather than one per field. */
	__u64 raw[PY_FRAME_SPAN / 8];
	__u64 frame = w->frame;
	__u8 owner = 0, entry = 0;

	if (!frame) {
		w->state = PKPROF_PY_OK;
		return 1;
	}
	buf = bpf_map_lookup_elem(&py_scratch, &w->slot);
	if (!buf)
		return 1;
	__builtin_memset(raw, 0, sizeof(raw));
	if (bpf_probe_read_user(raw, w->span & (PY_FRAME_SPAN - 1), (void *)frame))
		goto fault;
	w->frame = raw[(w->p.frame_previous / 8) & (PY_FRAME_SPAN / 8 - 1)];
	if (w->p.owned_by_cstack) {
		owner = ((__u8 *)raw)[w->p.frame_owner & (PY_FRAME_SPAN - 1)];
		if (owner == w->p.owned_by_cstack) {
			/* An entry shim: the frame above it began this run of the loop. */
			if (w->n > 0)
				buf->f[(w->n - 1) & (PKPROF_MAX_PY_FRAMES - 1)].flags |= PKPROF_PY_FRAME_ENTRY;
			return 0;
		}
	} else if (w->p.frame_is_entry) {
		entry = ((__u8 *)raw)[w->p.frame_is_entry & (PY_FRAME_SPAN - 1)];
	}
	if (w->n >= PKPROF_MAX_PY_FRAMES) {
		w->state = PKPROF_PY_DEPTH;
		return 1;
	}
	f = &buf->f[w->n & (PKPROF_MAX_PY_FRAMES - 1)];
	f->code = raw[(w->p.frame_code / 8) & (PY_FRAME_SPAN / 8 - 1)];
	f->instr = raw[(w->p.frame_instr / 8) & (PY_FRAME_SPAN / 8 - 1)];
	f->flags = entry ? PKPROF_PY_FRAME_ENTRY : 0;
	w->n++;
	return 0;
fault:
	w->state = PKPROF_PY_READ_FAULT;
	return 1;
}

/* The bytes of a frame its walk reads (0: a field lies beyond PY_FRAME_SPAN, or a pointer field
 * is not 8-aligned: no walk). */
static __always_inline __u32 py_frame_span(const struct pkprof_py_proc *p)
{
	__u32 span = 0;

	if ((p->frame_code | p->frame_previous | p->frame_instr) & 7)
		return 0;
	if (p->frame_code + 8 > span)
		span = p->frame_code + 8;
	if (p->frame_previous + 8 > span)
		span = p->frame_previous + 8;
	if (p->frame_instr + 8 > span)
		span = p->frame_instr + 8;
	if (p->owned_by_cstack && p->frame_owner + 1 > span)
		span = p->frame_owner + 1;
	if (p->frame_is_entry && p->frame_is_entry + 1 > span)
		span = p->frame_is_entry + 1;
	return span < PY_FRAME_SPAN ? span : 0;
}

/*
 * Walks the frames of task `tgid`/`tid` (the current task) into py_scratch[slot] when it runs a
 * known CPython; sets the sample's py_len and py_state (0 and PKPROF_PY_NONE otherwise).
 */
static __noinline void py_walk_sample(struct pkprof_sample *s, __u32 slot, __u32 tgid, __u32 tid)
{
	struct pkprof_py_proc *p = bpf_map_lookup_elem(&py_procs, &tgid);
	struct py_walk w = {};
	__u64 *cached, interp = 0, ntid = 0, cframe = 0;

	s->py_len = 0;
	s->py_state = PKPROF_PY_NONE;
	if (!p)
		return;
	w.p = *p;
	w.span = py_frame_span(p);
	if (!w.span) {
		s->py_state = PKPROF_PY_READ_FAULT;
		return;
	}
	w.tid = tid;
	w.slot = slot;
	w.state = PKPROF_PY_NO_THREAD;
	cached = bpf_map_lookup_elem(&py_tstates, &tid);
	if (cached && !bpf_probe_read_user(&ntid, sizeof(ntid), (void *)(*cached + w.p.tstate_native_thread_id)) &&
	    ntid == tid) {
		w.found = *cached;
	} else {
		if (bpf_probe_read_user(&interp, sizeof(interp), (void *)(w.p.runtime + w.p.runtime_interpreters_head)) ||
		    !interp ||
		    bpf_probe_read_user(&w.ts, sizeof(w.ts), (void *)(interp + w.p.interp_threads_head))) {
			s->py_state = PKPROF_PY_READ_FAULT;
			return;
		}
		bpf_loop(PKPROF_PY_MAX_THREADS, py_thread_step, &w, 0);
		if (!w.found) {
			s->py_state = w.state;
			return;
		}
		bpf_map_update_elem(&py_tstates, &tid, &w.found, BPF_ANY);
	}
	if (w.p.tstate_cframe) {
		if (bpf_probe_read_user(&cframe, sizeof(cframe), (void *)(w.found + w.p.tstate_cframe)) || !cframe)
			goto fault;
		if (bpf_probe_read_user(&w.frame, sizeof(w.frame), (void *)(cframe + w.p.tstate_current_frame)))
			goto fault;
	} else if (bpf_probe_read_user(&w.frame, sizeof(w.frame), (void *)(w.found + w.p.tstate_current_frame))) {
		goto fault;
	}
	/* Still so when the loop runs out: entry shims take iterations too (twice the frames kept). */
	w.state = PKPROF_PY_DEPTH;
	bpf_loop(2 * PKPROF_MAX_PY_FRAMES, py_frame_step, &w, 0);
	s->py_len = w.n;
	s->py_state = w.state;
	return;
fault:
	s->py_state = PKPROF_PY_READ_FAULT;
}

/*
 * Writes a record to the ring: `hdr` (hdr_len bytes, a constant: the record's struct, which holds
 * the sample `s`), then the s->py_len Python frames of py_scratch[slot], then s->ustack_bytes_len
 * bytes of `stack`. Reserved at its size, so a record pays for the frames it has, not for the
 * most it could have. Returns 0, or the error of a full ring.
 */
static __always_inline long py_emit(void *hdr, __u32 hdr_len, struct pkprof_sample *s, __u32 slot,
				    __u8 *stack, __u64 flags)
{
	struct pkprof_py_frames *py = NULL;
	__u32 py_len = s->py_len, py_bytes = 0, stack_len = s->ustack_bytes_len;
	struct bpf_dynptr d;
	long err;

	if (py_len) {
		py = bpf_map_lookup_elem(&py_scratch, &slot);
		if (py_len > PKPROF_MAX_PY_FRAMES)
			py_len = PKPROF_MAX_PY_FRAMES;
		if (!py)
			py_len = 0;
		py_bytes = py_len * sizeof(struct pkprof_py_frame);
	}
	if (stack_len > PKPROF_MAX_STACK_BYTES)
		stack_len = PKPROF_MAX_STACK_BYTES;
	s->py_len = py_len;
	s->ustack_bytes_len = stack_len;
	err = bpf_ringbuf_reserve_dynptr(&events, hdr_len + py_bytes + stack_len, 0, &d);
	if (err) {
		bpf_ringbuf_discard_dynptr(&d, 0); /* the verifier wants it released all the same */
		return err;
	}
	bpf_dynptr_write(&d, 0, hdr, hdr_len, 0);
	if (py && py_bytes)
		bpf_dynptr_write(&d, hdr_len, py, py_bytes, 0);
	if (stack_len)
		bpf_dynptr_write(&d, hdr_len + py_bytes, stack, stack_len, 0);
	bpf_ringbuf_submit_dynptr(&d, flags);
	return 0;
}

/*
 * sched_process_exec of p (record): a process user space had looked at runs a new image, and
 * whatever interpreter it ran is gone. Its layout and cached thread state go at once (a walk
 * with the old offsets would read the new image's memory), its capture too (its next sample
 * wakes the reader), and a pkprof_exec record tells user space to look at it again.
 */
static __always_inline void py_exec(struct task_struct *p)
{
	__u32 tgid = p->tgid, tid = p->pid;
	struct pkprof_exec *e;

	if (!record_mode || !bpf_map_lookup_elem(&captured, &tgid))
		return;
	bpf_map_delete_elem(&captured, &tgid);
	bpf_map_delete_elem(&py_procs, &tgid);
	bpf_map_delete_elem(&py_tstates, &tid);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		struct pkprof_cpu *c = this_cpu();

		if (c)
			c->lost.sample_ring_full++; /* a record lost to a full ring, as samples are */
		return;
	}
	e->kind = PKPROF_EV_EXEC;
	e->pid = tgid;
	e->time_ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(e, submit_flags(true));
}

#endif /* PKPROF_RECORD_PYTHON_BPF_H */

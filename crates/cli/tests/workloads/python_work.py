"""Python workloads for tests/python.rs (docs/design.md, "Python frames"). Each mode burns its own
CPU time (time.thread_time, whatever the machine's load) and prints what the test compares with:
`DEPTH n` (len(traceback.extract_stack()) at the bottom of a known recursion), `TID name id`
(a thread's native id), `READY pid`, `BLOCKED name ns` (the time a function spent in its blocking
calls, by its own clock). Usage: python_work.py fib|deep|threads|io|spin|block SECONDS"""
import os, sys, threading, time, traceback, zlib

SECS = float(sys.argv[2]) if len(sys.argv) > 2 else 1.5


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def bottom(secs):
    print("DEPTH", len(traceback.extract_stack()), flush=True)
    end = time.thread_time() + secs
    while time.thread_time() < end:
        pass


def deep(k, secs):
    if k == 0:
        return bottom(secs)
    return deep(k - 1, secs)


def say(line):
    """One write per line: print() writes its arguments, separators and end one by one, so two
    threads printing at once can interleave within a line."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def alpha(secs):
    say(f"TID alpha {threading.get_native_id()}")
    end = time.thread_time() + secs
    while time.thread_time() < end:
        fib(12)


def beta(secs):
    say(f"TID beta {threading.get_native_id()}")
    end = time.thread_time() + secs
    while time.thread_time() < end:
        sum(i * i for i in range(200))


def pack(data):
    return zlib.compress(data, 9)


def reader(path):
    fd = os.open(path, os.O_RDONLY)
    n = 0
    while os.pread(fd, 1 << 20, 0):
        n += 1
        if n % 8 == 0:
            break
    os.close(fd)


def c(secs):
    print("READY", os.getpid(), flush=True)
    end = time.thread_time() + secs
    while time.thread_time() < end:
        pass


def b(secs):
    c(secs)


def a(secs):
    b(secs)


def napper(secs):
    """Sleeps in 20 ms naps; prints the time spent inside time.sleep."""
    blocked = 0
    end = time.monotonic() + secs
    while time.monotonic() < end:
        t = time.monotonic_ns()
        time.sleep(0.02)
        blocked += time.monotonic_ns() - t
    say(f"BLOCKED napper {blocked}")


def feeder(w, secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        time.sleep(0.015)
        os.write(w, b"x")
    os.close(w)


def pipe_wait(r):
    """Reads the feeder's bytes one by one; prints the time spent inside os.read."""
    blocked = 0
    while True:
        t = time.monotonic_ns()
        got = os.read(r, 1)
        blocked += time.monotonic_ns() - t
        if not got:
            break
    say(f"BLOCKED pipe_wait {blocked}")


mode = sys.argv[1]
if mode == "fib":
    end = time.thread_time() + SECS
    while time.thread_time() < end:
        fib(18)
    deep(25, 0.4)
elif mode == "deep":
    deep(100, SECS)
elif mode == "threads":
    ts = [threading.Thread(target=f, args=(SECS,)) for f in (alpha, beta)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
elif mode == "io":
    path = "/tmp/pkprof-python-io.bin"
    with open(path, "wb") as f:
        f.write(os.urandom(1 << 20))
    data = os.urandom(1 << 16) + bytes(1 << 16)
    end = time.thread_time() + SECS
    while time.thread_time() < end:
        pack(data)
        reader(path)
    os.unlink(path)
elif mode == "spin":
    a(SECS)
elif mode == "block":
    # Started before the blocking begins, so that the interpreter is known by then.
    time.sleep(0.3)
    r, w = os.pipe()
    ts = [
        threading.Thread(target=feeder, args=(w, SECS)),
        threading.Thread(target=pipe_wait, args=(r,)),
    ]
    for t in ts:
        t.start()
    napper(SECS)
    for t in ts:
        t.join()

/* copy_multicall.c: the copy loop with each iteration's read and write in one multi-call (the
 * paper's Figure 3 transformation): one kernel crossing per 4 KiB.
 * Usage: copy_multicall SRC DST [REPEAT]
 *
 * Both calls are checked. multi_call returns 3 when the full 4 KiB was copied; 1 when the read
 * failed or was short (the write was cancelled: the caller writes the bytes read itself; 0 bytes
 * is end of file); 2 when the write failed or was short (the caller writes the rest). */
#include "copy_common.h"
#include "pkprof_multicall.h"

static struct mc_ring *ring;

static void copy(const char *src, const char *dst)
{
    static char buf[N];
    int in, out;

    open_pair(src, dst, &in, &out);
    struct mc_call calls[2] = {
        { .op = MC_READ, .check = 1, .args = { in, (long)buf, N } },
        { .op = MC_WRITE, .check = 1, .args = { out, (long)buf, N } },
    };
    for (;;) {
        int r = multi_call(ring, 2, calls);
        if (r == 3)
            continue;
        if (r == 1) {
            long n = calls[0].result;
            if (n < 0)
                die("read", n);
            if (n == 0)
                break;
            write_all(out, buf, (size_t)n);
        } else if (r == 2) {
            long w = calls[1].result;
            if (w < 0)
                die("write", w);
            write_all(out, buf + w, (size_t)(N - w));
        } else {
            die("multi_call", r);
        }
    }
    close(in);
    close(out);
}

int main(int argc, char **argv)
{
    ring = mc_open(8);
    if (!ring) {
        fprintf(stderr, "copy_multicall: %s; using the sequential fallback\n", mc_last_error());
        ring = mc_open_sequential();
    }
    int status = copy_main(argc, argv, copy);
    mc_close(ring);
    return status;
}

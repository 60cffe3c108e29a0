/* copy_multicall_looped.c: the copy loop unrolled K times, then clustered: K pread/pwrite pairs
 * at consecutive offsets, with K buffers, in one multi-call: one kernel crossing per K * 4 KiB.
 * Usage: copy_multicall_looped SRC DST [REPEAT]
 *
 * All calls are checked; calls[2j] reads chunk j, calls[2j+1] writes it. multi_call returns
 * 2K+1 when all K chunks were copied; an odd index 2j+1 when chunk j's read failed or was short
 * (chunks before j are copied, the rest cancelled: write the bytes read, continue after them;
 * 0 bytes is end of file); an even index 2j+2 when chunk j's write failed or was short (write the
 * rest of the chunk, continue after it). */
#include "copy_common.h"
#include "pkprof_multicall.h"

#define K 16

static struct mc_ring *ring;

static void copy(const char *src, const char *dst)
{
    static char buf[K][N];
    struct mc_call calls[2 * K];
    int in, out;
    off_t off = 0;

    open_pair(src, dst, &in, &out);
    for (;;) {
        for (int j = 0; j < K; j++) {
            long at = (long)off + (long)j * N;
            calls[2 * j] = (struct mc_call){ .op = MC_PREAD, .check = 1,
                                             .args = { in, (long)buf[j], N, at } };
            calls[2 * j + 1] = (struct mc_call){ .op = MC_PWRITE, .check = 1,
                                                 .args = { out, (long)buf[j], N, at } };
        }
        int r = multi_call(ring, 2 * K, calls);
        if (r == 2 * K + 1) {
            off += (off_t)K * N;
            continue;
        }
        if (r < 1 || r > 2 * K)
            die("multi_call", r);
        int i = r - 1, j = i / 2;
        off_t at = off + (off_t)j * N;
        long res = calls[i].result;
        if (i % 2 == 0) { /* chunk j's read */
            if (res < 0)
                die("pread", res);
            if (res == 0)
                break;
            pwrite_all(out, buf[j], (size_t)res, at);
            off = at + res;
        } else { /* chunk j's write */
            if (res < 0)
                die("pwrite", res);
            pwrite_all(out, buf[j] + res, (size_t)(N - res), at + res);
            off = at + N;
        }
    }
    close(in);
    close(out);
}

int main(int argc, char **argv)
{
    ring = mc_open(2 * K);
    if (!ring) {
        fprintf(stderr, "copy_multicall_looped: %s; using the sequential fallback\n",
                mc_last_error());
        ring = mc_open_sequential();
    }
    int status = copy_main(argc, argv, copy);
    mc_close(ring);
    return status;
}

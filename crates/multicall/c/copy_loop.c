/* copy_loop.c: the paper's copy program (its Figure 5): a 4 KiB read/write loop of plain
 * system calls, two kernel crossings per 4 KiB.  Usage: copy_loop SRC DST [REPEAT] */
#include "copy_common.h"

static void copy(const char *src, const char *dst)
{
    static char buf[N];
    int in, out;
    ssize_t n;

    open_pair(src, dst, &in, &out);
    while ((n = read(in, buf, N)) > 0)
        write_all(out, buf, (size_t)n);
    if (n < 0)
        die("read", errno);
    close(in);
    close(out);
}

int main(int argc, char **argv)
{
    return copy_main(argc, argv, copy);
}

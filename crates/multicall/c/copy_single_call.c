/* copy_single_call.c: the copy loop replaced by what `pkprof syscalls` suggests for a read/write
 * loop: copy_file_range, one call per chunk of up to 2 GiB, the data never crossing into user
 * memory (falls back to sendfile when the file systems differ and the kernel refuses).
 * Usage: copy_single_call SRC DST [REPEAT] */
#include "copy_common.h"

#include <sys/sendfile.h>

static void copy(const char *src, const char *dst)
{
    int in, out;
    ssize_t n;

    open_pair(src, dst, &in, &out);
    do {
        n = copy_file_range(in, NULL, out, NULL, 1L << 30, 0);
        if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP))
            n = sendfile(out, in, NULL, 1L << 30);
    } while (n > 0);
    if (n < 0)
        die("copy_file_range", errno);
    close(in);
    close(out);
}

int main(int argc, char **argv)
{
    return copy_main(argc, argv, copy);
}

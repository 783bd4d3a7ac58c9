/* SPDX-License-Identifier: MIT */
/* Creating files with an exact mode. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file-mode.h"

int file_create_mode(const char *path, mode_t mode, bool *ret_loose) {
        if (ret_loose)
                *ret_loose = false;
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd >= 0) {
                /* open() applied the umask; fchmod() does not. */
                int r = fchmod(fd, mode) < 0 ? -errno : 1;
                close(fd);
                return r;
        }
        if (errno != EEXIST)
                return -errno;
        struct stat st;
        if (ret_loose && stat(path, &st) == 0)
                *ret_loose = (st.st_mode & 07777 & ~mode) != 0;
        return 0;
}

/* SPDX-License-Identifier: MIT */
/* Reading a token file and judging where a token goes. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "token-file.h"

int token_file_read(const char *path, char **ret, char err[static TOKEN_MESSAGE_MAX],
                    char warning[static TOKEN_MESSAGE_MAX]) {
        char line[TOKEN_FILE_MAX + 8];
        struct stat st;
        warning[0] = '\0';
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        if (!f || fstat(fileno(f), &st) < 0) {
                int e = errno;
                snprintf(err, TOKEN_MESSAGE_MAX, "%s: cannot read the token: %s", path,
                         strerror(e));
                return -e;
        }
        if (st.st_mode & S_IROTH)
                snprintf(warning, TOKEN_MESSAGE_MAX,
                         "%s is readable by every user of this machine, and so is the token in "
                         "it (chmod 600 %s)",
                         path, path);
        bool ok = fgets(line, sizeof(line), f) != NULL;
        size_t start = ok ? strspn(line, " \t") : 0;
        line[ok ? start + strcspn(line + start, " \t\r\n") : 0] = '\0';
        int r = 0;
        if (!line[start] || strlen(line + start) > TOKEN_FILE_MAX) {
                snprintf(err, TOKEN_MESSAGE_MAX, "%s: no token in the file's first line", path);
                r = -EINVAL;
        }
        for (const char *p = line + start; r == 0 && *p; p++)
                if ((unsigned char) *p < 0x21 || (unsigned char) *p > 0x7e) {
                        snprintf(err, TOKEN_MESSAGE_MAX,
                                 "%s: the token holds characters that cannot go into an HTTP "
                                 "header",
                                 path);
                        r = -EINVAL;
                }
        if (r == 0 && !(*ret = strdup(line + start)))
                r = -ENOMEM;
        explicit_bzero(line, sizeof(line));
        if (r == -ENOMEM)
                snprintf(err, TOKEN_MESSAGE_MAX, "out of memory");
        return r;
}

bool token_in_clear(const char *url) {
        if (strncasecmp(url, "http://", 7) != 0)
                return false;
        const char *h = url + 7, *end = h + strcspn(h, "/?#");
        const char *at = memchr(h, '@', (size_t) (end - h));
        if (at)
                h = at + 1;
        char host[256];
        size_t n;
        if (*h == '[') {
                const char *close = memchr(h, ']', (size_t) (end - h));
                n = close ? (size_t) (close - h - 1) : 0;
                h++;
        } else
                n = strcspn(h, ":/?#");
        if (n == 0 || n >= sizeof(host))
                return true;
        memcpy(host, h, n);
        host[n] = '\0';
        if (strcasecmp(host, "localhost") == 0)
                return false;
        struct in_addr a4;
        struct in6_addr a6;
        if (inet_pton(AF_INET, host, &a4) == 1)
                return (ntohl(a4.s_addr) >> 24) != 127;
        if (inet_pton(AF_INET6, host, &a6) == 1)
                return !IN6_IS_ADDR_LOOPBACK(&a6);
        return true;
}

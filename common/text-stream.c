/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf-grow.h"
#include "text-stream.h"

struct text_stream {
        char **ret_buf;
        size_t *ret_len;
        char *buf;
        size_t len, cap;
};

static void publish(struct text_stream *t) {
        *t->ret_buf = t->buf;
        *t->ret_len = t->len;
}

static ssize_t ts_write(void *cookie, const char *data, size_t n) {
        struct text_stream *t = cookie;
        if (n > (size_t) -1 / 2 - t->len || grow_bytes(&t->buf, &t->cap, t->len + n + 1) < 0) {
                errno = ENOMEM;
                return 0; /* the stream's error */
        }
        memcpy(t->buf + t->len, data, n);
        t->len += n;
        t->buf[t->len] = '\0';
        publish(t);
        return (ssize_t) n;
}

static int ts_close(void *cookie) {
        struct text_stream *t = cookie;
        int r = 0;
        if (!t->buf && grow_bytes(&t->buf, &t->cap, 1) < 0)
                r = -1;
        else if (t->len == 0)
                t->buf[0] = '\0';
        publish(t);
        free(t);
        return r;
}

FILE *text_stream_open(char **buf, size_t *len) {
        struct text_stream *t = calloc(1, sizeof(*t));
        if (!t)
                return NULL;
        *t = (struct text_stream){ .ret_buf = buf, .ret_len = len };
        publish(t);
        FILE *f = fopencookie(t, "w",
                              (cookie_io_functions_t){ .write = ts_write, .close = ts_close });
        if (!f)
                free(t);
        return f;
}

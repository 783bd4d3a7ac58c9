/* SPDX-License-Identifier: MIT */
/* The raw events as text, and zlib around it: compression that keeps the newest lines when the
 * cap is hit, and a bounded inflate for text that came from elsewhere. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "trace-event.h"
#include "trace-raw.h"

static int deflate_all(const char *text, size_t len, uint8_t **ret, size_t *ret_len) {
        uLongf cap = compressBound((uLong) len);
        uint8_t *out = malloc(cap ? cap : 1);
        if (!out)
                return -ENOMEM;
        if (compress2(out, &cap, (const Bytef *) text, (uLong) len, 6) != Z_OK) {
                free(out);
                return -ENOMEM;
        }
        *ret = out;
        *ret_len = cap;
        return 0;
}

static size_t count_lines(const char *text, size_t len) {
        size_t n = 0;
        for (size_t i = 0; i < len; i++)
                n += text[i] == '\n';
        return n;
}

int trace_raw_compress(const char *text, size_t len, size_t max, uint8_t **ret, size_t *ret_len,
                       size_t *ret_dropped) {
        size_t start = 0, total = count_lines(text, len);
        *ret_dropped = 0;
        for (int attempt = 0; attempt < 8; attempt++) {
                char head[96] = "";
                size_t dropped = count_lines(text, start);
                if (dropped > 0)
                        snprintf(head, sizeof(head),
                                 "[%zu earlier events of %zu left out to fit the size cap]\n",
                                 dropped, total);
                size_t hl = strlen(head), body = len - start;
                char *joined = malloc(hl + body + 1);
                if (!joined)
                        return -ENOMEM;
                memcpy(joined, head, hl);
                memcpy(joined + hl, text + start, body);
                uint8_t *out;
                size_t out_len;
                int r = deflate_all(joined, hl + body, &out, &out_len);
                free(joined);
                if (r < 0)
                        return r;
                if (out_len <= max) {
                        *ret = out;
                        *ret_len = out_len;
                        *ret_dropped = dropped;
                        return 0;
                }
                free(out);
                /* Keep a share of the text in proportion to what fits, a little less, and start
                 * at a line. */
                size_t keep = (size_t) ((double) body * (double) max / (double) out_len * 0.85);
                size_t from = len - keep;
                const char *nl = memchr(text + from, '\n', len - from);
                start = nl ? (size_t) (nl - text) + 1 : len;
        }
        return -E2BIG;
}

int trace_raw_inflate(const uint8_t *data, size_t len, size_t max_out, char **ret,
                      size_t *ret_len) {
        z_stream z = { .next_in = (Bytef *) data, .avail_in = (uInt) len };
        size_t cap = 4096, used = 0;
        char *out = malloc(cap);
        int zr;
        if (!out)
                return -ENOMEM;
        if (inflateInit(&z) != Z_OK) {
                free(out);
                return -ENOMEM;
        }
        do {
                if (cap - used < 2) {
                        if (cap >= max_out + 1) {
                                zr = Z_DATA_ERROR;
                                break;
                        }
                        size_t ncap = cap * 2 > max_out + 1 ? max_out + 1 : cap * 2;
                        char *n = realloc(out, ncap);
                        if (!n) {
                                inflateEnd(&z);
                                free(out);
                                return -ENOMEM;
                        }
                        out = n;
                        cap = ncap;
                }
                z.next_out = (Bytef *) out + used;
                z.avail_out = (uInt) (cap - used - 1);
                zr = inflate(&z, Z_NO_FLUSH);
                used = cap - 1 - z.avail_out;
        } while (zr == Z_OK);
        inflateEnd(&z);
        if (zr != Z_STREAM_END || used > max_out) {
                free(out);
                return zr == Z_MEM_ERROR ? -ENOMEM : -EBADMSG;
        }
        out[used] = 0;
        *ret = out;
        if (ret_len)
                *ret_len = used;
        return 0;
}

int trace_raw_text(const struct trace_event *ev, size_t n, int cpu, int64_t due, char **ret,
                   size_t *ret_len) {
        size_t len = 0;
        char line[512];
        FILE *f = open_memstream(ret, &len);
        if (!f)
                return -ENOMEM;
        int32_t cur = n ? ev[0].pid : -1;
        const char *comm = n ? trace_comm_of(ev, n, cur, NULL) : NULL;
        for (size_t i = 0; i < n; i++) {
                if (ev[i].pid != cur) {
                        /* The task changed without a switch event (leaving the idle task is
                         * not traced by every kernel). */
                        cur = ev[i].pid;
                        comm = trace_comm_of(ev, n, cur, NULL);
                }
                trace_event_format(&ev[i], cpu, due, comm, line, sizeof(line));
                fputs(line, f);
                fputc('\n', f);
                if (ev[i].kind == TRACE_SWITCH) {
                        cur = ev[i].u.sw.next_pid;
                        comm = ev[i].u.sw.next_comm;
                }
        }
        if (fclose(f) != 0)
                return -ENOMEM;
        *ret_len = len;
        return 0;
}

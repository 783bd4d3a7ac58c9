/* SPDX-License-Identifier: MIT */
/* The growing text stream (text-stream.h) against glibc's open_memstream(), whose contract it
 * keeps: the same text and length after each fflush() and at fclose(), NUL-terminated, and ""
 * for a stream nothing was written to. */
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "tests.h"
#include "text-stream.h"

struct pair {
        char *buf[2];
        size_t len[2];
        FILE *f[2];
};

static void pair_open(struct pair *p) {
        memset(p, 0, sizeof(*p));
        p->f[0] = text_stream_open(&p->buf[0], &p->len[0]);
        p->f[1] = open_memstream(&p->buf[1], &p->len[1]);
        assert_non_null(p->f[0]);
        assert_non_null(p->f[1]);
}

static void pair_same(const struct pair *p) {
        assert_int_equal(p->len[0], p->len[1]);
        assert_non_null(p->buf[0]);
        assert_memory_equal(p->buf[0], p->buf[1], p->len[1] + 1); /* with the NUL */
}

static void pair_close(struct pair *p) {
        assert_int_equal(fclose(p->f[0]), 0);
        assert_int_equal(fclose(p->f[1]), 0);
        pair_same(p);
        free(p->buf[0]);
        free(p->buf[1]);
}

static void test_empty(void **state) {
        struct pair p;
        pair_open(&p);
        pair_close(&p);
        char *buf = NULL;
        size_t len = 1;
        FILE *f = text_stream_open(&buf, &len);
        assert_int_equal(fclose(f), 0);
        assert_string_equal(buf, "");
        assert_int_equal(len, 0);
        free(buf);
}

/* Pieces of every size from a byte to far past the stream's own buffer, 9 MiB in all, with
 * flushes between some: each flush shows the same text in both. */
static void test_pieces_and_flushes(void **state) {
        struct pair p;
        pair_open(&p);
        char *piece = malloc(300000);
        assert_non_null(piece);
        for (size_t i = 0; i < 300000; i++)
                piece[i] = (char) ('a' + i % 26);
        size_t total = 0;
        for (unsigned round = 0; total < 9u << 20; round++) {
                size_t n = (round * 7919u) % 300000u;
                for (int k = 0; k < 2; k++) {
                        if (round % 3 == 0)
                                fprintf(p.f[k], "%u:%.*s;", round, (int) MIN(n, 100u), piece);
                        else
                                fwrite(piece, 1, n, p.f[k]);
                        if (round % 5 == 0)
                                fputc('\n', p.f[k]);
                }
                total += n;
                if (round % 4 == 0) {
                        assert_int_equal(fflush(p.f[0]), 0);
                        assert_int_equal(fflush(p.f[1]), 0);
                        pair_same(&p);
                }
        }
        free(piece);
        pair_close(&p);
}

/* Text with NUL bytes inside: the length counts them, as open_memstream()'s does. */
static void test_nul_bytes(void **state) {
        struct pair p;
        pair_open(&p);
        for (int k = 0; k < 2; k++) {
                fwrite("a\0b", 1, 3, p.f[k]);
                fputs("cd", p.f[k]);
        }
        pair_close(&p);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_empty),
                cmocka_unit_test(test_pieces_and_flushes),
                cmocka_unit_test(test_nul_bytes),
        };
        return RUN_TESTS(tests);
}

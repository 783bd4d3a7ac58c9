/* SPDX-License-Identifier: MIT */
/* Runs a fuzz target without libFuzzer: every file given, then a fixed number of mutations
 * of each (bytes flipped, inserted, removed, cut, chunks duplicated), from a fixed seed, so
 * that the test suite exercises the target on every build.  Usage: PROG [-n N] FILE... */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint64_t next(void) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return rng;
}

static uint8_t *read_file(const char *path, size_t *len) {
        FILE *f = fopen(path, "rbe");
        if (!f)
                return NULL;
        uint8_t *buf = NULL;
        size_t cap = 0, n = 0;
        for (;;) {
                if (n == cap) {
                        uint8_t *b = realloc(buf, cap = cap ? cap * 2 : 4096);
                        if (!b) {
                                free(buf);
                                fclose(f);
                                return NULL;
                        }
                        buf = b;
                }
                size_t r = fread(buf + n, 1, cap - n, f);
                if (r == 0)
                        break;
                n += r;
        }
        fclose(f);
        *len = n;
        return buf;
}

static size_t mutate(uint8_t *buf, size_t len, size_t cap) {
        static const char *const tokens[] = { "\"",
                                              "{",
                                              "}",
                                              "[",
                                              "]",
                                              ":",
                                              ",",
                                              "-1",
                                              "0",
                                              "1e308",
                                              "null",
                                              "true",
                                              "\"\\u0000\"",
                                              "18446744073709551616",
                                              "\"rtsoak.summary/2\"" };
        for (int k = 1 + (int) (next() % 4); k > 0; k--) {
                size_t at = len ? next() % len : 0;
                switch (next() % 6) {
                case 0: /* flip a byte */
                        if (len)
                                buf[at] ^= (uint8_t) (1u << (next() % 8));
                        break;
                case 1: /* remove a run */
                        if (len) {
                                size_t n = 1 + next() % 16;
                                if (at + n > len)
                                        n = len - at;
                                memmove(buf + at, buf + at + n, len - at - n);
                                len -= n;
                        }
                        break;
                case 2: { /* insert a JSON token */
                        const char *t = tokens[next() % (sizeof(tokens) / sizeof(*tokens))];
                        size_t n = strlen(t);
                        if (len + n <= cap) {
                                memmove(buf + at + n, buf + at, len - at);
                                memcpy(buf + at, t, n);
                                len += n;
                        }
                        break;
                }
                case 3: /* cut */
                        len = at;
                        break;
                case 4: /* a digit changed */
                        if (len)
                                buf[at] = (uint8_t) ('0' + next() % 10);
                        break;
                default: { /* duplicate a chunk */
                        size_t n = 1 + next() % 64;
                        if (at + n <= len && len + n <= cap) {
                                memmove(buf + at + n, buf + at, len - at);
                                len += n;
                        }
                }
                }
        }
        return len;
}

int main(int argc, char **argv) {
        long iterations = 2000;
        int i = 1;
        if (argc > 2 && strcmp(argv[1], "-n") == 0) {
                iterations = strtol(argv[2], NULL, 10);
                i = 3;
        }
        if (i >= argc) {
                fprintf(stderr, "usage: %s [-n N] FILE...\n", argv[0]);
                return 2;
        }
        printf("1..%d\n", argc - i);
        for (int t = 1; i < argc; i++, t++) {
                size_t len;
                uint8_t *seed = read_file(argv[i], &len);
                if (!seed) {
                        printf("not ok %d - %s: %s\n", t, argv[i], strerror(errno));
                        return 1;
                }
                LLVMFuzzerTestOneInput(seed, len);
                size_t cap = len * 2 + 256;
                uint8_t *buf = malloc(cap);
                for (long k = 0; buf && k < iterations; k++) {
                        memcpy(buf, seed, len);
                        size_t n = mutate(buf, len, cap);
                        LLVMFuzzerTestOneInput(buf, n);
                }
                free(buf);
                free(seed);
                printf("ok %d - %s and %ld mutations\n", t, argv[i], iterations);
        }
        return 0;
}

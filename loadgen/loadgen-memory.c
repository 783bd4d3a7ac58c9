/* SPDX-License-Identifier: MIT */
/* The memory load: allocating, touching every page of and freeing memory at a chosen byte
 * rate (OSADL's "1 MB/s memory allocation") or flat out, holding at most a set amount. */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "loadgen.h"
#include "log.h"
#include "macro.h"
#include "timeutil.h"

enum { MEMORY_METRIC_ALLOC, MEMORY_METRIC_OPS };
enum { METHOD_MMAP, METHOD_MALLOC };

/* Bounds the ring of chunks held at once (hold / chunk). */
#define MAX_CHUNKS_HELD 65536

struct memory_opts {
        uint64_t rate; /* bytes/s allocated and touched; 0: flat out */
        uint64_t chunk;
        uint64_t hold;
        unsigned method;
};

static const char *const methods[] = { "mmap", "malloc", NULL };

static const struct loadgen_opt memory_opts[] = {
        { "rate", LOADGEN_OPT_BYTERATE, offsetof(struct memory_opts, rate), 0, 0, "1M", NULL,
          "bytes allocated and touched per second; 0: flat out" },
        { "chunk", LOADGEN_OPT_SIZE, offsetof(struct memory_opts, chunk), 4096, UINT64_C(1) << 30,
          "1M", NULL, "size of each allocation" },
        { "hold", LOADGEN_OPT_SIZE, offsetof(struct memory_opts, hold), 4096, UINT64_C(1) << 40,
          "16M", NULL, "memory kept allocated; beyond it the oldest chunk is freed first" },
        { "method", LOADGEN_OPT_ENUM, offsetof(struct memory_opts, method), 0, 0, "mmap", methods,
          "how chunks are allocated" },
};

static const struct loadgen_metric memory_metrics[] = {
        [MEMORY_METRIC_ALLOC] = { "alloc", "MiB/s", "bytes", 1.0 / 1048576 },
        [MEMORY_METRIC_OPS] = { "ops", "allocs/s", "allocations", 1.0 },
};

static int memory_check(const void *opts, char *const *args, char err[static LOADGEN_ERROR_MAX]) {
        const struct memory_opts *o = opts;
        if (o->chunk > o->hold) {
                snprintf(err, LOADGEN_ERROR_MAX,
                         "memory: --chunk=%" PRIu64 " is larger than --hold=%" PRIu64
                         ": at least one chunk must fit",
                         o->chunk, o->hold);
                return -EINVAL;
        }
        if (o->hold / o->chunk > MAX_CHUNKS_HELD) {
                snprintf(err, LOADGEN_ERROR_MAX,
                         "memory: --hold=%" PRIu64 " is more than %d chunks of --chunk=%" PRIu64
                         "; use a larger --chunk",
                         o->hold, MAX_CHUNKS_HELD, o->chunk);
                return -EINVAL;
        }
        return 0;
}

/* Memory must really go back to the kernel when freed, or the load would only be page
 * faults the first time round.  mmap: munmap does that.  malloc: chunks at or above glibc's
 * mmap threshold (128K at first, adjusted upwards by glibc as mmapped chunks are freed) are
 * mmapped and unmapped by free(); smaller ones come from the heap, so every free() is
 * followed by malloc_trim(0), which gives back the top of the heap and the whole free pages
 * inside it (MADV_DONTNEED). */
static void *chunk_alloc(const struct memory_opts *o) {
        if (o->method == METHOD_MALLOC)
                return malloc(o->chunk);
        void *p = mmap(NULL, o->chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
}

static void chunk_free(const struct memory_opts *o, void *p) {
        if (!p)
                return;
        if (o->method == METHOD_MALLOC) {
                free(p);
                malloc_trim(0);
        } else
                munmap(p, o->chunk);
}

/* Writes every page, so that each is faulted in and backed by its own memory (a non-zero
 * value: a page only read would map the shared zero page). */
static void touch(void *p, size_t len, size_t page, uint64_t value) {
        uint8_t *b = p;
        for (size_t i = 0; i < len; i += page)
                *(volatile uint64_t *) (b + i) = value;
        /* The last bytes too, for malloc'ed chunks that do not start on a page boundary. */
        if (len >= sizeof(uint64_t))
                *(volatile uint64_t *) (b + len - sizeof(uint64_t)) = value;
}

static int memory_run(struct loadgen_ctx *ctx) {
        const struct memory_opts *o = ctx->opts;
        size_t nslots = (size_t) (o->hold / o->chunk), head = 0;
        long page = sysconf(_SC_PAGESIZE);
        struct loadgen_pacer pacer;
        bool failing = false;

        _cleanup_free_ void **slots = calloc(nslots, sizeof(void *));
        if (!slots)
                return log_oom();
        if (page <= 0)
                page = 4096;

        loadgen_pacer_init(&pacer, o->rate);
        for (uint64_t n = 1; !loadgen_stopping(ctx); n++) {
                /* Free the oldest first, so that no more than --hold is held at any time. */
                chunk_free(o, slots[head]);
                slots[head] = NULL;

                void *p = chunk_alloc(o);
                if (!p) {
                        if (!failing)
                                loadgen_event(ctx, "alloc_failed", (int64_t) o->chunk,
                                              "cannot allocate %" PRIu64
                                              " bytes; retrying every second",
                                              o->chunk);
                        failing = true;
                        if (!loadgen_sleep_until(ctx,
                                                 now_ns(CLOCK_MONOTONIC) + (int64_t) NSEC_PER_SEC))
                                break;
                        continue;
                }
                failing = false;
                touch(p, (size_t) o->chunk, (size_t) page, n);
                slots[head] = p;
                head = (head + 1) % nslots;
                loadgen_add(ctx, MEMORY_METRIC_ALLOC, o->chunk);
                loadgen_add(ctx, MEMORY_METRIC_OPS, 1);
                if (!loadgen_pace(ctx, &pacer, o->chunk))
                        break;
        }
        for (size_t i = 0; i < nslots; i++)
                chunk_free(o, slots[i]);
        return 0;
}

const struct loadgen_info loadgen_memory_info = {
        .name = "memory",
        .summary = "allocate, touch and free memory at a chosen rate",
        .opts = memory_opts,
        .nopts = ELEMENTSOF(memory_opts),
        .opts_size = sizeof(struct memory_opts),
        .metrics = memory_metrics,
        .nmetrics = ELEMENTSOF(memory_metrics),
        .check = memory_check,
        .probe = loadgen_probe_nothing,
        .run = memory_run,
};

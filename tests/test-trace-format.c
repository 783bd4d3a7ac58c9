/* SPDX-License-Identifier: MIT */
/* Reading the ring buffer: event formats as tracefs writes them, and a page built by hand with
 * every kind of entry (small and large records, a time extension, an absolute time stamp, a
 * discarded event, the padding at its end, an event of an unknown id). */
#include <errno.h>

#include "tests.h"
#include "macro.h"
#include "trace-format.h"

static const char header_page[] = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
                                  "\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n"
                                  "\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n"
                                  "\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";
static const char header_event[] = "# compressed entry header\n"
                                   "\ttype_len    :    5 bits\n"
                                   "\ttime_delta  :   27 bits\n"
                                   "\tarray       :   32 bits\n";

#define COMMON                                                                         \
        "format:\n"                                                                    \
        "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"         \
        "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"         \
        "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n" \
        "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"

static const char switch_format[] = "name: sched_switch\nID: 372\n" COMMON
                                    "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
                                    "\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n"
                                    "\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n"
                                    "\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n"
                                    "\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n"
                                    "\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n"
                                    "\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n\n"
                                    "print fmt: \"prev_comm=%s ...\"\n";
static const char irq_format[] = "name: irq_handler_entry\nID: 225\n" COMMON
                                 "\tfield:int irq;\toffset:8;\tsize:4;\tsigned:1;\n"
                                 "\tfield:__data_loc char[] name;\toffset:12;\tsize:4;\tsigned:0;\n"
                                 "\nprint fmt: \"irq=%d name=%s\"\n";
static const char print_format[] = "name: print\nID: 5\n" COMMON
                                   "\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n"
                                   "\tfield:char buf[];\toffset:16;\tsize:0;\tsigned:0;\n";
static const char ipi_format[] = "name: ipi_send_cpu\nID: 354\n" COMMON
                                 "\tfield:unsigned int cpu;\toffset:8;\tsize:4;\tsigned:0;\n"
                                 "\tfield:void * callsite;\toffset:16;\tsize:8;\tsigned:0;\n"
                                 "\tfield:void * callback;\toffset:24;\tsize:8;\tsigned:0;\n";
static const char vector_format[] = "name: local_timer_entry\nID: 80\n" COMMON
                                    "\tfield:int vector;\toffset:8;\tsize:4;\tsigned:1;\n";

static void load(struct trace_formats *f) {
        const char *reason = NULL;
        *f = (struct trace_formats){};
        assert_int_equal(trace_formats_header(f, header_page, header_event, &reason), 0);
        assert_int_equal(f->commit_offset, 8);
        assert_int_equal(f->commit_size, 8);
        assert_int_equal(f->data_offset, 16);
        assert_int_equal(trace_formats_add(f, "sched", "sched_switch", switch_format), 0);
        assert_int_equal(trace_formats_add(f, "irq", "irq_handler_entry", irq_format), 0);
        assert_int_equal(trace_formats_add(f, "ftrace", "print", print_format), 0);
        assert_int_equal(trace_formats_add(f, "ipi", "ipi_send_cpu", ipi_format), 0);
        assert_int_equal(trace_formats_add(f, "irq_vectors", "local_timer_entry", vector_format),
                         0);
}

static void test_formats(void **state) {
        struct trace_formats f;
        load(&f);
        assert_int_equal(f.n, 5);
        assert_int_equal(f.v[0].kind, TRACE_SWITCH);
        assert_int_equal(f.v[1].kind, TRACE_IRQ_ENTRY);
        /* "__data_loc char[] name": the brackets belong to the type. */
        assert_string_equal(f.v[1].fields[5].name, "name");
        assert_true(f.v[1].fields[5].data_loc);
        assert_false(f.v[1].fields[5].array);
        assert_true(f.v[0].fields[4].array); /* prev_comm[16] */
        assert_int_equal(f.v[2].kind, TRACE_MARKER);
        assert_int_equal(f.v[3].kind, TRACE_OTHER);
        assert_true(f.v[3].fields[5].pointer);
        assert_int_equal(f.v[4].kind, TRACE_VECTOR_ENTRY);

        /* A sched_switch without next_pid cannot be analysed: refused, not misread. */
        const char *cut = strstr(switch_format, "\tfield:pid_t next_pid");
        char broken[sizeof(switch_format)];
        snprintf(broken, sizeof(broken), "%.*s", (int) (cut - switch_format), switch_format);
        assert_int_equal(trace_formats_add(&f, "sched", "sched_switch", broken), -EBADMSG);
        assert_int_equal(trace_formats_add(&f, "x", "y", "no id here"), -EBADMSG);
        /* A header of another layout. */
        const char *reason = NULL;
        struct trace_formats g = {};
        assert_int_equal(trace_formats_header(&g,
                                              "\tfield: u64 timestamp;\toffset:0;\tsize:8;"
                                              "\tsigned:0;\n",
                                              header_event, &reason),
                         -EBADMSG);
        assert_non_null(strstr(reason, "header_page"));
        assert_int_equal(trace_formats_header(&g, header_page, "type_len : 4 bits", &reason),
                         -EBADMSG);
        trace_formats_done(&f);
}

/* ---- a page written by hand ---- */

struct page {
        uint8_t b[4096];
        size_t pos;
};

static void u32(struct page *p, uint32_t v) {
        memcpy(p->b + p->pos, &v, 4);
        p->pos += 4;
}

static void hdr(struct page *p, uint32_t type_len, uint32_t delta) {
        u32(p, type_len | delta << 5);
}

static void common(uint8_t *rec, uint16_t id, uint8_t flags, int32_t pid) {
        memcpy(rec, &id, 2);
        rec[2] = flags;
        rec[3] = 1;
        memcpy(rec + 4, &pid, 4);
}

static void test_page(void **state) {
        struct trace_formats f;
        struct page p = { .pos = 16 };
        uint64_t ts0 = 1000000000;
        load(&f);
        memcpy(p.b, &ts0, 8);

        /* 1: sched_switch, 64 bytes: type_len 16; 100 ns after the page's time. */
        uint8_t sw[64] = {};
        common(sw, 372, 0x01, 10);
        memcpy(sw + 8, "bash", 5);
        int32_t v = 10;
        memcpy(sw + 24, &v, 4);
        v = 120;
        memcpy(sw + 28, &v, 4);
        int64_t st = 1;
        memcpy(sw + 32, &st, 8);
        memcpy(sw + 40, "rtsoak-cpu1", 12);
        v = 500;
        memcpy(sw + 56, &v, 4);
        v = 4;
        memcpy(sw + 60, &v, 4);
        hdr(&p, 16, 100);
        memcpy(p.b + p.pos, sw, 64);
        p.pos += 64;

        /* 2: a time extension of 2^30 + 7 ns. */
        hdr(&p, 30, 7);
        u32(&p, 1u << 3);

        /* 3: irq_handler_entry with its name out of line: 12 + 4 + "virtio0\0" = 24 bytes. */
        uint8_t ir[24] = {};
        common(ir, 225, 0x08, 10);
        v = 11;
        memcpy(ir + 8, &v, 4);
        uint32_t loc = 16 | 8u << 16;
        memcpy(ir + 12, &loc, 4);
        memcpy(ir + 16, "virtio0", 8);
        hdr(&p, 6, 5);
        memcpy(p.b + p.pos, ir, 24);
        p.pos += 24;

        /* 4: a discarded event (padding with a length), then an event of an unknown id. */
        hdr(&p, 29, 1);
        u32(&p, 12);
        p.pos += 8;
        uint8_t unknown[8] = {};
        common(unknown, 999, 0, 1);
        hdr(&p, 2, 3);
        memcpy(p.b + p.pos, unknown, 8);
        p.pos += 8;

        /* 5: a marker longer than a small record: type_len 0, its length in array[0]. */
        uint8_t mk[16 + 160] = {};
        common(mk, 5, 0, 500);
        memset(mk + 16, 'x', 100);
        memcpy(mk + 16, "rtsoak late", 11);
        mk[16 + 100] = '\n';
        hdr(&p, 0, 20);
        u32(&p, sizeof(mk) + 4);
        memcpy(p.b + p.pos, mk, sizeof(mk));
        p.pos += sizeof(mk);

        /* 6: an absolute time stamp, then ipi_send_cpu (32 bytes) right at it. */
        hdr(&p, 31, 12345 & 0x7ffffff);
        u32(&p, 2);
        uint8_t ipi[32] = {};
        common(ipi, 354, 0, 500);
        uint32_t cpu = 3;
        memcpy(ipi + 8, &cpu, 4);
        uint64_t cs = 0xffffffff81000000ull;
        memcpy(ipi + 16, &cs, 8);
        hdr(&p, 8, 0);
        memcpy(p.b + p.pos, ipi, 32);
        p.pos += 32;

        /* The rest: padding.  The data size, with "events were lost before" set. */
        hdr(&p, 29, 0);
        uint64_t commit = (p.pos - 16 - 4) | 1ull << 31;
        memcpy(p.b + 8, &commit, 8);

        struct trace_event *ev = NULL;
        size_t n = 0, cap = 0;
        bool lost = false;
        int64_t first;
        assert_int_equal(trace_page_decode(&f, p.b, sizeof(p.b), 0, &ev, &n, &cap, &lost, &first),
                         4);
        assert_int_equal(first, ts0 + 100);
        assert_true(lost);
        assert_int_equal(n, 4);
        assert_int_equal(ev[0].kind, TRACE_SWITCH);
        assert_int_equal(ev[0].ts_ns, ts0 + 100);
        assert_int_equal(ev[0].flags, 0x01);
        assert_int_equal(ev[0].pid, 10);
        assert_string_equal(ev[0].u.sw.prev_comm, "bash");
        assert_int_equal(ev[0].u.sw.prev_prio, 120);
        assert_int_equal(ev[0].u.sw.prev_state, 1);
        assert_string_equal(ev[0].u.sw.next_comm, "rtsoak-cpu1");
        assert_int_equal(ev[0].u.sw.next_pid, 500);
        uint64_t t2 = ts0 + 100 + (1ull << 30) + 7 + 5;
        assert_int_equal(ev[1].kind, TRACE_IRQ_ENTRY);
        assert_int_equal(ev[1].ts_ns, t2);
        assert_int_equal(ev[1].u.irq.irq, 11);
        assert_string_equal(ev[1].u.irq.name, "virtio0");
        /* The discarded event's delta does not count; the unknown one's does. */
        assert_int_equal(ev[2].kind, TRACE_MARKER);
        assert_int_equal(ev[2].ts_ns, t2 + 3 + 20);
        assert_int_equal(strlen(ev[2].u.marker.text), 100); /* the newline dropped */
        assert_true(strncmp(ev[2].u.marker.text, "rtsoak late", 11) == 0);
        assert_int_equal(ev[3].kind, TRACE_OTHER);
        assert_int_equal(ev[3].ts_ns, (int64_t) ((2ull << 27) | 12345));
        assert_string_equal(ev[3].u.other.name, "ipi_send_cpu");
        assert_string_equal(ev[3].u.other.text, "cpu=3 callsite=0xffffffff81000000 callback=0");
        /* From a later time on: the earlier events are read past, the first one still told. */
        size_t m = 0;
        assert_int_equal(trace_page_decode(&f, p.b, sizeof(p.b), (int64_t) t2 + 1, &ev, &m, &cap,
                                           &lost, &first),
                         1);
        assert_int_equal(first, ts0 + 100);
        assert_int_equal(ev[0].kind, TRACE_MARKER); /* the ipi's absolute time is earlier */
        free(ev);
        trace_formats_done(&f);
}

/* A data size beyond the page, or a record running past it, is refused. */
static void test_damaged_page(void **state) {
        struct trace_formats f;
        struct page p = { .pos = 16 };
        struct trace_event *ev = NULL;
        size_t n = 0, cap = 0;
        bool lost;
        load(&f);
        uint64_t commit = 8000;
        memcpy(p.b + 8, &commit, 8);
        assert_int_equal(trace_page_decode(&f, p.b, sizeof(p.b), 0, &ev, &n, &cap, &lost, NULL),
                         -EBADMSG);
        hdr(&p, 16, 1);
        commit = 20;
        memcpy(p.b + 8, &commit, 8);
        assert_int_equal(trace_page_decode(&f, p.b, sizeof(p.b), 0, &ev, &n, &cap, &lost, NULL),
                         -EBADMSG);
        free(ev);
        trace_formats_done(&f);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_formats),
                cmocka_unit_test(test_page),
                cmocka_unit_test(test_damaged_page),
        };
        return RUN_TESTS(tests);
}

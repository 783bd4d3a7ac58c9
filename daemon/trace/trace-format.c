/* SPDX-License-Identifier: MIT */
/* The ring buffer's binary layout, read with the kernel's own description of it: a page is a
 * header (time stamp, data size) and compressed event headers (5 bits of type or length, 27
 * bits of time delta); each event's record starts with common_type, which names its format. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "trace-format.h"

/* Ring buffer event types (kernel/trace/ring_buffer.c). */
#define RB_TYPE_PADDING 29
#define RB_TYPE_TIME_EXTEND 30
#define RB_TYPE_TIME_STAMP 31
#define RB_TS_SHIFT 27
#define RB_MISSED_EVENTS (1ULL << 31)
#define RB_MISSED_STORED (1ULL << 30)
#define RB_COMMIT_MASK ((1ULL << 30) - 1)
#define RB_ABS_TS_BITS 59

void trace_formats_done(struct trace_formats *f) {
        free(f->v);
        *f = (struct trace_formats){};
}

/* "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;" */
static int parse_field(const char *line, struct trace_field *ret) {
        const char *decl = strstr(line, "field:"), *semi;
        unsigned off, size, sgn;
        if (!decl || !(semi = strchr(decl, ';')))
                return -EBADMSG;
        decl += 6;
        const char *o = strstr(semi, "offset:"), *z = strstr(semi, "size:"),
                   *g = strstr(semi, "signed:");
        if (!o || !z || !g || sscanf(o, "offset:%u;", &off) != 1 ||
            sscanf(z, "size:%u;", &size) != 1 || sscanf(g, "signed:%u;", &sgn) != 1 ||
            off > UINT16_MAX || size > UINT16_MAX)
                return -EBADMSG;
        /* The name is the last identifier of the declaration, before a trailing [N] (in
         * "__data_loc char[] name" the brackets belong to the type). */
        const char *end = semi;
        while (end > decl && isspace((unsigned char) end[-1]))
                end--;
        bool array = end > decl && end[-1] == ']';
        if (array)
                while (end > decl && end[-1] != '[')
                        end--;
        if (array && end > decl)
                end--;
        while (end > decl && isspace((unsigned char) end[-1]))
                end--;
        const char *start = end;
        while (start > decl && (isalnum((unsigned char) start[-1]) || start[-1] == '_'))
                start--;
        if (start == end || (size_t) (end - start) >= sizeof(ret->name))
                return -EBADMSG;
        *ret = (struct trace_field){ .offset = (uint16_t) off,
                                     .size = (uint16_t) size,
                                     .is_signed = sgn != 0 };
        memcpy(ret->name, start, (size_t) (end - start));
        ret->data_loc = strncmp(decl, "__data_loc", 10) == 0;
        ret->rel_loc = strncmp(decl, "__rel_loc", 9) == 0;
        ret->array = array;
        ret->pointer = memchr(decl, '*', (size_t) (start - decl)) != NULL;
        return 0;
}

static const struct trace_field *field(const struct trace_format *fmt, const char *name) {
        for (size_t i = 0; i < fmt->nfields; i++)
                if (strcmp(fmt->fields[i].name, name) == 0)
                        return &fmt->fields[i];
        return NULL;
}

static bool has(const struct trace_format *fmt, const char *const *names) {
        for (; *names; names++)
                if (!field(fmt, *names))
                        return false;
        return true;
}

static bool ends_with(const char *s, const char *suffix) {
        size_t a = strlen(s), b = strlen(suffix);
        return a > b && strcmp(s + a - b, suffix) == 0;
}

/* Which events mean something to the analysis, and the fields each needs. */
static int classify(struct trace_format *fmt) {
        static const char *const sw[] = { "prev_comm", "prev_pid", "prev_prio", "prev_state",
                                          "next_comm", "next_pid", "next_prio", NULL };
        static const char *const wk[] = { "comm", "pid", "prio", "target_cpu", NULL };
        static const char *const irq_in[] = { "irq", "name", NULL };
        static const char *const irq_out[] = { "irq", "ret", NULL };
        static const char *const vec[] = { "vec", NULL };
        static const char *const hr[] = { "hrtimer", NULL };
        static const char *const print[] = { "buf", NULL };
        static const struct {
                const char *system, *name;
                uint8_t kind;
                const char *const *needs;
        } table[] = {
                { "sched", "sched_switch", TRACE_SWITCH, sw },
                { "sched", "sched_wakeup", TRACE_WAKEUP, wk },
                { "sched", "sched_wakeup_new", TRACE_WAKEUP, wk },
                { "irq", "irq_handler_entry", TRACE_IRQ_ENTRY, irq_in },
                { "irq", "irq_handler_exit", TRACE_IRQ_EXIT, irq_out },
                { "irq", "softirq_entry", TRACE_SOFTIRQ_ENTRY, vec },
                { "irq", "softirq_exit", TRACE_SOFTIRQ_EXIT, vec },
                { "timer", "hrtimer_expire_entry", TRACE_HRTIMER_ENTRY, hr },
                { "timer", "hrtimer_expire_exit", TRACE_HRTIMER_EXIT, hr },
                { "ipi", "ipi_entry", TRACE_VECTOR_ENTRY, NULL },
                { "ipi", "ipi_exit", TRACE_VECTOR_EXIT, NULL },
                { "ftrace", "print", TRACE_MARKER, print },
        };
        fmt->kind = TRACE_OTHER;
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (strcmp(fmt->system, table[i].system) == 0 &&
                    strcmp(fmt->name, table[i].name) == 0) {
                        if (table[i].needs && !has(fmt, table[i].needs))
                                return -EBADMSG;
                        fmt->kind = table[i].kind;
                        fmt->new_task = strcmp(fmt->name, "sched_wakeup_new") == 0;
                        return 0;
                }
        /* x86's interrupt vectors: local_timer_entry, reschedule_exit, ... */
        if (strcmp(fmt->system, "irq_vectors") == 0 && ends_with(fmt->name, "_entry"))
                fmt->kind = TRACE_VECTOR_ENTRY;
        else if (strcmp(fmt->system, "irq_vectors") == 0 && ends_with(fmt->name, "_exit"))
                fmt->kind = TRACE_VECTOR_EXIT;
        return 0;
}

int trace_formats_add(struct trace_formats *f, const char *system, const char *name,
                      const char *text) {
        struct trace_format fmt = {};
        const char *id = strstr(text, "\nID:");
        if (!id || sscanf(id, "\nID: %d", &fmt.id) != 1 || fmt.id <= 0 || fmt.id > UINT16_MAX)
                return -EBADMSG;
        snprintf(fmt.system, sizeof(fmt.system), "%s", system);
        snprintf(fmt.name, sizeof(fmt.name), "%s", name);
        for (const char *line = text; line && *line; line = strchr(line, '\n')) {
                if (*line == '\n')
                        line++;
                if (strncmp(line, "\tfield:", 7) != 0)
                        continue;
                if (fmt.nfields == TRACE_FIELDS_MAX)
                        return -EBADMSG;
                int r = parse_field(line, &fmt.fields[fmt.nfields]);
                if (r < 0)
                        return r;
                fmt.nfields++;
        }
        static const char *const common[] = { "common_type", "common_flags", "common_preempt_count",
                                              "common_pid", NULL };
        if (!has(&fmt, common) || classify(&fmt) < 0)
                return -EBADMSG;
        struct trace_format *a = realloc(f->v, (f->n + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        f->v = a;
        f->v[f->n++] = fmt;
        return 0;
}

int trace_formats_header(struct trace_formats *f, const char *header_page, const char *header_event,
                         const char **ret_reason) {
        struct trace_field fl;
        bool commit = false, data = false;
        for (const char *line = header_page; line && *line; line = strchr(line, '\n')) {
                if (*line == '\n')
                        line++;
                if (!strstr(line, "field:") || parse_field(line, &fl) < 0)
                        continue;
                if (strcmp(fl.name, "commit") == 0) {
                        f->commit_offset = fl.offset;
                        f->commit_size = fl.size;
                        commit = true;
                } else if (strcmp(fl.name, "data") == 0) {
                        f->data_offset = fl.offset;
                        data = true;
                }
        }
        if (!commit || !data || (f->commit_size != 4 && f->commit_size != 8) ||
            f->data_offset < f->commit_offset + f->commit_size) {
                *ret_reason = "events/header_page describes a page layout this rtsoakd cannot read";
                return -EBADMSG;
        }
        if (!strstr(header_event, "type_len    :    5 bits") ||
            !strstr(header_event, "time_delta  :   27 bits")) {
                *ret_reason = "events/header_event describes an event header this rtsoakd cannot "
                              "read";
                return -EBADMSG;
        }
        return 0;
}

static const struct trace_format *format_of(const struct trace_formats *f, int id) {
        for (size_t i = 0; i < f->n; i++)
                if (f->v[i].id == id)
                        return &f->v[i];
        return NULL;
}

static int64_t get_int(const struct trace_field *fl, const uint8_t *rec, size_t len) {
        if (!fl || (size_t) fl->offset + fl->size > len)
                return 0;
        const uint8_t *p = rec + fl->offset;
        switch (fl->size) {
        case 1:
                return fl->is_signed ? (int8_t) p[0] : p[0];
        case 2: {
                uint16_t v;
                memcpy(&v, p, 2);
                return fl->is_signed ? (int16_t) v : v;
        }
        case 4: {
                uint32_t v;
                memcpy(&v, p, 4);
                return fl->is_signed ? (int64_t) (int32_t) v : (int64_t) v;
        }
        case 8: {
                uint64_t v;
                memcpy(&v, p, 8);
                return (int64_t) v;
        }
        default:
                return 0;
        }
}

/* A string field: char name[N], __data_loc char[] or a trailing char buf[]. */
static void get_str(const struct trace_field *fl, const uint8_t *rec, size_t len, char *buf,
                    size_t size) {
        size_t off, n;
        buf[0] = 0;
        if (!fl || fl->offset >= len)
                return;
        if (fl->data_loc || fl->rel_loc) {
                uint32_t loc = (uint32_t) get_int(fl, rec, len);
                off = (loc & 0xffff) + (fl->rel_loc ? (size_t) fl->offset + fl->size : 0);
                n = loc >> 16;
        } else {
                off = fl->offset;
                n = fl->size ? fl->size : len - fl->offset;
        }
        if (off >= len)
                return;
        n = MIN(n, len - off);
        n = MIN(n, size - 1);
        const uint8_t *nul = memchr(rec + off, 0, n);
        if (nul)
                n = (size_t) (nul - (rec + off));
        memcpy(buf, rec + off, n);
        buf[n] = 0;
        /* A marker's trailing newline, and anything that would break a line of text. */
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) buf[i] < 0x20)
                        buf[i] = i + 1 == n && buf[i] == '\n' ? 0 : ' ';
}

static void generic_text(const struct trace_format *fmt, const uint8_t *rec, size_t len,
                         struct trace_event *e) {
        char *t = e->u.other.text;
        size_t used = 0;
        snprintf(e->u.other.name, sizeof(e->u.other.name), "%s", fmt->name);
        t[0] = 0;
        for (size_t i = 0; i < fmt->nfields && used + 1 < sizeof(e->u.other.text); i++) {
                const struct trace_field *fl = &fmt->fields[i];
                size_t room = sizeof(e->u.other.text) - used;
                char s[64];
                if (strncmp(fl->name, "common_", 7) == 0)
                        continue;
                if (fl->array || fl->data_loc || fl->rel_loc) {
                        get_str(fl, rec, len, s, sizeof(s));
                        used += (size_t) snprintf(t + used, room, "%s%s=%s", used ? " " : "",
                                                  fl->name, s);
                } else if (fl->pointer)
                        used += (size_t) snprintf(t + used, room, "%s%s=%#" PRIx64, used ? " " : "",
                                                  fl->name, (uint64_t) get_int(fl, rec, len));
                else
                        used += (size_t) snprintf(t + used, room, "%s%s=%" PRId64, used ? " " : "",
                                                  fl->name, get_int(fl, rec, len));
                used = MIN(used, sizeof(e->u.other.text) - 1);
        }
}

static void decode_record(const struct trace_format *fmt, const uint8_t *rec, size_t len,
                          struct trace_event *e) {
#define F(n) field(fmt, n)
        e->kind = fmt->kind;
        e->flags = (uint8_t) get_int(F("common_flags"), rec, len);
        e->preempt = (uint8_t) get_int(F("common_preempt_count"), rec, len);
        e->pid = (int32_t) get_int(F("common_pid"), rec, len);
        switch (fmt->kind) {
        case TRACE_SWITCH:
                get_str(F("prev_comm"), rec, len, e->u.sw.prev_comm, TRACE_COMM_MAX);
                get_str(F("next_comm"), rec, len, e->u.sw.next_comm, TRACE_COMM_MAX);
                e->u.sw.prev_pid = (int32_t) get_int(F("prev_pid"), rec, len);
                e->u.sw.prev_prio = (int32_t) get_int(F("prev_prio"), rec, len);
                e->u.sw.prev_state = get_int(F("prev_state"), rec, len);
                e->u.sw.next_pid = (int32_t) get_int(F("next_pid"), rec, len);
                e->u.sw.next_prio = (int32_t) get_int(F("next_prio"), rec, len);
                break;
        case TRACE_WAKEUP:
                get_str(F("comm"), rec, len, e->u.wake.comm, TRACE_COMM_MAX);
                e->u.wake.pid = (int32_t) get_int(F("pid"), rec, len);
                e->u.wake.prio = (int32_t) get_int(F("prio"), rec, len);
                e->u.wake.target_cpu = (int32_t) get_int(F("target_cpu"), rec, len);
                e->u.wake.new_task = fmt->new_task;
                break;
        case TRACE_IRQ_ENTRY:
        case TRACE_IRQ_EXIT:
                e->u.irq.irq = (int32_t) get_int(F("irq"), rec, len);
                e->u.irq.ret = (int32_t) get_int(F("ret"), rec, len);
                get_str(F("name"), rec, len, e->u.irq.name, TRACE_NAME_MAX);
                break;
        case TRACE_SOFTIRQ_ENTRY:
        case TRACE_SOFTIRQ_EXIT:
                e->u.softirq.vec = (uint32_t) get_int(F("vec"), rec, len);
                break;
        case TRACE_HRTIMER_ENTRY:
        case TRACE_HRTIMER_EXIT:
                e->u.hrtimer.timer = (uint64_t) get_int(F("hrtimer"), rec, len);
                e->u.hrtimer.function = (uint64_t) get_int(F("function"), rec, len);
                break;
        case TRACE_VECTOR_ENTRY:
        case TRACE_VECTOR_EXIT: {
                size_t l = strlen(fmt->name);
                size_t cut = ends_with(fmt->name, "_entry")  ? 6
                             : ends_with(fmt->name, "_exit") ? 5
                                                             : 0;
                snprintf(e->u.vector.name, TRACE_NAME_MAX, "%.*s", (int) (l - cut), fmt->name);
                e->u.vector.vector = F("vector") ? (int32_t) get_int(F("vector"), rec, len) : -1;
                break;
        }
        case TRACE_MARKER:
                get_str(F("buf"), rec, len, e->u.marker.text, TRACE_TEXT_MAX);
                break;
        default:
                generic_text(fmt, rec, len, e);
                break;
        }
#undef F
}

static int append(struct trace_event **ev, size_t *n, size_t *cap, struct trace_event **ret) {
        if (*n == *cap) {
                size_t c = *cap ? *cap * 2 : 1024;
                struct trace_event *a = realloc(*ev, c * sizeof(*a));
                if (!a)
                        return -ENOMEM;
                *ev = a;
                *cap = c;
        }
        *ret = &(*ev)[(*n)++];
        memset(*ret, 0, sizeof(**ret));
        return 0;
}

static uint32_t read_u32(const uint8_t *p) {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
}

int trace_page_decode(const struct trace_formats *f, const uint8_t *page, size_t size,
                      int64_t min_ts, struct trace_event **ev, size_t *n, size_t *cap,
                      bool *ret_lost, int64_t *ret_first) {
        uint64_t ts, commit = 0;
        int added = 0;
        if (ret_first)
                *ret_first = INT64_MAX;
        if (size < f->data_offset)
                return -EBADMSG;
        memcpy(&ts, page, 8);
        if (f->commit_size == 8)
                memcpy(&commit, page + f->commit_offset, 8);
        else
                commit = read_u32(page + f->commit_offset);
        *ret_lost = (commit & RB_MISSED_EVENTS) != 0;
        size_t end = f->data_offset + (size_t) (commit & RB_COMMIT_MASK);
        if (end > size)
                return -EBADMSG;

        for (size_t pos = f->data_offset; pos + 4 <= end;) {
                uint32_t hdr = read_u32(page + pos);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                uint32_t type_len = hdr & 0x1f, delta = hdr >> 5;
#else
                uint32_t type_len = hdr >> 27, delta = hdr & 0x7ffffff;
#endif
                size_t len, data;
                if (type_len == RB_TYPE_PADDING) {
                        if (delta == 0 || pos + 8 > end)
                                break; /* the rest of the page is padding */
                        pos += 4 + read_u32(page + pos + 4);
                        continue;
                }
                if (type_len == RB_TYPE_TIME_EXTEND || type_len == RB_TYPE_TIME_STAMP) {
                        if (pos + 8 > end)
                                break;
                        uint64_t ext = ((uint64_t) read_u32(page + pos + 4) << RB_TS_SHIFT) | delta;
                        if (type_len == RB_TYPE_TIME_EXTEND)
                                ts += ext;
                        else
                                ts = (ts & ~((1ULL << RB_ABS_TS_BITS) - 1)) | ext;
                        pos += 8;
                        continue;
                }
                if (type_len == 0) {
                        if (pos + 8 > end)
                                break;
                        uint32_t l = read_u32(page + pos + 4);
                        if (l < 4)
                                return -EBADMSG;
                        len = l - 4;
                        data = pos + 8;
                } else {
                        len = type_len * 4;
                        data = pos + 4;
                }
                if (data + len > end)
                        return -EBADMSG;
                ts += delta;
                pos = data + len;
                if (len < 2)
                        continue;
                uint16_t id;
                memcpy(&id, page + data, 2);
                const struct trace_format *fmt = format_of(f, id);
                if (!fmt)
                        continue;
                if (ret_first && *ret_first == INT64_MAX)
                        *ret_first = (int64_t) ts;
                if ((int64_t) ts < min_ts)
                        continue;
                struct trace_event *e;
                int r = append(ev, n, cap, &e);
                if (r < 0)
                        return r;
                e->ts_ns = (int64_t) ts;
                decode_record(fmt, page + data, len, e);
                added++;
        }
        return added;
}

/* SPDX-License-Identifier: MIT */
/* /proc/TID/stat read for a thread's policy and priority.  The capture threads call this at
 * the same time, so the line is split with an end pointer, never with strtok's hidden state:
 * two threads splitting at once took each other's fields and named priorities in the
 * millions. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "proc-sched.h"

/* Fields counted from 1 as proc(5) does; the first after the name's ")" is field 3. */
#define FIELD_NICE 19
#define FIELD_RT_PRIORITY 40
#define FIELD_POLICY 41

int proc_thread_sched(pid_t tid, const char *comm, char *policy, size_t policy_size,
                      int32_t *ret_priority) {
        static const char *const names[] = { "SCHED_OTHER",   "SCHED_FIFO", "SCHED_RR",
                                             "SCHED_BATCH",   NULL,         "SCHED_IDLE",
                                             "SCHED_DEADLINE" };
        char path[64], buf[1024];
        if (tid <= 0)
                return -ENOENT;
        snprintf(path, sizeof(path), "/proc/%d/stat", (int) tid);
        FILE *f = fopen(path, "re");
        if (!f)
                return -ENOENT;
        size_t len = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[len] = 0;
        /* The name may hold spaces and ")": it ends at the last ")". */
        char *open = strchr(buf, '('), *close = strrchr(buf, ')');
        if (!open || !close || close < open)
                return -EBADMSG;
        size_t n = strlen(comm);
        if ((size_t) (close - open - 1) != n || strncmp(open + 1, comm, n) != 0)
                return -ENOENT;
        long v[FIELD_POLICY + 1] = {};
        const char *p = close + 1;
        for (int field = 3; field <= FIELD_POLICY; field++) {
                while (*p == ' ')
                        p++;
                if (!*p)
                        return -EBADMSG;
                char *end;
                errno = 0;
                v[field] = strtol(p, &end, 10);
                if (field == 3) /* the state letter */
                        end = (char *) p + strcspn(p, " ");
                else if (end == p)
                        return -EBADMSG;
                /* rsslim and other unsigned fields may exceed a long: only those read here
                 * must fit. */
                else if (errno == ERANGE && (field == FIELD_NICE || field >= FIELD_RT_PRIORITY))
                        return -EBADMSG;
                p = end;
        }
        long pol = v[FIELD_POLICY];
        if (pol < 0 || pol >= (long) ELEMENTSOF(names) || !names[pol])
                return -EBADMSG;
        long prio = pol == 1 || pol == 2 ? v[FIELD_RT_PRIORITY] : v[FIELD_NICE];
        if (prio < -20 || prio > 99)
                return -EBADMSG;
        snprintf(policy, policy_size, "%s", names[pol]);
        *ret_priority = (int32_t) prio;
        return 0;
}

/* SPDX-License-Identifier: MIT */
/* Implementation of the run's machine description.  Each value comes from the kernel's own
 * interfaces; nothing is guessed from distribution files. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <systemd/sd-id128.h>
#include <unistd.h>

#include "macro.h"
#include "sysinfo.h"

static void read_first_line(const char *path, char *buf, size_t len) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        if (!f || !fgets(buf, (int) len, f)) {
                snprintf(buf, len, "unknown");
                return;
        }
        buf[strcspn(buf, "\n")] = '\0';
}

static const char *word_in(const char *haystack, const char *word) {
        size_t l = strlen(word);
        for (const char *p = strstr(haystack, word); p; p = strstr(p + 1, word)) {
                bool start = p == haystack || p[-1] == ' ';
                bool end = p[l] == '\0' || p[l] == ' ';
                if (start && end)
                        return p;
        }
        return NULL;
}

void sysinfo_preempt_model(const char *realtime_file, const char *uname_version,
                           const char *dynamic_file, const char *cmdline, char *buf, size_t len) {
        char line[256];

        {
                _cleanup_fclose_ FILE *f = fopen(realtime_file ?: "/sys/kernel/realtime", "re");
                if (f && fgets(line, sizeof(line), f) && line[0] == '1') {
                        snprintf(buf, len, "PREEMPT_RT");
                        return;
                }
        }
        if (uname_version && word_in(uname_version, "PREEMPT_RT")) {
                snprintf(buf, len, "PREEMPT_RT");
                return;
        }
        if (uname_version && word_in(uname_version, "PREEMPT_DYNAMIC")) {
                /* debugfs shows the mode in effect as "none voluntary (full) lazy". */
                _cleanup_fclose_ FILE *f = fopen(dynamic_file ?: "/sys/kernel/debug/sched/preempt",
                                                 "re");
                if (f && fgets(line, sizeof(line), f)) {
                        char *open = strchr(line, '('), *close = open ? strchr(open, ')') : NULL;
                        if (open && close) {
                                *close = '\0';
                                snprintf(buf, len, "PREEMPT_DYNAMIC (%s)", open + 1);
                                return;
                        }
                }
                /* Without debugfs, a preempt= on the command line is the next best source. */
                const char *p = cmdline ? strstr(cmdline, "preempt=") : NULL;
                if (p && (p == cmdline || p[-1] == ' ')) {
                        char mode[32];
                        snprintf(mode, sizeof(mode), "%.*s", (int) strcspn(p + 8, " "), p + 8);
                        snprintf(buf, len, "PREEMPT_DYNAMIC (%s)", mode);
                        return;
                }
                snprintf(buf, len, "PREEMPT_DYNAMIC");
                return;
        }
        if (uname_version && word_in(uname_version, "PREEMPT")) {
                snprintf(buf, len, "PREEMPT");
                return;
        }
        snprintf(buf, len, "PREEMPT_NONE or PREEMPT_VOLUNTARY");
}

static void read_cpu_model(char *buf, size_t len) {
        char line[512];
        FILE *f = fopen("/proc/cpuinfo", "re");
        snprintf(buf, len, "unknown");
        if (!f)
                return;
        while (fgets(line, sizeof(line), f)) {
                /* x86 says "model name", arm64 "CPU part" only; take what names it best. */
                if (strncmp(line, "model name", 10) == 0 || strncmp(line, "Model", 5) == 0) {
                        char *v = strchr(line, ':');
                        if (!v)
                                continue;
                        v++;
                        while (*v == ' ' || *v == '\t')
                                v++;
                        v[strcspn(v, "\n")] = 0;
                        snprintf(buf, len, "%s", v);
                        break;
                }
        }
        fclose(f);
}

void sysinfo_read(struct sysinfo_run *r) {
        struct utsname u;
        sd_id128_t id;

        read_cpu_model(r->cpu_model, sizeof(r->cpu_model));

        if (sd_id128_get_machine(&id) >= 0)
                sd_id128_to_string(id, r->machine_id);
        else
                snprintf(r->machine_id, sizeof(r->machine_id), "unknown");
        if (sd_id128_get_boot(&id) >= 0)
                sd_id128_to_string(id, r->boot_id);
        else
                snprintf(r->boot_id, sizeof(r->boot_id), "unknown");

        if (gethostname(r->hostname, sizeof(r->hostname)) < 0)
                snprintf(r->hostname, sizeof(r->hostname), "unknown");
        r->hostname[sizeof(r->hostname) - 1] = '\0';

        if (uname(&u) == 0) {
                snprintf(r->kernel_release, sizeof(r->kernel_release), "%s", u.release);
                snprintf(r->kernel_version, sizeof(r->kernel_version), "%s", u.version);
        } else {
                snprintf(r->kernel_release, sizeof(r->kernel_release), "unknown");
                snprintf(r->kernel_version, sizeof(r->kernel_version), "unknown");
        }
        read_first_line("/proc/cmdline", r->kernel_cmdline, sizeof(r->kernel_cmdline));
        sysinfo_preempt_model(NULL, r->kernel_version, NULL, r->kernel_cmdline, r->preempt_model,
                              sizeof(r->preempt_model));
}

/* SPDX-License-Identifier: MIT */
/* Unit tests of the machine's inventory: the field map (bounds, what the kernel's bytes become,
 * comparisons), the parsers of the kernel's texts (command lines, configurations, cpuinfo of
 * x86 and arm64, meminfo, modules), the readers on a made-up tree of hostile files, and on this
 * machine, where a field is present exactly when the kernel shows it. */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests.h"
#include "inventory-read.h"
#include "inventory.h"
#include "macro.h"

static void expect(const struct inventory *inv, const char *name, const char *value) {
        const char *got = inventory_get(inv, name);
        if (!value && got)
                fail_msg("%s: expected absent, got '%s'", name, got);
        if (value && (!got || strcmp(got, value) != 0))
                fail_msg("%s: expected '%s', got %s%s%s", name, value, got ? "'" : "",
                         got ?: "absent", got ? "'" : "");
}

static const char *big4000(void) {
        static char v[4001];
        memset(v, 'v', 4000);
        return v;
}

static void test_fields(void **state) {
        struct inventory a = {}, b = {};
        char why[INVENTORY_WHY_MAX];
        (void) state;
        /* What the kernel's files hold is made text: each refused character one '?'. */
        assert_int_equal(inventory_set(&a, "dmi.bios_vendor", "Ven\x1b[31mdor\xff\xe2\x80\xae!"),
                         0);
        expect(&a, "dmi.bios_vendor",
               "Ven?[31mdor??"
               "!");
        assert_int_equal(inventory_set(&a, "bad name", "x"), -EINVAL);
        assert_int_equal(inventory_set(&a, "", "x"), -EINVAL);
        /* A value past the bound is cut, between characters, and says so. */
        char *big = malloc(INVENTORY_MAX_VALUE + 100);
        memset(big, 'x', INVENTORY_MAX_VALUE + 99);
        memcpy(big + INVENTORY_MAX_VALUE - 4, "\xc3\xa9", 2); /* é across the cut */
        big[INVENTORY_MAX_VALUE + 99] = '\0';
        assert_int_equal(inventory_set(&a, "cmdline.isolcpus", big), 0);
        const char *cut = inventory_get(&a, "cmdline.isolcpus");
        assert_int_equal(strlen(cut), INVENTORY_MAX_VALUE - 1);
        assert_string_equal(cut + strlen(cut) - 4, "x...");
        assert_true(text_ok(cut, false, why));
        free(big);
        /* Sorted, replaced, removed; JSON and back is the same map. */
        assert_int_equal(inventory_set(&a, "a.first", "1"), 0);
        assert_int_equal(inventory_set(&a, "a.first", "2"), 0);
        assert_string_equal(a.fields[0].name, "a.first");
        expect(&a, "a.first", "2");
        char *text = inventory_to_text(&a);
        assert_int_equal(inventory_from_text(text, &b, why), 0);
        assert_true(inventory_equal(&a, &b));
        free(text);
        inventory_remove(&b, "a.first");
        assert_false(inventory_equal(&a, &b));
        assert_int_equal(inventory_set(&b, "z.new", ""), 0);
        struct inventory_change *ch;
        size_t n;
        assert_int_equal(inventory_diff(&a, &b, &ch, &n), 0);
        assert_int_equal(n, 2);
        assert_string_equal(ch[0].name, "a.first");
        assert_string_equal(ch[0].old_value, "2");
        assert_null(ch[0].new_value);
        assert_string_equal(ch[1].name, "z.new");
        assert_null(ch[1].old_value);
        assert_string_equal(ch[1].new_value, "");
        free(ch);
        /* The bounds: 256 fields, 64 KiB. */
        inventory_done(&b);
        char name[32];
        for (int i = 0; i < INVENTORY_MAX_FIELDS; i++) {
                snprintf(name, sizeof(name), "f%03d", i);
                assert_int_equal(inventory_set(&b, name, ""), 0);
        }
        /* One more is left out, and counted. */
        assert_int_equal(inventory_set(&b, "one.more", ""), 0);
        expect(&b, "one.more", NULL);
        assert_int_equal(b.dropped, 1);
        assert_int_equal(inventory_set(&b, "f000", "still fine"), 0);
        expect(&b, "f000", "still fine");
        inventory_done(&b);
        for (int i = 0; i < 16; i++) {
                snprintf(name, sizeof(name), "f%03d", i);
                assert_int_equal(inventory_set(&b, name, big4000()), 0);
        }
        assert_int_equal(b.dropped, 0);
        assert_int_equal(inventory_set(&b, "f016", big4000()), 0);
        expect(&b, "f016", NULL);
        assert_int_equal(b.dropped, 1);
        assert_true(b.bytes <= INVENTORY_MAX_TOTAL);
        inventory_done(&b);
        inventory_done(&a);
}

/* What a change's event says: every change while it fits, then cut between characters with
 * its mark, never past the bound, whatever the values hold. */
static void test_describe_changes(void **state) {
        struct inventory a = {}, b = {};
        char msg[4000], why[TEXT_WHY_MAX];
        size_t n;
        (void) state;
        assert_int_equal(inventory_set(&a, "thp.enabled", "madvise"), 0);
        assert_int_equal(inventory_set(&a, "cpu.online", "0-3"), 0);
        assert_int_equal(inventory_set(&b, "thp.enabled", "never"), 0);
        assert_int_equal(inventory_set(&b, "dmi.bios_version", "1.2.5"), 0);
        assert_int_equal(inventory_describe_changes(&a, &b, 2, msg, sizeof(msg), &n), 0);
        assert_int_equal(n, 3);
        assert_string_equal(msg, "version 2, 3 field(s) changed: cpu.online: 0-3 -> (none); "
                                 "dmi.bios_version: (none) -> 1.2.5; thp.enabled: madvise -> "
                                 "never");
        /* 15 fields of 4096 bytes each, "é" throughout: far more than fits. */
        char *big = malloc(INVENTORY_MAX_VALUE + 1), name[32];
        for (size_t i = 0; i + 1 < INVENTORY_MAX_VALUE; i += 2)
                memcpy(big + i, "\xc3\xa9", 2);
        big[INVENTORY_MAX_VALUE] = '\0';
        inventory_done(&a);
        for (int i = 0; i < 15; i++) {
                snprintf(name, sizeof(name), "f%03d", i);
                big[0] = (char) ('a' + i % 26); /* each value differs at its start */
                big[1] = 'x';
                assert_int_equal(inventory_set(&a, name, big), 0);
        }
        for (size_t size = 64; size <= sizeof(msg); size += 1237) {
                memset(msg, 'Z', sizeof(msg));
                assert_int_equal(inventory_describe_changes(&a, &b, 7, msg, size, &n), 0);
                assert_int_equal(n, 17);
                assert_true(strlen(msg) < size);
                assert_true(strlen(msg) + 4 >= size); /* cut near the end, not early */
                assert_string_equal(msg + strlen(msg) - 3, "...");
                if (!text_ok(msg, false, why))
                        fail_msg("size %zu: %s", size, why);
                assert_int_equal(msg[size - 1] == 'Z' || msg[size - 1] == '\0', true);
        }
        assert_int_equal(inventory_describe_changes(&a, &b, 7, msg, 10, &n), -ENOBUFS);
        free(big);
        inventory_done(&a);
        inventory_done(&b);
}

static void test_cmdline(void **state) {
        struct inventory inv = {};
        (void) state;
        assert_int_equal(
                inventory_parse_cmdline(
                        "BOOT_IMAGE=/vmlinuz-6.6-rt root=/dev/sda1 ro "
                        "isolcpus=managed_irq,domain,2-3 nohz_full=\"2-3\" \"rcu_nocbs=2 3\" "
                        "irqaffinity=0-1 idle=poll intel-idle.max-cstate=0 processor.max_cstate=1 "
                        "mitigations=off threadirqs preempt=full tsc=reliable tsc=unstable quiet\n",
                        &inv),
                0);
        expect(&inv, "cmdline.isolcpus", "managed_irq,domain,2-3");
        expect(&inv, "cmdline.nohz_full", "2-3");
        expect(&inv, "cmdline.rcu_nocbs", "2 3");
        expect(&inv, "cmdline.irqaffinity", "0-1");
        expect(&inv, "cmdline.idle", "poll");
        expect(&inv, "cmdline.intel_idle.max_cstate", "0");
        expect(&inv, "cmdline.processor.max_cstate", "1");
        expect(&inv, "cmdline.mitigations", "off");
        expect(&inv, "cmdline.threadirqs", "");
        expect(&inv, "cmdline.preempt", "full");
        expect(&inv, "cmdline.tsc", "unstable"); /* the last one counts */
        expect(&inv, "cmdline.root", NULL);
        expect(&inv, "cmdline.quiet", NULL);
        inventory_done(&inv);
        /* Nothing after "--": those are init's arguments. */
        assert_int_equal(inventory_parse_cmdline("quiet -- isolcpus=1 nohz_full=1", &inv), 0);
        assert_int_equal(inv.n, 0);
        assert_int_equal(inventory_parse_cmdline("", &inv), 0);
        assert_int_equal(inventory_parse_cmdline("   \n", &inv), 0);
        assert_int_equal(inventory_parse_cmdline("isolcpus=\"1", &inv), 0); /* unterminated */
        expect(&inv, "cmdline.isolcpus", "1");
        inventory_done(&inv);
}

static void test_kconfig(void **state) {
        struct inventory inv = {};
        (void) state;
        assert_int_equal(inventory_parse_kconfig("#\n# Automatically generated file\n#\n"
                                                 "CONFIG_LOCALVERSION=\"-rt\"\n"
                                                 "CONFIG_PREEMPT_RT=y\n"
                                                 "# CONFIG_PREEMPT is not set\n"
                                                 "CONFIG_HZ_1000=y\n"
                                                 "CONFIG_HZ=1000\n"
                                                 "# CONFIG_NO_HZ_FULL is not set\n"
                                                 "CONFIG_NO_HZ_IDLE=y\n"
                                                 "CONFIG_RCU_NOCB_CPU=y\n"
                                                 "CONFIG_NR_CPUS=512\n"
                                                 "CONFIG_PREEMPT_RT_FULL=y\n"
                                                 "CONFIG_CPU_FREQ_DEFAULT_GOV_PERFORMANCE=y\n"
                                                 "# CONFIG_CPU_FREQ_DEFAULT_GOV_SCHEDUTIL is not "
                                                 "set\n"
                                                 "CONFIG_HAVE_PREEMPT_DYNAMIC=y\n"
                                                 "garbage\nCONFIG_\n# CONFIG_ is not set\n"
                                                 "CONFIG_SCHED_DEBUG=y",
                                                 &inv),
                         0);
        expect(&inv, "kconfig.PREEMPT_RT", "y");
        expect(&inv, "kconfig.PREEMPT", "n");
        expect(&inv, "kconfig.HZ", "1000");
        expect(&inv, "kconfig.NO_HZ_FULL", "n");
        expect(&inv, "kconfig.NO_HZ_IDLE", "y");
        expect(&inv, "kconfig.RCU_NOCB_CPU", "y");
        expect(&inv, "kconfig.NR_CPUS", "512");
        expect(&inv, "kconfig.CPU_FREQ_DEFAULT_GOV", "performance");
        expect(&inv, "kconfig.SCHED_DEBUG", "y"); /* the last line, without a newline */
        /* Options it does not look at, and look-alikes, are not fields. */
        expect(&inv, "kconfig.LOCALVERSION", NULL);
        expect(&inv, "kconfig.PREEMPT_RT_FULL", NULL);
        expect(&inv, "kconfig.HAVE_PREEMPT_DYNAMIC", NULL);
        expect(&inv, "kconfig.PREEMPT_DYNAMIC", NULL);
        expect(&inv, "kconfig.HZ_1000", NULL);
        inventory_done(&inv);
}

static const char cpuinfo_x86[] = "processor\t: 0\n"
                                  "vendor_id\t: GenuineIntel\n"
                                  "cpu family\t: 6\n"
                                  "model\t\t: 85\n"
                                  "model name\t: Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz\n"
                                  "stepping\t: 7\n"
                                  "microcode\t: 0x5003604\n"
                                  "cpu MHz\t\t: 2100.000\n"
                                  "flags\t\t: fpu vme de pse tsc\n"
                                  "\n"
                                  "processor\t: 1\n"
                                  "vendor_id\t: GenuineIntel\n"
                                  "cpu family\t: 6\n"
                                  "model\t\t: 85\n"
                                  "model name\t: Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz\n"
                                  "stepping\t: 7\n"
                                  "microcode\t: 0x5003303\n"
                                  "cpu MHz\t\t: 1000.000\n\n";

static const char cpuinfo_arm64[] = "processor\t: 0\n"
                                    "BogoMIPS\t: 38.40\n"
                                    "Features\t: fp asimd evtstrm crc32 cpuid\n"
                                    "CPU implementer\t: 0x41\n"
                                    "CPU architecture: 8\n"
                                    "CPU variant\t: 0x0\n"
                                    "CPU part\t: 0xd05\n"
                                    "CPU revision\t: 0\n"
                                    "\n"
                                    "processor\t: 4\n"
                                    "BogoMIPS\t: 38.40\n"
                                    "CPU implementer\t: 0x41\n"
                                    "CPU architecture: 8\n"
                                    "CPU variant\t: 0x1\n"
                                    "CPU part\t: 0xd0b\n"
                                    "CPU revision\t: 0\n";

static void test_cpuinfo(void **state) {
        struct inventory inv = {};
        (void) state;
        assert_int_equal(inventory_parse_cpuinfo(cpuinfo_x86, &inv), 0);
        expect(&inv, "cpu.vendor", "GenuineIntel");
        expect(&inv, "cpu.model_name", "Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz");
        expect(&inv, "cpu.family", "6");
        expect(&inv, "cpu.model", "85");
        expect(&inv, "cpu.stepping", "7");
        /* A late load that reached one CPU only shows. */
        expect(&inv, "cpu.microcode", "0x5003604; 0x5003303");
        expect(&inv, "cpu.part", NULL);
        inventory_done(&inv);
        /* arm64, big.LITTLE: two parts, two variants. */
        assert_int_equal(inventory_parse_cpuinfo(cpuinfo_arm64, &inv), 0);
        expect(&inv, "cpu.implementer", "0x41");
        expect(&inv, "cpu.architecture", "8");
        expect(&inv, "cpu.variant", "0x0; 0x1");
        expect(&inv, "cpu.part", "0xd05; 0xd0b");
        expect(&inv, "cpu.revision", "0");
        expect(&inv, "cpu.model_name", NULL);
        expect(&inv, "cpu.vendor", NULL);
        inventory_done(&inv);
        /* Nothing, or lines without a colon or a value. */
        assert_int_equal(inventory_parse_cpuinfo("", &inv), 0);
        assert_int_equal(inventory_parse_cpuinfo("model name\nmodel name:\n: x\n", &inv), 0);
        assert_int_equal(inv.n, 0);
}

static void test_meminfo_modules_choices(void **state) {
        struct inventory a = {}, b = {};
        char buf[32];
        (void) state;
        assert_int_equal(inventory_parse_meminfo("MemTotal:       16315424 kB\n"
                                                 "MemFree:         1000 kB\n"
                                                 "HugePages_Total:       8\n"
                                                 "Hugepagesize:       2048 kB\n",
                                                 &a),
                         0);
        expect(&a, "memory.total_kib", "16315424");
        expect(&a, "memory.hugepages", "8");
        expect(&a, "memory.hugepage_kib", "2048");
        inventory_done(&a);
        /* The modules' digest: of the names, whatever their order and use counts. */
        assert_int_equal(inventory_parse_modules("nvme 49152 3 - Live 0x0\n"
                                                 "e1000e 286720 0 - Live 0x0\n",
                                                 &a),
                         0);
        assert_int_equal(inventory_parse_modules("e1000e 286720 1 - Live 0x0\n"
                                                 "nvme 49152 5 - Live 0x0\n",
                                                 &b),
                         0);
        expect(&a, "modules.count", "2");
        assert_true(inventory_equal(&a, &b));
        inventory_done(&b);
        assert_int_equal(inventory_parse_modules("e1000e 286720 1 - Live 0x0\n"
                                                 "nvme 49152 5 - Live 0x0\nkvm 1 0 - Live 0x0\n",
                                                 &b),
                         0);
        expect(&b, "modules.count", "3");
        assert_string_not_equal(inventory_get(&a, "modules.digest"),
                                inventory_get(&b, "modules.digest"));
        inventory_done(&a);
        inventory_done(&b);
        assert_int_equal(inventory_parse_modules("", &a), 0);
        expect(&a, "modules.count", "0");
        inventory_done(&a);

        assert_true(inventory_selected("always [madvise] never", buf, sizeof(buf)));
        assert_string_equal(buf, "madvise");
        assert_true(inventory_selected("[always] madvise never", buf, sizeof(buf)));
        assert_string_equal(buf, "always");
        assert_false(inventory_selected("madvise", buf, sizeof(buf)));
        assert_false(inventory_selected("[madvise", buf, sizeof(buf)));
        assert_false(inventory_selected("madvise] [never", buf, sizeof(buf)));
        /* A '[' of an escape sequence before the choice is not the choice's. */
        assert_true(inventory_selected("always \x1b[31m[never]", buf, sizeof(buf)));
        assert_string_equal(buf, "never");
}

static char root[] = "/tmp/rtsoak-inventory-XXXXXX";

/* root/rel holding len bytes of text (its folders made on the way). */
static void put_file(const char *rel, const char *text, size_t len) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", root, rel);
        for (char *s = strchr(path + strlen(root) + 1, '/'); s; s = strchr(s + 1, '/')) {
                *s = '\0';
                mkdir(path, 0755);
                *s = '/';
        }
        FILE *f = fopen(path, "we");
        assert_non_null(f);
        assert_int_equal(fwrite(text, 1, len, f), len);
        assert_int_equal(fclose(f), 0);
}
#define PUT(rel, text) put_file(rel, text, sizeof(text) - 1)

/* A tree whose files hold what a broken firmware, a hostile module or a damaged disk could put
 * there: control and invalid bytes, a NUL, lines far over the bound, overlapping cpufreq
 * policies naming CPUs that do not exist, a file that is a folder. */
static void make_hostile_tree(void) {
        char *big = malloc(10001), name[128];
        memset(big, 'A', 10000);
        put_file("sys/class/dmi/id/product_name", big, 10000);
        free(big);
        PUT("sys/class/dmi/id/bios_version", "1.2\x1b[31m\x07 \xff\n2nd line\n");
        PUT("sys/class/dmi/id/sys_vendor", "Ven\0dor\n");
        PUT("sys/class/dmi/id/bios_date", "\n");
        PUT("sys/class/dmi/id/board_name/x", "a folder, not a file\n");
        PUT("proc/cmdline", "ro isolcpus=2-3 nohz_full=2-3 mitigations=\x1b]0;evil\x07 quiet\n");
        PUT("proc/cpuinfo", "processor\t: 0\nmodel name\t: Evil\x1b[2J CPU\nmicrocode\t: 0x1\n");
        PUT("proc/sys/kernel/osrelease", "6.6-test\n");
        PUT("boot/config-6.6-test", "CONFIG_PREEMPT_RT=y\nCONFIG_HZ=1000\n");
        PUT("proc/sys/kernel/sched_rt_runtime_us", "-1\n");
        PUT("sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n");
        PUT("sys/devices/system/cpu/online", "0-3\n");
        PUT("sys/devices/system/cpu/smt/control", "off\n");
        for (int cpu = 0; cpu < 4; cpu++) {
                snprintf(name, sizeof(name), "sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
                put_file(name, cpu % 2 ? "1\n" : "0\n", 2);
                snprintf(name, sizeof(name),
                         "sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
                put_file(name, "0\n", 2);
                snprintf(name, sizeof(name), "sys/devices/system/cpu/cpu%d/cpuidle/state0/name",
                         cpu);
                PUT(name, "POLL\n");
                snprintf(name, sizeof(name), "sys/devices/system/cpu/cpu%d/cpuidle/state0/disable",
                         cpu);
                PUT(name, "0\n");
                snprintf(name, sizeof(name), "sys/devices/system/cpu/cpu%d/cpuidle/state1/name",
                         cpu);
                PUT(name, "C1\x1b/E\n");
                snprintf(name, sizeof(name), "sys/devices/system/cpu/cpu%d/cpuidle/state1/disable",
                         cpu);
                put_file(name, cpu == 3 ? "1\n" : "0\n", 2);
        }
        PUT("sys/devices/system/cpu/cpufreq/policy0/affected_cpus", "0 1\n");
        PUT("sys/devices/system/cpu/cpufreq/policy0/scaling_governor", "performance\n");
        PUT("sys/devices/system/cpu/cpufreq/policy2/affected_cpus", "2 3\n");
        PUT("sys/devices/system/cpu/cpufreq/policy2/scaling_governor", "powersave\n");
        /* Policies the kernel would never make: each names every possible CPU. */
        for (int i = 4; i < 9; i++) {
                snprintf(name, sizeof(name),
                         "sys/devices/system/cpu/cpufreq/policy%d/"
                         "affected_cpus",
                         i);
                PUT(name, "0-8191\n");
                snprintf(name, sizeof(name),
                         "sys/devices/system/cpu/cpufreq/policy%d/"
                         "scaling_governor",
                         i);
                PUT(name, "performance\n");
        }
        PUT("proc/123/comm", "irqbalance\n");
        PUT("proc/124/comm", "tuned\x1b\n");
        PUT("etc/tuned/active_profile", "realtime-virtual-host\n");
}

/* Whatever the files hold, the readers make fields the farm takes, or leave them out. */
static void test_hostile_tree(void **state) {
        struct inventory boot = {}, live = {}, back = {};
        char why[INVENTORY_WHY_MAX];
        (void) state;
        make_hostile_tree();
        assert_int_equal(inventory_read_boot(root, &boot), 0);
        assert_int_equal(inventory_read_live(root, &live), 0);
        /* A value past the bound is cut and says so; only the first line counts. */
        const char *product = inventory_get(&boot, "dmi.product_name");
        assert_non_null(product);
        assert_int_equal(strlen(product), INVENTORY_MAX_VALUE);
        assert_string_equal(product + INVENTORY_MAX_VALUE - 4, "A...");
        expect(&boot, "dmi.bios_version", "1.2?[31m? ?");
        expect(&boot, "dmi.sys_vendor", "Ven");
        expect(&boot, "dmi.bios_date", NULL);
        expect(&boot, "dmi.board_name", NULL);
        expect(&boot, "cmdline.isolcpus", "2-3");
        expect(&boot, "cmdline.mitigations", "?]0;evil?");
        expect(&boot, "cpu.model_name", "Evil?[2J CPU");
        expect(&boot, "kconfig.source", "/boot/config-6.6-test");
        expect(&boot, "kconfig.PREEMPT_RT", "y");
        expect(&boot, "kconfig.HZ", "1000");
        expect(&live, "thp.enabled", "madvise");
        expect(&live, "sysctl.kernel.sched_rt_runtime_us", "-1");
        expect(&live, "cpu.online", "0-3");
        expect(&live, "cpu.sockets", "1");
        expect(&live, "cpu.cores", "2");
        expect(&live, "cpu.threads", "4");
        expect(&live, "cpu.smt", "off");
        expect(&live, "cpuidle.state.POLL", "enabled");
        expect(&live, "cpuidle.state.C1__E", "enabled:0-2 disabled:3");
        /* A CPU counts once, in the first policy naming it. */
        expect(&live, "cpufreq.governor", "performance:0-1,4-8191 powersave:2-3");
        expect(&live, "service.irqbalance", "running");
        expect(&live, "service.tuned", "not running");
        expect(&live, "tuned.profile", "realtime-virtual-host");
        expect(&live, "numa.nodes", NULL);
        assert_int_equal(boot.dropped + live.dropped, 0);
        /* Every field is one the farm's check takes. */
        assert_int_equal(inventory_merge(&live, &boot), 0);
        char *text = inventory_to_text(&live);
        assert_non_null(text);
        if (inventory_from_text(text, &back, why) < 0)
                fail_msg("the farm would refuse it: %s", why);
        assert_true(inventory_equal(&live, &back));
        free(text);
        inventory_done(&back);
        inventory_done(&boot);
        inventory_done(&live);
}

/* A root with nothing in it: no field at all. */
static void test_empty_tree(void **state) {
        struct inventory boot = {}, live = {};
        char empty[600];
        (void) state;
        snprintf(empty, sizeof(empty), "%s/empty", root);
        assert_int_equal(mkdir(empty, 0755), 0);
        assert_int_equal(inventory_read_boot(empty, &boot), 0);
        assert_int_equal(inventory_read_live(empty, &live), 0);
        assert_int_equal(boot.n, 0);
        assert_int_equal(live.n, 0);
        inventory_done(&boot);
        inventory_done(&live);
}

/* This machine's inventory: each field whose file the kernel shows is there, each whose file
 * it does not is absent. */
static void test_this_machine(void **state) {
        static const struct {
                const char *field, *path;
                bool boot;
        } cases[] = {
                { "dmi.sys_vendor", "/sys/class/dmi/id/sys_vendor", true },
                { "dmi.bios_version", "/sys/class/dmi/id/bios_version", true },
                { "dt.model", "/sys/firmware/devicetree/base/model", true },
                { "cpu.online", "/sys/devices/system/cpu/online", false },
                { "cpu.smt", "/sys/devices/system/cpu/smt/control", false },
                { "thp.enabled", "/sys/kernel/mm/transparent_hugepage/enabled", false },
                { "sysctl.kernel.sched_rt_runtime_us", "/proc/sys/kernel/sched_rt_runtime_us",
                  false },
                { "clocksource.current",
                  "/sys/devices/system/clocksource/clocksource0/current_clocksource", false },
                { "modules.count", "/proc/modules", false },
                { "cpuidle.driver", "/sys/devices/system/cpu/cpuidle/current_driver", false },
                { "tuned.profile", "/etc/tuned/active_profile", false },
        };
        struct inventory boot = {}, live = {};
        (void) state;
        assert_int_equal(inventory_read_boot(NULL, &boot), 0);
        assert_int_equal(inventory_read_live(NULL, &live), 0);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                bool there = access(cases[i].path, R_OK) == 0;
                const char *v = inventory_get(cases[i].boot ? &boot : &live, cases[i].field);
                /* An empty DMI string is left out as well. */
                if (there && !v && cases[i].boot)
                        continue;
                if (there != (v != NULL))
                        fail_msg("%s: %s is %sreadable, the field %s", cases[i].field,
                                 cases[i].path, there ? "" : "not ", v ? "present" : "absent");
        }
        expect(&live, "service.irqbalance",
               inventory_get(&live, "service.irqbalance") ?: "missing");
        assert_true(inventory_get(&live, "cpu.threads") != NULL);
        /* Every field the machine gave is one the farm takes. */
        char why[INVENTORY_WHY_MAX];
        struct inventory back = {};
        char *text = inventory_to_text(&live);
        assert_int_equal(inventory_from_text(text, &back, why), 0);
        free(text);
        inventory_done(&back);
        for (size_t i = 0; i < boot.n; i++)
                fprintf(stderr, "# %s: %s\n", boot.fields[i].name, boot.fields[i].value);
        for (size_t i = 0; i < live.n; i++)
                fprintf(stderr, "# %s: %s\n", live.fields[i].name, live.fields[i].value);
        inventory_done(&boot);
        inventory_done(&live);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_fields),       cmocka_unit_test(test_describe_changes),
                cmocka_unit_test(test_cmdline),      cmocka_unit_test(test_kconfig),
                cmocka_unit_test(test_cpuinfo),      cmocka_unit_test(test_meminfo_modules_choices),
                cmocka_unit_test(test_hostile_tree), cmocka_unit_test(test_empty_tree),
                cmocka_unit_test(test_this_machine),
        };
        return RUN_TESTS_IN_TMPDIR(tests, root);
}

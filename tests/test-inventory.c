/* SPDX-License-Identifier: MIT */
/* Unit tests of the machine's inventory: the field map (bounds, what the kernel's bytes become,
 * comparisons), the parsers of the kernel's texts (command lines, configurations, cpuinfo of
 * x86 and arm64, meminfo, modules) and the readers on this machine, where a field is present
 * exactly when the kernel shows it. */
#include <errno.h>
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
        expect(&a, "dmi.bios_vendor", "Ven?[31mdor??" "!");
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
        assert_int_equal(inventory_read_boot(&boot), 0);
        assert_int_equal(inventory_read_live(&live), 0);
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
                cmocka_unit_test(test_fields),
                cmocka_unit_test(test_cmdline),
                cmocka_unit_test(test_kconfig),
                cmocka_unit_test(test_cpuinfo),
                cmocka_unit_test(test_meminfo_modules_choices),
                cmocka_unit_test(test_this_machine),
        };
        return RUN_TESTS(tests);
}

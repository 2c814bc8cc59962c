/* test_cpus.c -- config/cpus.h: the CPUs this process may use, read from
 * fake cgroup v1 and v2 trees in a temporary directory. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "config/cpus.h"

static char root[64];

/* A fresh temporary directory as the cgroup mount. */
static void make_root(void)
{
    strcpy(root, "/tmp/test_cpus_XXXXXX");
    cr_assert(mkdtemp(root) != NULL);
}

/* Write text to root/rel, making its directories. */
static void put(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        mkdir(path, 0700);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

static void drop_root(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    cr_expect_eq(system(cmd), 0);
}

TestSuite(cpus, .init = make_root, .fini = drop_root);

Test(cpus, no_cgroup_files_means_no_quota)
{
    cr_expect_eq(cfg_cpu_quota(root, NULL), 0);
    struct cfg_cpus c;
    cfg_cpus_combine(4, cfg_cpu_quota(root, NULL), 1, &c);
    cr_expect_eq(c.cpus, 4);
    cr_expect_eq(c.workers, 4);
}

Test(cpus, v2_max_is_no_quota)
{
    put("cpu.max", "max 100000\n");
    cr_expect_eq(cfg_cpu_quota(root, "0::/\n"), 0);
}

Test(cpus, v2_quota_rounds_up)
{
    put("cpu.max", "150000 100000\n");
    cr_expect_eq(cfg_cpu_quota(root, "0::/\n"), 2);
    put("cpu.max", "50000 100000\n");
    cr_expect_eq(cfg_cpu_quota(root, "0::/\n"), 1);
    put("cpu.max", "200000 100000\n");
    cr_expect_eq(cfg_cpu_quota(root, "0::/\n"), 2);
}

Test(cpus, v2_reads_the_process_own_cgroup)
{
    put("cpu.max", "max 100000\n");
    put("kubepods/pod1/cpu.max", "300000 100000\n");
    cr_expect_eq(cfg_cpu_quota(root, "0::/kubepods/pod1\n"), 3);
    /* its own cgroup's file absent (a container sees it at the root) */
    cr_expect_eq(cfg_cpu_quota(root, "0::/elsewhere\n"), 0);
}

Test(cpus, v1_no_quota)
{
    put("cpu/cpu.cfs_quota_us", "-1\n");
    put("cpu/cpu.cfs_period_us", "100000\n");
    cr_expect_eq(cfg_cpu_quota(root, "3:cpu:/\n"), 0);
}

Test(cpus, v1_quota_rounds_up)
{
    put("cpu/cpu.cfs_quota_us", "150000\n");
    put("cpu/cpu.cfs_period_us", "100000\n");
    cr_expect_eq(cfg_cpu_quota(root, "3:cpu:/\n"), 2);
    put("cpu/cpu.cfs_quota_us", "50000\n");
    cr_expect_eq(cfg_cpu_quota(root, "3:cpu:/\n"), 1);
}

Test(cpus, v1_cpu_cpuacct_and_own_cgroup)
{
    put("cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    put("cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    put("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "400000\n");
    put("cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
    cr_expect_eq(cfg_cpu_quota(root, "4:memory:/x\n3:cpu,cpuacct:/docker/abc\n0::/\n"), 4);
    cr_expect_eq(cfg_cpu_quota(root, "3:cpu,cpuacct:/\n"), 0);
}

Test(cpus, malformed_files_fall_back_to_affinity)
{
    const char *bad[] = {"abc\n", "150000\n", "150000 0\n", "0 100000\n", "1 2 3\n", "",
                         "99999999999999999999999 100000\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        put("cpu.max", bad[i]);
        int q = cfg_cpu_quota(root, "0::/\n");
        cr_expect_eq(q, 0, "cpu.max '%s' gave %d", bad[i], q);
        struct cfg_cpus c;
        cfg_cpus_combine(3, q, 1, &c);
        cr_expect_eq(c.workers, 3);
    }
    put("cpu/cpu.cfs_quota_us", "12x\n");
    put("cpu/cpu.cfs_period_us", "100000\n");
    cr_expect_eq(cfg_cpu_quota(root, "3:cpu:/\n"), 0);
    put("cpu/cpu.cfs_quota_us", "200000\n");
    put("cpu/cpu.cfs_period_us", "zero\n");
    cr_expect_eq(cfg_cpu_quota(root, "3:cpu:/\n"), 0);
}

Test(cpus, the_smaller_of_affinity_and_quota)
{
    struct cfg_cpus c;
    cfg_cpus_combine(1, 4, 1, &c);
    cr_expect_eq(c.cpus, 1);
    cr_expect_eq(c.workers, 1);
    cfg_cpus_combine(8, 2, 1, &c);
    cr_expect_eq(c.cpus, 2);
    cr_expect_eq(c.workers, 2);
    cfg_cpus_combine(0, 0, 0, &c);
    cr_expect_eq(c.cpus, 1, "at least 1");
    cr_expect_eq(c.workers, 1);
}

Test(cpus, divided_by_threads_per_request)
{
    struct cfg_cpus c;
    cfg_cpus_combine(4, 0, 2, &c);
    cr_expect_eq(c.workers, 2);
    cfg_cpus_combine(8, 3, 2, &c);
    cr_expect_eq(c.workers, 1, "3 CPUs / 2 rounds down");
    cfg_cpus_combine(2, 0, 4, &c);
    cr_expect_eq(c.workers, 1, "at least 1");
}

Test(cpus, detect_on_this_machine)
{
    struct cfg_cpus c;
    cfg_cpus_detect(1, &c);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    cr_expect(c.affinity >= 1 && c.affinity <= online, "affinity %d of %ld", c.affinity, online);
    cr_expect(c.workers >= 1 && c.workers <= c.cpus);
}

/* cfg_parse says whether workers came from a source or is the default. */
Test(cpus, parse_knows_an_explicit_workers)
{
    struct cfg c;
    char err[256];
    char *none[] = {"attention-server", NULL};
    cr_assert_eq(cfg_parse(&c, 1, none, NULL, NULL, err, sizeof err), 0);
    cr_expect_eq(c.workers_explicit, 0);
    cr_expect_eq(c.workers, 2);
    char *flag[] = {"attention-server", "--workers", "2", NULL};
    cr_assert_eq(cfg_parse(&c, 3, flag, NULL, NULL, err, sizeof err), 0);
    cr_expect_eq(c.workers_explicit, 1, "--workers 2, the old default, is still explicit");
    char *envp[] = {"ATTN_WORKERS=3", NULL};
    cr_assert_eq(cfg_parse(&c, 1, none, envp, NULL, err, sizeof err), 0);
    cr_expect_eq(c.workers_explicit, 1);
    cr_expect_eq(c.workers, 3);
}

/* cpus.h -- how many CPUs this process may use, for the default of workers.
 *
 * The smaller of the sched affinity mask and the cgroup CPU quota (what a
 * Kubernetes CPU limit sets), the quota rounded up, at least 1:
 *
 *     cgroup v2   <root><path>/cpu.max               "max 100000", "200000 100000"
 *     cgroup v1   <root>/cpu<path>/cpu.cfs_quota_us  (-1: none) and cpu.cfs_period_us,
 *                 also under <root>/cpu,cpuacct<path>
 *
 * <path> is the process's own cgroup, from /proc/self/cgroup ("0::/a/b" on
 * v2, "N:cpu,cpuacct:/a/b" on v1); when the files are not there (a
 * container sees its own cgroup at the mount's root) the root's are read.
 * A missing or malformed file means no quota, so the affinity alone counts.
 */
#ifndef CONFIG_CPUS_H
#define CONFIG_CPUS_H

struct cfg_cpus {
    int affinity; /* CPUs in the affinity mask, >= 1 */
    int quota;    /* ceil(quota / period), >= 1; 0 = no quota */
    int cpus;     /* min(affinity, quota), >= 1 */
    int workers;  /* max(1, cpus / threads_per_request) */
};

/* The cgroup quota in CPUs, rounded up: cgroup_root is the cgroup mount
 * ("/sys/fs/cgroup", or a fake tree in a test), self_cgroup the text of
 * /proc/self/cgroup (NULL: the root's files only). 0 when there is none
 * or a file is malformed. Pure: reads only files under cgroup_root. */
int cfg_cpu_quota(const char *cgroup_root, const char *self_cgroup);

/* Combine: out gets affinity, quota, cpus and workers as documented above.
 * affinity < 1 counts as 1; threads_per_request < 1 as 1. */
void cfg_cpus_combine(int affinity, int quota, int threads_per_request, struct cfg_cpus *out);

/* The real system: sched_getaffinity(), /proc/self/cgroup, /sys/fs/cgroup. */
void cfg_cpus_detect(int threads_per_request, struct cfg_cpus *out);

#endif

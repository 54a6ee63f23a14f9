/*
 * membudget.c — the automatic memory budget (membudget.h).
 */
#include "membudget.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The first number of a file (a cgroup value; "max" = -1), or -2 if unreadable. */
static int64_t read_num(const char *root, const char *path)
{
    char p[512], buf[64];
    snprintf(p, sizeof p, "%s%s", root, path);
    FILE *f = fopen(p, "r");
    if (!f)
        return -2;
    int64_t v = -2;
    if (fgets(buf, sizeof buf, f))
        v = !strncmp(buf, "max", 3) ? -1 : sscanf(buf, "%" SCNd64, &v) == 1 ? v : -2;
    fclose(f);
    return v;
}

static int64_t meminfo_available(const char *root)
{
    char p[512], line[256];
    snprintf(p, sizeof p, "%s/proc/meminfo", root);
    FILE *f = fopen(p, "r");
    int64_t kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %" SCNd64 " kB", &kb) == 1)
            break;
    fclose(f);
    return kb >= 0 ? kb * 1024 : -1;
}

/* The cgroup's room (limit - usage), -1 no limit or unknown. Only the root cgroup path
 * (/sys/fs/cgroup, what a container or a systemd service with MemoryMax= sees under its
 * own namespace) is read. */
static int64_t cgroup_room(const char *root)
{
    int64_t lim = read_num(root, "/sys/fs/cgroup/memory.max");
    int64_t use = read_num(root, "/sys/fs/cgroup/memory.current");
    if (lim == -2) { /* v1 */
        lim = read_num(root, "/sys/fs/cgroup/memory/memory.limit_in_bytes");
        use = read_num(root, "/sys/fs/cgroup/memory/memory.usage_in_bytes");
        if (lim >= ((int64_t)1 << 60)) /* v1's "no limit" is a huge number */
            lim = -1;
    }
    if (lim < 0)
        return -1;
    return use >= 0 && use < lim ? lim - use : lim;
}

int64_t ccd_mem_available(const char *root, const char **from)
{
    int64_t ma = meminfo_available(root), cg = cgroup_room(root);
    if (cg >= 0 && (ma < 0 || cg < ma)) {
        *from = "the cgroup's memory limit minus its usage";
        return cg;
    }
    *from = ma >= 0 ? "MemAvailable" : "nothing readable: 2 GiB assumed";
    return ma;
}

int64_t ccd_membudget_auto(const char **from)
{
    static int64_t budget = -1;
    static const char *src;
    if (budget < 0) {
        int64_t avail = ccd_mem_available("", &src);
        if (avail < 0)
            avail = (int64_t)2 << 30;
        budget = (int64_t)((double)avail * CCD_MEMBUDGET_SHARE);
        if (budget < ((int64_t)64 << 20))
            budget = (int64_t)64 << 20;
    }
    *from = src;
    return budget;
}

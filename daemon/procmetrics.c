/* procmetrics.c — process_* metrics from /proc; see procmetrics.h. */
#include "procmetrics.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static void sample(struct evbuffer *out, const char *name, const char *type, const char *help,
                   double v)
{
    evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name,
                        v);
}

/* Boot time in unix seconds (/proc/stat btime), or -1. */
static long long boot_time(void)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return -1;
    char line[256];
    long long bt = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "btime %lld", &bt) == 1)
            break;
    fclose(f);
    return bt;
}

void ccd_process_metrics(struct evbuffer *out)
{
    long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    /* fields after the command name, which may hold spaces and ')': from the last ')' on */
    const char *p = strrchr(buf, ')');
    unsigned long long utime, stime, start, vsize;
    long long rss;
    if (p && tick > 0 &&
        sscanf(p + 1,
               " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
               "%llu %llu %lld",
               &utime, &stime, &start, &vsize, &rss) == 5) {
        sample(out, "process_cpu_seconds_total", "counter",
               "Total user and system CPU time spent in seconds.",
               (double)(utime + stime) / (double)tick);
        sample(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
               (double)rss * (double)page);
        sample(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
               (double)vsize);
        long long bt = boot_time();
        if (bt > 0)
            sample(out, "process_start_time_seconds", "gauge",
                   "Start time of the process since unix epoch in seconds.",
                   (double)bt + (double)start / (double)tick);
    }
    DIR *dir = opendir("/proc/self/fd");
    if (dir) {
        long fds = 0;
        for (struct dirent *e; (e = readdir(dir));)
            fds += e->d_name[0] != '.';
        closedir(dir);
        sample(out, "process_open_fds", "gauge", "Number of open file descriptors.",
               (double)(fds - 1)); /* less the one opendir holds */
    }
    struct rlimit rl;
    if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY)
        sample(out, "process_max_fds", "gauge", "Maximum number of open file descriptors.",
               (double)rl.rlim_cur);
}

# gen_history.awk — deterministic KPI history for the black-box tests (model with features
# prb, thr, users; step S). Writes, for steps [from, to) of 5 cells:
#   - kcat input lines `key|json` to stdout, in several message shapes (see below);
#   - per cell the CSV `cellcast forward` reads, in model units: DIR/<n>.csv (header once,
#     when from == 0).
# Usage: awk -v S=900 -v T0=1714521600 -v from=0 -v to=288 -v dir=DIR -f gen_history.awk
# Cells and shapes (the mapping config has thr_kbps -> thr*1000):
#   0 "c-1"    object, unix seconds, KPIs under "kpis"
#   1 "c-2/a"  object, RFC 3339 UTC, top-level KPIs, thr given as thr_kbps (scaled)
#   2  17      numeric cell id, unix milliseconds, an unmapped extra field
#   3 "cell.x" and 4 "c:5"  one array message per step, RFC 3339 with +02:00 offset
function rfc(t, off,   s) {
    s = strftime("%Y-%m-%dT%H:%M:%S", t + off, 1)
    return s (off ? sprintf("+%02d:00", off / 3600) : "Z")
}
function val(c, p, k,   ph) {
    ph = 2 * 3.14159265358979 * p / 96 + c
    if (k == 0) return sprintf("%.4f", 0.35 + 0.2 * sin(ph) + 0.03 * sin(p * 1.7 + c))
    if (k == 1) return sprintf("%d", 40000 + 20000 * sin(ph + 0.5) + 3000 * sin(p * 0.9 + 2 * c))
    return sprintf("%d", 20 + 10 * sin(ph - 0.3) + (p * 7 + c * 3) % 5)
}
BEGIN {
    split("c-1 c-2/a 17 cell.x c:5", id, " ")
    for (p = from; p < to; p++) {
        t = T0 + p * S
        for (c = 0; c < 5; c++) {
            prb[c] = val(c, p, 0); thr[c] = val(c, p, 1); us[c] = val(c, p, 2)
            f = dir "/" c ".csv"
            if (p == 0) print "ts,prb,thr,users" > f
            # c-2/a sends kbps: thr_kbps = thr / 1000 exactly (thr is a multiple of 1000 there)
            if (c == 1) thr[c] = sprintf("%d", int(thr[c] / 1000) * 1000)
            print t "," prb[c] "," thr[c] "," us[c] >> f
            close(f)
        }
        printf "c-1|{\"cell\":\"c-1\",\"ts\":%d,\"kpis\":{\"prb\":%s,\"thr\":%s,\"users\":%s}}\n", t, prb[0], thr[0], us[0]
        printf "c-2/a|{\"cell\":\"c-2/a\",\"ts\":\"%s\",\"prb\":%s,\"thr_kbps\":%d,\"users\":%s}\n", rfc(t, 0), prb[1], thr[1] / 1000, us[1]
        printf "17|{\"cell\":17,\"ts\":%d000,\"prb\":%s,\"thr\":%s,\"users\":%s,\"vendor\":\"x\"}\n", t, prb[2], thr[2], us[2]
        printf "cell.x|[{\"cell\":\"cell.x\",\"ts\":\"%s\",\"kpis\":{\"prb\":%s,\"thr\":%s,\"users\":%s}}", rfc(t, 7200), prb[3], thr[3], us[3]
        if (p == bad_at) printf ",{\"cell\":\"cell.x\",\"ts\":\"not a time\",\"kpis\":{\"prb\":1}}"
        printf ",{\"cell\":\"c:5\",\"ts\":%d,\"kpis\":{\"prb\":%s,\"thr\":%s,\"users\":%s}}]\n", t, prb[4], thr[4], us[4]
    }
}

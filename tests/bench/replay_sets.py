#!/usr/bin/env python3
"""replay_sets.py — the real sets the learning benchmarks replay, prepared once for both
(tests/bench/learn_replay.sh: CSV files for `cellcast learn --data-dir`; learn_e2e.sh: the
same rows as Kafka messages by data day).

  replay_sets.py csv SET SHARED_DATA DIR
      DIR gets the set's CSV files: barcelona = ElBorn, LesCorts, PobleSec train files,
      each shifted by whole weeks to start within a week of the first (weekday and time of
      day kept: a replay of three sites starting together); hourly = links to the three
      train_Cell*.csv. Sets the learner was not tuned on (docs/results.md, "Sets the
      learner was not tuned on"):
        ett = a link to ETTh1.csv (one cell, 7 KPIs, hourly, 725 days);
        ett3 = three cells, ETTh1's rows of days [0, 60), [63, 123) and [126, 186), each
            shifted by whole weeks (9, 18) to start together;
        nab-traffic = NAB's realTraffic files (7 cells, KPI `value`: occupancy, speed,
            travel time; irregular steps of ~5 minutes, travel time ~10), their first 28
            days, each shifted by whole days to start within a day of the earliest (by
            weeks, TravelTime_387 alone would fill the first 3 days: its records of day 1
            span 23.5 h, no round);
        nab-machine = NAB realKnownCause's machine_temperature_system_failure cut into
            three 21-day pieces, cpu_utilization_asg_misconfiguration into two, and
            ec2_request_latency_system_failure (14 days) whole (6 cells of 5 minutes),
            each shifted by whole weeks to start within a week of the earliest.
  replay_sets.py kafka DIR OUT_DIR DAYS
      From the CSV files of DIR (as `csv` wrote them): OUT_DIR/dayNNN.txt, the messages of
      data day NNN (days since the earliest record, at most DAYS) in data order, one per
      line as `cell|{"cell": ..., "ts": epoch, "<kpi>": value, ...}` (kcat -K '|'), the
      cell the file name; empty or non-numeric values left out of the message. Prints the
      count per day, one per line.
"""
import calendar
import csv
import datetime as dt
import glob
import json
import math
import os
import sys

BARCELONA = ["PobleSec", "ElBorn", "LesCorts"]
TIME_FORMATS = ["%Y-%m-%d %H:%M:%S", "%m/%d/%Y %H:%M"]


def parse_time(s):
    for f in TIME_FORMATS:
        try:
            return dt.datetime.strptime(s, f)
        except ValueError:
            pass
    raise ValueError(f"unknown time format: {s!r}")


def read_rows(path):
    with open(path) as f:
        r = csv.reader(f)
        h = next(r)
        return h, [(parse_time(x[0]), x[1:]) for x in r if x]


def write_together(pieces, dst, days=7):
    """pieces: (cell, header, [(datetime, values)]). Each piece shifted by whole periods of
    DAYS days to start within one period after the earliest piece's start (time of day
    kept; the weekday too with 7), written as DST/<cell>.csv with the first time format."""
    t0 = min(rows[0][0] for _, _, rows in pieces)
    period = dt.timedelta(days=days)
    for cell, h, rows in pieces:
        shift = period * ((rows[0][0] - t0) // period)
        with open(f"{dst}/{cell}.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(h)
            for t, v in rows:
                w.writerow([(t - shift).strftime(TIME_FORMATS[0])] + v)


def cut(rows, start_days, length_days):
    """The rows stamped in [first + start_days, first + start_days + length_days)."""
    a = rows[0][0] + dt.timedelta(days=start_days)
    b = a + dt.timedelta(days=length_days)
    return [x for x in rows if a <= x[0] < b]


def prepare_new_set(name, shared, dst):
    """The sets the learner was not tuned on (module doc); False for an unknown name."""
    pieces, days = [], 7
    if name == "ett3":
        h, rows = read_rows(f"{shared}/ett/ETTh1.csv")
        for k, start in enumerate((0, 63, 126)):
            pieces.append((f"ETTh1_p{k}", h, cut(rows, start, 60)))
    elif name == "nab-traffic":
        for src in sorted(glob.glob(f"{shared}/nab/data/realTraffic/*.csv")):
            h, rows = read_rows(src)
            pieces.append((os.path.splitext(os.path.basename(src))[0], h, cut(rows, 0, 28)))
        days = 1  # weeks would start TravelTime_387 (10-minute steps with gaps) 3 days early
    elif name == "nab-machine":
        known = f"{shared}/nab/data/realKnownCause"
        h, rows = read_rows(f"{known}/machine_temperature_system_failure.csv")
        for k in range(3):
            pieces.append((f"machine_temperature_p{k}", h, cut(rows, 21 * k, 21)))
        h, rows = read_rows(f"{known}/cpu_utilization_asg_misconfiguration.csv")
        for k in range(2):
            pieces.append((f"cpu_utilization_asg_p{k}", h, cut(rows, 21 * k, 21)))
        h, rows = read_rows(f"{known}/ec2_request_latency_system_failure.csv")
        pieces.append(("ec2_request_latency", h, rows))
    else:
        return False
    write_together(pieces, dst, days)
    return True


def link(src, dst):
    link = os.path.join(dst, os.path.basename(src))
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(os.path.abspath(src), link)


def prepare_csv(name, shared, dst):
    os.makedirs(dst, exist_ok=True)
    if name == "ett":
        link(f"{shared}/ett/ETTh1.csv", dst)
        return
    if prepare_new_set(name, shared, dst):
        return
    if name == "hourly":
        for src in sorted(glob.glob(f"{shared}/lte-hourly-3cells/train_Cell*.csv")):
            link(src, dst)
        return
    if name != "barcelona":
        sys.exit("replay_sets.py: SET must be barcelona, hourly, ett, ett3, nab-traffic "
                 "or nab-machine")
    fmt = TIME_FORMATS[0]
    t0 = None
    for n in BARCELONA:
        with open(f"{shared}/lte-barcelona/{n}.csv") as f:
            r = csv.reader(f)
            h, rs = next(r), list(r)
        first = dt.datetime.strptime(rs[0][0], fmt)
        if t0 is None:
            t0 = first
        weeks = round((first - t0).total_seconds() / (7 * 86400))
        shift = dt.timedelta(days=7 * weeks)
        with open(f"{dst}/{n}.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(h)
            for x in rs:
                w.writerow([(dt.datetime.strptime(x[0], fmt) - shift).strftime(fmt)] + x[1:])


def kafka_days(src, out, days):
    os.makedirs(out, exist_ok=True)
    msgs = []
    for path in sorted(glob.glob(f"{src}/*.csv")):
        cell = os.path.splitext(os.path.basename(path))[0]
        with open(path) as f:
            r = csv.reader(f)
            h = next(r)
            for x in r:
                ts = calendar.timegm(parse_time(x[0]).timetuple())
                m = {"cell": cell, "ts": ts}
                for k, v in zip(h[1:], x[1:]):
                    try:
                        fv = float(v)
                    except ValueError:
                        continue
                    if math.isfinite(fv):
                        m[k] = fv
                msgs.append((ts, cell, m))
    msgs.sort(key=lambda t: (t[0], t[1]))
    t0 = msgs[0][0]
    counts = [0] * days
    files = [open(f"{out}/day{d:03d}.txt", "w") for d in range(days)]
    for ts, cell, m in msgs:
        d = (ts - t0) // 86400
        if d >= days:
            break
        files[d].write(cell + "|" + json.dumps(m) + "\n")
        counts[d] += 1
    for f in files:
        f.close()
    print("\n".join(str(c) for c in counts))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "csv":
        prepare_csv(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 5 and sys.argv[1] == "kafka":
        kafka_days(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit(__doc__)

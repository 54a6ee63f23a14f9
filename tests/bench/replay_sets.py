#!/usr/bin/env python3
"""replay_sets.py — the real sets the learning benchmarks replay, prepared once for both
(tests/bench/learn_replay.sh: CSV files for `cellcast learn --data-dir`; learn_e2e.sh: the
same rows as Kafka messages by data day).

  replay_sets.py csv SET SHARED_DATA DIR
      DIR gets the set's CSV files: barcelona = ElBorn, LesCorts, PobleSec train files,
      each shifted by whole weeks to start within a week of the first (weekday and time of
      day kept: a replay of three sites starting together); hourly = links to the three
      train_Cell*.csv.
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


def prepare_csv(name, shared, dst):
    os.makedirs(dst, exist_ok=True)
    if name == "hourly":
        for src in sorted(glob.glob(f"{shared}/lte-hourly-3cells/train_Cell*.csv")):
            link = os.path.join(dst, os.path.basename(src))
            if os.path.lexists(link):
                os.remove(link)
            os.symlink(os.path.abspath(src), link)
        return
    if name != "barcelona":
        sys.exit("replay_sets.py: SET must be barcelona or hourly")
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

"""nab_split.py — a NAB data file cut into history (the first 45 % of its rows) and test (the
rest) as the outside studies use it, the rows of one step kept on one side (cellcast puts a
continuation file after the history's last step: ec2_disk_write_bytes_1ef3de has two rows in
the step at 45 %).

As a module: split(path) -> (header, history rows, test rows, step seconds).
As a command: python3 nab_split.py SRC_DIR OUT_DIR writes OUT_DIR/<name>.hist.csv and
<name>.test.csv for every CSV in SRC_DIR.
"""
import csv
import datetime
import os
import statistics
import sys

HISTORY_SHARE = 45  # percent


def split(path):
    rows = list(csv.reader(open(path)))
    head, body = rows[0], rows[1:]
    ts = [datetime.datetime.fromisoformat(r[0]).timestamp() for r in body]
    step = int(statistics.median(b - a for a, b in zip(ts, ts[1:]) if b > a))
    h = len(body) * HISTORY_SHARE // 100
    while 0 < h < len(body) and ts[h] // step == ts[h - 1] // step:
        h += 1
    return head, body[:h], body[h:], step


def write(path, head, rows):
    with open(path, "w") as o:
        csv.writer(o, lineterminator="\n").writerows([head] + rows)


if __name__ == "__main__":
    src, out = sys.argv[1], sys.argv[2]
    for f in sorted(os.listdir(src)):
        if f.endswith(".csv"):
            head, hist, test, _ = split(os.path.join(src, f))
            write(os.path.join(out, f[:-4] + ".hist.csv"), head, hist)
            write(os.path.join(out, f[:-4] + ".test.csv"), head, test)

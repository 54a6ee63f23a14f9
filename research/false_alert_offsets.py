#!/usr/bin/env python3
"""false_alert_offsets.py — where the false alerts of an injected `anomaly-eval` run fall,
relative to the injected events of their own cell: for each false alert, the nearest
events' start and end in steps (negative: before the alert). It showed that the lagged
forecast's extra false alerts on the synthetic control sit about one day (96 steps at 15
minutes) after an injected event: the model copies the day before into the forecast made
L steps earlier (docs/design/alert-sensitivity.md, "The lagged forecast's echo").

    cellcast anomaly-eval --model M --data D ... --set S --verbose 2>&1 |
        python3 research/false_alert_offsets.py [--day STEPS]

Reads --verbose: every trial's labels first (cells in order, equally many per cell), then
each trial's per-cell results (`steps scored`, `false alert at row …`). Prints one line per
false alert (its trial, cell, row and the nearest events of its cell) and, with --day, how
many fall within ±STEPS/4 of one day after the start of an event of their cell (with
events every `--spacing` steps, a row at random does so with probability about
(STEPS/2 + 1) / spacing: 0.41 at 96 and 120).
"""
import argparse
import re
import sys

LABEL = re.compile(r"label (\w+)\s+kpi (\S+)\s+rows (\d+)-(\d+)")
FALSE = re.compile(r"cell(\d+) false alert at row (\d+): (.*)")
ROWS = re.compile(r"cell(\d+): \d+ rows \(")
SCORED = re.compile(r"cell(\d+): \d+ steps scored")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--day", type=int, default=0, help="steps in a day (0: no summary)")
    args = ap.parse_args()
    labels, cells, alerts, trial, prev = [], set(), [], -1, None
    for line in sys.stdin:
        m = LABEL.search(line)
        if m:
            labels.append((m[1], m[2], int(m[3]), int(m[4])))
        m = ROWS.search(line)
        if m:
            cells.add(int(m[1]))
        m = SCORED.search(line)
        if m:  # the per-cell results of a trial, cells in order
            cell = int(m[1])
            trial += prev is None or cell <= prev
            prev = cell
        m = FALSE.search(line)
        if m:
            alerts.append((trial, int(m[1]), int(m[2]), m[3]))
    per = len(labels) // max(1, (trial + 1) * len(cells))
    near_day = 0
    for t, cell, row, what in alerts:
        i = (t * len(cells) + cell) * per
        own = labels[i:i + per]
        near = [(kind, kpi, s - row, e - row) for kind, kpi, s, e in own
                if abs(s - row) < 150 or abs(e - row) < 150]
        if args.day and any(abs(row - s - args.day) <= args.day // 4 for _, _, s, _ in own):
            near_day += 1
        print(f"trial {t} cell{cell:04d} row {row} {what}: " +
              ", ".join(f"{k} {kpi} {ds:+d}..{de:+d}" for k, kpi, ds, de in near))
    if args.day:
        print(f"{near_day} of {len(alerts)} false alerts within ±{args.day // 4} steps of one "
              f"day after the start of an event of their cell")


if __name__ == "__main__":
    main()

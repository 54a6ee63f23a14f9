#!/usr/bin/env python3
"""fleet_summary.py — the table of docs/results.md "Incidents on a synthetic fleet" from
fleet_eval runs (issue 32): per run and the mean ± spread (half the range) over runs.

usage: fleet_summary.py DIR TAG [TAG ...]
  reads DIR/out_TAG.json (fleet_eval's stdout), DIR/inc_TAG.csv (--incidents) and
  DIR/err_TAG.log (its stderr, with FLEET_VERBOSE=1: the events not seen within 2 steps).
  TAG S@N: a run of --profile-persist with N among its values (--incidents
  'inc_S_p{persist}.csv'): the line of DIR/out_S.json whose profile_persist_steps is N,
  DIR/inc_S_pN.csv, and the part of DIR/err_S.log after that value's scoring line.
  TAG S#C: a run of several settings' lists (--incidents 'inc_S_c{combo}.csv'): the line of
  DIR/out_S.json whose combo is C, DIR/inc_S_cC.csv, the part of DIR/err_S.log after its
  scoring line. The false incidents by what opened them (opened_by) come from the CSV.
"""
import collections
import csv
import json
import sys


def run(d, tag):
    base, _, persist = tag.partition("@")
    combo = None
    if not persist and "#" in tag:  # one combination of the settings' lists
        base, _, combo = tag.partition("#")
        o = next(x for x in map(json.loads, open(f"{d}/out_{base}.json"))
                 if x.get("combo") == int(combo))
        inc_path = f"{d}/inc_{base}_c{combo}.csv"
    elif persist:  # one value of a --profile-persist list
        o = next(x for x in map(json.loads, open(f"{d}/out_{base}.json"))
                 if x["incident_settings"]["profile_persist_steps"] == int(persist))
        inc_path = f"{d}/inc_{base}_p{persist}.csv"
    else:
        o = json.load(open(f"{d}/out_{tag}.json"))
        inc_path = f"{d}/inc_{tag}.csv"
    k = o["kinds"]
    site_n = k["power_outage"]["n"] + k["transport_loss"]["n"]
    alerts = collections.defaultdict(list)
    opened_by = collections.Counter()
    with open(inc_path) as f:
        for row in csv.DictReader(f):
            alerts[row["explained_by"]].append((int(row["alerts"]), int(row["cells"])))
            if row["explained_by"] == "none" and int(row["open_step"]) >= 0:
                opened_by[row.get("opened_by", "?")] += 1
    site_inc = alerts["power_outage"] + alerts["transport_loss"]
    missed = collections.Counter()
    night = collections.Counter()
    try:
        mine = not persist and combo is None  # S@N, S#C: after its scoring line, to the next
        for line in open(f"{d}/err_{base}.log"):
            if (persist or combo is not None) and line.startswith("fleet_eval: resolve_hold_steps"):
                w = line.split()
                mine = (w[w.index("combo") + 1] == combo if combo is not None
                        else w[w.index("profile_persist_steps") + 1] == persist)
            if mine and line.startswith("  missed(2)"):
                w = line.split()
                kind, how = w[1], "detected" if "not detected" in line else "late"
                missed[(kind, "not detected" if how == "detected" else "late")] += 1
                step = int(w[5].split("+")[0])
                hour = (step % 96) / 4
                if how == "detected":
                    night[(kind, 0 <= hour < 7)] += 1
    except FileNotFoundError:
        pass
    return {
        "tag": tag,
        "cells": o["cells"],
        "seed": o["seed"],
        "site events": site_n,
        "site recall ≤2": (k["power_outage"]["within2"] + k["transport_loss"]["within2"]) / site_n,
        "power ≤2": k["power_outage"]["within2"] / max(1, k["power_outage"]["n"]),
        "transport ≤2": k["transport_loss"]["within2"] / max(1, k["transport_loss"]["n"]),
        "site split >1": (k["power_outage"]["split"] + k["transport_loss"]["split"]) / site_n,
        "shift ≤2": k["neighbour_shift"]["within2"] / max(1, k["neighbour_shift"]["n"]),
        "shift any": k["neighbour_shift"]["detected"] / max(1, k["neighbour_shift"]["n"]),
        "cell events": sum(k[x]["n"] for x in ("cell_outage", "cell_spike", "cell_degradation")),
        "cell recall": o["cell_event_recall"],
        "cell recall ≤2": o["cell_event_recall_within2"],
        "cell recall (alerts, paged or not)": o.get("cell_event_recall_alerts", 0.0),
        "cell outage recall": k["cell_outage"]["detected"] / max(1, k["cell_outage"]["n"]),
        "spike recall": k["cell_spike"]["detected"] / max(1, k["cell_spike"]["n"]),
        "degradation recall": k["cell_degradation"]["detected"] / max(1, k["cell_degradation"]["n"]),
        "false /1k cells/day": o["false_per_1000_cells_day"],
        "false incidents": o["false_incidents"],
        "false 1-cell share": o["false_by_cells"][0] / max(1, o["false_incidents"]),
        "incidents": o["incidents"],
        "alerts/incident": o["alerts_per_incident"],
        "alerts/site-outage incident": sum(a for a, _ in site_inc) / max(1, len(site_inc)),
        "burst-explained": o["explained_by"]["burst"],
        "false first KPI": o["false_first_kpi"],
        "false first alert": o["false_first_alert"],
        "false site-scope share": o.get("false_scope", {}).get("site", 0) / max(1, o["false_incidents"]),
        "false opened by evidence": o.get("false_first_evidence", 0),
        "false by what opened them": dict(opened_by),
        "false duration (steps)": o.get("false_duration_steps", {}),
        "evidence members": o.get("evidence_members", 0),
        "grouping": o.get("grouping", {}),
        "incident settings": o.get("incident_settings", {}),
        "missed": {f"{k} {h}": n for (k, h), n in sorted(missed.items())},
        "not detected, at night (00-07) or day": {f"{k} {'night' if n else 'day'}": c for (k, n), c in sorted(night.items())},
    }


def main():
    d, tags = sys.argv[1], sys.argv[2:]
    runs = [run(d, t) for t in tags]
    for r in runs:
        print(json.dumps(r, ensure_ascii=False))
    keys = [k for k, v in runs[0].items() if isinstance(v, float)]
    print("mean ± half-range over", len(runs), "runs:")
    for k in keys:
        v = [r[k] for r in runs]
        print(f"  {k}: {sum(v) / len(v):.3f} ± {(max(v) - min(v)) / 2:.3f}")


if __name__ == "__main__":
    main()

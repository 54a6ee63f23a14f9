#!/usr/bin/env python3
"""man/mkman.py — regenerates the committed man pages man/cellcastd.8.in and man/cellcast.1.in
from the programs' --help (the one option table of host/opts.c) and the hand-written text
below (meson fills in @VERSION@, @SYSCONFDIR@, @DATADIR@). The build never runs it (cross builds cannot run the binaries): run it after
changing an option and commit the result; tests/cli/test_man.sh fails while a page lags.

    python3 man/mkman.py BUILD/daemon/cellcastd BUILD/tools/cellcast
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OPT = re.compile(r"^  (?:(-\w), )?(--[\w-]+)(?: (\S+))?(?:\s{2,}(.*))?$")
CONT = re.compile(r"^ {20,}(\S.*)$")


def esc(s):
    s = s.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + s if s[:1] in (".", "'") else s


def help_of(argv):
    out = subprocess.run(argv + ["--help"], capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def options(lines):
    """roff for the options of one --help: .TP entries, sections as .SS-like lines, and
    the epilog as a paragraph."""
    roff, i = [], 0
    while i < len(lines) and lines[i].strip():  # usage (may wrap)
        i += 1
    body, epilog, seen_help = [], [], False
    for line in lines[i:]:
        if seen_help:
            epilog.append(line)
            continue
        m = OPT.match(line)
        c = CONT.match(line)
        if m:
            short, long_, arg, text = m.groups()
            head = (f"\\fB{esc(short)}\\fR, " if short else "") + f"\\fB{esc(long_)}\\fR"
            if arg:
                head += f" \\fI{esc(arg)}\\fR"
            body.append([head, [text] if text else []])
            seen_help = long_ == "--help"
        elif c and body:
            body[-1][1].append(c.group(1))
        elif line.strip() and not line.startswith(" "):
            body.append([None, [line.strip()]])  # a section title of the option table
        elif line.strip() and body:  # an indented line outside the columns: part of the help
            body[-1][1].append(line.strip())
    for head, text in body:
        if head is None:
            roff += [".PP", "\\fI" + esc(" ".join(text)) + "\\fR"]
        else:
            roff += [".TP", head, esc(" ".join(text))]
    epilog = [l for l in epilog if l.strip()]
    if epilog:
        roff += [".PP"] + [esc(l.strip()) for l in epilog]
    return roff


DAEMON_HEAD = r""".TH CELLCASTD 8 "" "cellcast @VERSION@" "System Administration"
.SH NAME
cellcastd \- KPI forecasting and alerting daemon for mobile-network cells
.SH SYNOPSIS
.B cellcastd
[\fB\-c\fR \fIFILE\fR] [\fB\-\-set\fR \fIkey\fR=\fIvalue\fR]... [\fB\-\-check\-config\fR] [\fB\-\-print\-config\fR]
.SH DESCRIPTION
.B cellcastd
consumes KPI records (Kafka or \fBPOST /v1/kpis\fR), keeps a ring of recent steps per
cell, forecasts every cell with a small Transformer at each step, scores the observed
values against the forecast and raises anomaly alerts. It serves forecasts, alerts and
metrics over HTTP and publishes alerts to Kafka. State (every cell's ring and alert
state) is snapshotted periodically and at shutdown and restored at the start.
.PP
Under systemd it runs as \fBcellcastd.service\fR (Type=notify, watchdog, reload on
SIGHUP). SIGTERM finishes the batch in flight, flushes alerts, writes the snapshot,
commits the offsets and exits 0.
.SH OPTIONS
"""

DAEMON_TAIL = r""".SH FILES
.TP
.I @SYSCONFDIR@/cellcast/cellcast.yaml
the configuration (every key is documented in the installed copy)
.TP
.I /var/lib/cellcast/state.snap
the snapshot (\fBsnapshot.path: auto\fR under systemd's StateDirectory=)
.TP
.I @DATADIR@/cellcast/
the default model and the contracts in \fIproto/\fR (OpenAPI, KPI and alert schemas)
.SH SIGNALS
SIGHUP reloads the model and the reloadable configuration keys; SIGTERM and SIGINT stop
gracefully.
.SH EXIT STATUS
0 on a clean stop or a valid configuration, 1 on a runtime or configuration error, 2 on
a usage error.
.SH SEE ALSO
.BR cellcast (1),
.BR systemd.service (5);
the operations guide \fI@DATADIR@/doc/cellcast/operations.md\fR.
"""

CLI_HEAD = r""".TH CELLCAST 1 "" "cellcast @VERSION@" "User Commands"
.SH NAME
cellcast \- train, evaluate, inspect and benchmark cellcast forecasting models
.SH SYNOPSIS
.B cellcast
.I command
[\fIoptions\fR]
.br
.B cellcast
.I command
\fB\-\-help\fR
.SH DESCRIPTION
The command-line companion of \fBcellcastd\fR(8): one command per task, each with its own
options (below, as \fBcellcast\fR \fIcommand\fR \fB\-\-help\fR prints them).
.PP
Environment: \fBOPENBLAS_CORETYPE\fR overrides the BLAS kernel choice.
"""

CLI_TAIL = r""".SH EXIT STATUS
0 on success, 1 on an error (with a message on standard error), 2 on a usage error.
.SH SEE ALSO
.BR cellcastd (8);
the guides under \fI@DATADIR@/doc/cellcast/\fR.
"""


def main():
    daemon, cli = sys.argv[1], sys.argv[2]
    page = DAEMON_HEAD.splitlines() + options(help_of([daemon])) + DAEMON_TAIL.splitlines()
    with open(os.path.join(HERE, "cellcastd.8.in"), "w") as f:
        f.write(".\\\" generated by man/mkman.py from cellcastd --help: edit the script\n")
        f.write("\n".join(page) + "\n")
    cmds = []
    for line in help_of([cli]):
        m = re.match(r"^  (\S+)\s+(.*)$", line)
        if m:
            cmds.append(m.groups())
    page = CLI_HEAD.splitlines() + [".SH COMMANDS"]
    for name, summary in cmds:
        page += [".SS " + esc(name), esc(summary[0].upper() + summary[1:]) + "."]
        page += options(help_of([cli, name]))
    page += CLI_TAIL.splitlines()
    with open(os.path.join(HERE, "cellcast.1.in"), "w") as f:
        f.write(".\\\" generated by man/mkman.py from cellcast --help: edit the script\n")
        f.write("\n".join(page) + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Recursive Datalog on the graphs of the GPU Datalog literature: Fox, a baseline Fox
binary and Soufflé on the same machine and the same data, in one run.

    python3 bench/datalog.py [--foxrun PATH] [--baseline PATH] [--souffle PATH]
        [--souffle-timeout S] [--backend gpu] [--repeat 3] [--graphs DIR]
        [--only tc:usroad,sg:fe_body]

Programs: transitive closure and same generation (queries/datalog/tc.logic, sg.logic).
Graphs: ../shared/data/graphs (gzip-compressed `src,dst` lines), unpacked once into a
temporary folder. For each program and graph, Fox runs `foxrun --timing --out DIR`
REPEAT + 1 times (the first warms the kernel cache and is not counted), writing to
/dev/shm where there is one; the table gives the median wall time of the whole command
(start-up, load, compute, writing the CSV) and the median compute time (from --timing),
and checks the number of rows (as --out reports them) against the published count. --baseline runs another foxrun binary (e.g. the previous build) the same
way, for before/after in one command. --souffle runs Soufflé's interpreter with 16
threads on the same program (`.printsize`, so it writes no output), stopped after
--souffle-timeout seconds. The published times of MNMGDatalog (one A100 and 32 A100s)
are printed beside them for reference; they come from other hardware.
"""

import argparse
import gzip
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (program, graph): (published rows, MNMGDatalog 1 A100 s, 32 A100 s)
PUBLISHED = {
    ("tc", "usroad"): (871365688, 75.2, 1.74),
    ("tc", "p2p-Gnutella31"): (884179859, 9.87, 0.77),
    ("tc", "fe_ocean"): (1669750513, 71.8, 2.05),
    ("tc", "TG.cedge"): (481121, None, None),
    ("tc", "OL.cedge"): (146120, None, None),
    ("sg", "fe_body"): (408443204, 20.5, 1.48),
    ("sg", "usroad"): (3137407481, None, 8.78),
    ("sg", "p2p-Gnutella31"): (3700737910, None, 7.23),
    ("sg", "OL.cedge"): (285431, None, None),
}
DEFAULT = "tc:OL.cedge,tc:TG.cedge,tc:p2p-Gnutella31,tc:usroad,tc:fe_ocean,sg:OL.cedge,sg:fe_body"

SOUFFLE = {
    "tc": """.decl edge(x: number, y: number)
.input edge(IO=file, filename="edge.csv", delimiter=",")
.decl path(x: number, y: number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.printsize path
""",
    "sg": """.decl edge(x: number, y: number)
.input edge(IO=file, filename="edge.csv", delimiter=",")
.decl sg(x: number, y: number)
sg(x, y) :- edge(p, x), edge(p, y), x != y.
sg(x, y) :- edge(a, x), sg(a, b), edge(b, y).
.printsize sg
""",
}


def fox_run(foxrun, prog, data, backend, out):
    """One foxrun: (wall s, compute ms, rows written)."""
    shutil.rmtree(out, ignore_errors=True)
    t = time.time()
    p = subprocess.run(
        [foxrun, prog, "--data", data, "--backend", backend, "--timing", "--out", out],
        capture_output=True,
        text=True,
    )
    wall = time.time() - t
    if p.returncode != 0:
        sys.exit(f"{foxrun} {prog} on {data} failed:\n{p.stderr[-3000:]}")
    m = re.search(r"compute ([0-9.]+) ms", p.stderr)
    compute = float(m.group(1)) if m else float("nan")
    # `--out` lists each file written with its rows on standard error.
    m = re.search(r"([0-9]+) rows?\b", p.stderr[p.stderr.rfind(".csv") :])
    rows = int(m.group(1)) if m else -1
    shutil.rmtree(out, ignore_errors=True)
    return wall, compute, rows


def fox_median(foxrun, prog, data, backend, out, repeat):
    fox_run(foxrun, prog, data, backend, out)
    runs = [fox_run(foxrun, prog, data, backend, out) for _ in range(repeat)]
    return (
        statistics.median(r[0] for r in runs),
        statistics.median(r[1] for r in runs),
        runs[0][2],
    )


def souffle_run(souffle, prog, data, timeout):
    """Soufflé's interpreter on 16 threads: (wall s or None past the timeout, rows)."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "p.dl")
        with open(src, "w") as f:
            f.write(SOUFFLE[prog])
        t = time.time()
        try:
            p = subprocess.run(
                [souffle, "-j16", "--no-preprocessor", "-F", data, "-D", d, src],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return None, None
        wall = time.time() - t
        if p.returncode != 0:
            sys.exit(f"souffle failed on {data}:\n{p.stderr[-2000:]}")
        rows = int(p.stdout.split()[-1])
        return wall, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--foxrun", default=os.path.join(ROOT, "target/release/foxrun"))
    ap.add_argument("--baseline", help="another foxrun binary to run the same way")
    ap.add_argument("--souffle", help="the Soufflé binary")
    ap.add_argument("--souffle-timeout", type=float, default=60)
    ap.add_argument("--backend", default="gpu")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--graphs", default=os.path.join(ROOT, "..", "shared", "data", "graphs"))
    ap.add_argument("--only", default=DEFAULT, help="program:graph pairs, comma-separated")
    args = ap.parse_args()
    # Results are written to memory where the machine has it (they are tens of GB).
    work = tempfile.mkdtemp(prefix="fox-datalog-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        print(
            f"{'program':8} {'graph':16} {'rows':>14} {'ok':3} {'fox wall s':>10} {'compute s':>9}"
            + (f" {'base wall s':>11} {'speed-up':>8}" if args.baseline else "")
            + (f" {'souffle s':>9} {'ratio':>7}" if args.souffle else "")
            + f" {'1 A100 s':>8} {'32 A100 s':>9}"
        )
        for pair in args.only.split(","):
            prog, graph = pair.split(":")
            data = os.path.join(work, graph)
            if not os.path.isdir(data):
                os.makedirs(data)
                with gzip.open(os.path.join(args.graphs, f"{graph}.csv.gz"), "rb") as src, open(
                    os.path.join(data, "edge.csv"), "wb"
                ) as dst:
                    shutil.copyfileobj(src, dst)
            qp = os.path.join(ROOT, "queries", "datalog", f"{prog}.logic")
            out = os.path.join(work, "out")
            wall, compute, rows = fox_median(args.foxrun, qp, data, args.backend, out, args.repeat)
            pub = PUBLISHED.get((prog, graph), (None, None, None))
            ok = "yes" if pub[0] is None or pub[0] == rows else "NO"
            line = f"{prog:8} {graph:16} {rows:>14} {ok:3} {wall:>10.2f} {compute / 1000:>9.2f}"
            if args.baseline:
                bwall, _, brows = fox_median(args.baseline, qp, data, args.backend, out, args.repeat)
                if brows != rows:
                    ok = "NO"
                line += f" {bwall:>11.2f} {bwall / wall:>7.1f}x"
            if args.souffle:
                swall, srows = souffle_run(args.souffle, prog, data, args.souffle_timeout)
                if swall is None:
                    line += f" {'>' + str(int(args.souffle_timeout)):>9} {'>' + format(args.souffle_timeout / wall, '.0f') + 'x':>7}"
                else:
                    if srows != rows:
                        line += " (souffle rows differ!)"
                    line += f" {swall:>9.2f} {swall / wall:>6.1f}x"
            a1, a32 = pub[1], pub[2]
            line += f" {a1 if a1 else '-':>8} {a32 if a32 else '-':>9}"
            print(line, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

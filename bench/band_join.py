#!/usr/bin/env python3
"""Band joins: Fox against DuckDB on the same machine and the same data, in one run.

    python3 bench/band_join.py [--foxrun PATH] [--foxc PATH] [--backend gpu] \
        [--rows 1000000,10000000] [--width 50] [--repeat 3] [--dir DIR]

For each row count N, DuckDB writes two tables a(x, t) and b(y, t) of N rows (x, y the
row numbers, t uniform over 0 .. 10 N) as Parquet files, so that each row of `a` finds
about `width / 10` rows of `b` within `t1 <= t2 <= t1 + width`. Then both systems count
the pairs of rows within the band:

    Fox:     n[] = c <- agg<<c = count()>> a(x, t1), b(y, t2), t2 >= t1, t2 <= t1 + W.
    DuckDB:  SELECT count(*) FROM a, b WHERE b.t >= a.t AND b.t <= a.t + W

Fox runs `foxrun --timing` REPEAT + 1 times (the first also compiles kernels; it is not
counted) and reports the median compute time (data resident on the backend: loading,
upload and kernel compilation excluded). DuckDB (all cores) loads the Parquet files into
tables once, runs the query once untimed and REPEAT times timed; the median is reported.
The counts must agree. With --cross N, the smallest size also runs Fox's plan with
join-selection disabled (the cross product and a filter), for comparison.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time


def fox_compute_ms(foxrun, prog, data, backend, plan=None):
    """One foxrun: (compute ms without kernel compilation, the count)."""
    target = plan or prog
    out = subprocess.run(
        [foxrun, target, "--data", data, "--backend", backend, "--timing", "--format", "csv"],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        sys.exit(f"foxrun failed ({out.returncode}):\n{out.stderr[-4000:]}")
    m = re.search(r"compute ([0-9.]+) ms \(of which kernel compilation ([0-9.]+) ms\)", out.stderr)
    if not m:
        sys.exit(f"no compute time in foxrun's timing:\n{out.stderr[-4000:]}")
    lines = [l for l in out.stdout.splitlines() if l.strip()]
    return float(m.group(1)) - float(m.group(2)), int(lines[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--foxrun", default="target/release/foxrun")
    ap.add_argument("--foxc", default="target/release/foxc")
    ap.add_argument("--backend", default="gpu")
    ap.add_argument("--rows", default="1000000,10000000")
    ap.add_argument("--width", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cross", type=int, default=0, help="also run the cross-product plan at this row count")
    ap.add_argument("--dir", default="/tmp/fox-band")
    args = ap.parse_args()

    import duckdb

    os.makedirs(args.dir, exist_ok=True)
    w = args.width
    prog = os.path.join(args.dir, "band_count.logic")
    with open(prog, "w") as f:
        f.write(
            'a(x, t) -> int(x), int(t).\nb(y, t) -> int(y), int(t).\n'
            '.input a from "a.parquet".\n.input b from "b.parquet".\n'
            f"n[] = c <- agg<<c = count()>> a(x, t1), b(y, t2), t2 >= t1, t2 <= t1 + {w}.\n"
            ".output n.\n"
        )
    sizes = [int(float(s)) for s in args.rows.split(",")]
    if args.cross:
        sizes = sorted(set(sizes + [args.cross]))
    con = duckdb.connect()
    threads = con.execute("SELECT current_setting('threads')").fetchone()[0]
    print(f"band join t1 <= t2 <= t1 + {w}; DuckDB {duckdb.__version__} with {threads} threads; Fox on {args.backend}")
    print(f"{'rows':>12} {'pairs':>14} {'Fox ms':>10} {'DuckDB ms':>10} {'DuckDB/Fox':>11}  note")
    for n in sizes:
        data = os.path.join(args.dir, f"n{n}")
        os.makedirs(data, exist_ok=True)
        for name, seed in (("a", 0.25), ("b", 0.75)):
            path = os.path.join(data, f"{name}.parquet")
            if not os.path.exists(path):
                con.execute(f"SELECT setseed({seed})")
                con.execute(
                    f"COPY (SELECT range AS x, (random() * {10 * n})::BIGINT AS t FROM range({n})) "
                    f"TO '{path}' (FORMAT parquet)"
                )
        con.execute(f"CREATE OR REPLACE TABLE a AS SELECT * FROM '{data}/a.parquet'")
        con.execute(f"CREATE OR REPLACE TABLE b AS SELECT * FROM '{data}/b.parquet'")
        q = f"SELECT count(*) FROM a, b WHERE b.t >= a.t AND b.t <= a.t + {w}"
        want = con.execute(q).fetchone()[0]
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            con.execute(q).fetchone()
            times.append((time.perf_counter() - t0) * 1000)
        duck = statistics.median(times)

        plans = [("band join", None)]
        if n == args.cross:
            plan = os.path.join(args.dir, "cross.ron")
            subprocess.run(
                [args.foxc, "compile", prog, "--disable-pass", "join-selection", "-o", plan], check=True
            )
            plans.append(("cross product + filter", plan))
        for note, plan in plans:
            fox_compute_ms(args.foxrun, prog, data, args.backend, plan)
            runs = [fox_compute_ms(args.foxrun, prog, data, args.backend, plan) for _ in range(args.repeat)]
            got = runs[0][1]
            if got != want:
                sys.exit(f"{n} rows ({note}): Fox counts {got}, DuckDB {want}")
            fox = statistics.median(r[0] for r in runs)
            print(f"{n:>12} {want:>14} {fox:>10.2f} {duck:>10.2f} {duck / fox:>10.1f}x  {note}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()

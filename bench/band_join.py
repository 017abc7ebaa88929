#!/usr/bin/env python3
"""Band joins: Fox against DuckDB on the same machine and the same data, in one run.

    python3 bench/band_join.py [--foxrun PATH] [--foxc PATH] [--backend gpu] \
        [--rows 1000000,10000000] [--width 50] [--repeat 3] [--cases band,ineq,overlap] [--dir DIR]

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

--cases picks what runs (default `band`; `band,ineq,overlap` for all three):

    band     the band join above.
    ineq     two inequalities on different columns (an inequality join): tables
             a(x, p, q), b(y, p, q) with p uniform over 0 .. 10 N and q = p + u, u uniform
             over 0 .. W, so that `a.p < b.p AND a.q > b.q` (b's row strictly inside a's
             window) holds for about N W / 20 pairs:
               Fox:    n[] = c <- agg<<c = count()>> a(x, p1, q1), b(y, p2, q2), p1 < p2, q1 > q2.
               DuckDB: SELECT count(*) FROM a, b WHERE a.p < b.p AND a.q > b.q
    overlap  interval overlap, a self-join: iv(x, s, e) with s uniform over 0 .. 10 N and
             e = s + 1 + u, u uniform over 0 .. W:
               Fox:    n[] = c <- agg<<c = count()>> iv(x, s1, e1), iv(y, s2, e2), s1 < e2, s2 < e1.
               DuckDB: SELECT count(*) FROM iv i1, iv i2 WHERE i1.s < i2.e AND i2.s < i1.e
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


def write_tables(con, data, n, w, case):
    """The Parquet files of one case at one size (kept between runs)."""
    tables = {
        "band": [("a", 0.25, f"range AS x, (random() * {10 * n})::BIGINT AS t"),
                 ("b", 0.75, f"range AS x, (random() * {10 * n})::BIGINT AS t")],
        "ineq": [(name, seed, f"range AS x, p, p + (random() * {w})::BIGINT AS q FROM "
                              f"(SELECT range, (random() * {10 * n})::BIGINT AS p FROM range({n}))")
                 for name, seed in (("ia", 0.25), ("ib", 0.75))],
        "overlap": [("iv", 0.5, f"range AS x, s, s + 1 + (random() * {w})::BIGINT AS e FROM "
                                f"(SELECT range, (random() * {10 * n})::BIGINT AS s FROM range({n}))")],
    }[case]
    for name, seed, cols in tables:
        path = os.path.join(data, f"{name}.parquet")
        if not os.path.exists(path):
            con.execute(f"SELECT setseed({seed})")
            source = cols if " FROM " in cols else f"{cols} FROM range({n})"
            con.execute(f"COPY (SELECT {source}) TO '{path}' (FORMAT parquet)")
        con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM '{path}'")


def case_program(case, w):
    """Fox's program and DuckDB's query of a case."""
    if case == "band":
        return (
            'a(x, t) -> int(x), int(t).\nb(y, t) -> int(y), int(t).\n'
            '.input a from "a.parquet".\n.input b from "b.parquet".\n'
            f"n[] = c <- agg<<c = count()>> a(x, t1), b(y, t2), t2 >= t1, t2 <= t1 + {w}.\n"
            ".output n.\n",
            f"SELECT count(*) FROM a, b WHERE b.t >= a.t AND b.t <= a.t + {w}",
            f"band join t1 <= t2 <= t1 + {w}",
        )
    if case == "ineq":
        return (
            "ia(x, p, q) -> int(x), int(p), int(q).\nib(y, p, q) -> int(y), int(p), int(q).\n"
            '.input ia from "ia.parquet".\n.input ib from "ib.parquet".\n'
            "n[] = c <- agg<<c = count()>> ia(x, p1, q1), ib(y, p2, q2), p1 < p2, q1 > q2.\n"
            ".output n.\n",
            "SELECT count(*) FROM ia, ib WHERE ia.p < ib.p AND ia.q > ib.q",
            f"inequality join p1 < p2, q1 > q2 (q = p + [0, {w}))",
        )
    return (
        'iv(x, s, e) -> int(x), int(s), int(e).\n.input iv from "iv.parquet".\n'
        "n[] = c <- agg<<c = count()>> iv(x, s1, e1), iv(y, s2, e2), s1 < e2, s2 < e1.\n"
        ".output n.\n",
        "SELECT count(*) FROM iv i1, iv i2 WHERE i1.s < i2.e AND i2.s < i1.e",
        f"interval overlap self-join (lengths 1 .. {w + 1})",
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--foxrun", default="target/release/foxrun")
    ap.add_argument("--foxc", default="target/release/foxc")
    ap.add_argument("--backend", default="gpu")
    ap.add_argument("--rows", default="1000000,10000000")
    ap.add_argument("--width", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cross", type=int, default=0, help="also run the cross-product plan at this row count")
    ap.add_argument("--cases", default="band", help="band, ineq, overlap: comma-separated")
    ap.add_argument("--dir", default="/tmp/fox-band")
    args = ap.parse_args()

    import duckdb

    os.makedirs(args.dir, exist_ok=True)
    w = args.width
    sizes = [int(float(s)) for s in args.rows.split(",")]
    if args.cross:
        sizes = sorted(set(sizes + [args.cross]))
    con = duckdb.connect()
    threads = con.execute("SELECT current_setting('threads')").fetchone()[0]
    for case in args.cases.split(","):
        if case not in ("band", "ineq", "overlap"):
            sys.exit(f"unknown case {case!r}: band, ineq or overlap")
        text, q, title = case_program(case, w)
        prog = os.path.join(args.dir, f"{case}_count.logic")
        with open(prog, "w") as f:
            f.write(text)
        print(f"{title}; DuckDB {duckdb.__version__} with {threads} threads; Fox on {args.backend}")
        print(f"{'rows':>12} {'pairs':>14} {'Fox ms':>10} {'DuckDB ms':>10} {'DuckDB/Fox':>11}  note")
        for n in sizes:
            data = os.path.join(args.dir, f"n{n}")
            os.makedirs(data, exist_ok=True)
            write_tables(con, data, n, w, case)
            want = con.execute(q).fetchone()[0]
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                con.execute(q).fetchone()
                times.append((time.perf_counter() - t0) * 1000)
            duck = statistics.median(times)

            plans = [({"band": "band join", "ineq": "inequality join", "overlap": "inequality join"}[case], None)]
            if n == args.cross:
                plan = os.path.join(args.dir, f"{case}_cross.ron")
                subprocess.run(
                    [args.foxc, "compile", prog, "--disable-pass", "join-selection", "-o", plan], check=True
                )
                plans.append(("cross product + filter", plan))
            for note, plan in plans:
                fox_compute_ms(args.foxrun, prog, data, args.backend, plan)
                runs = [fox_compute_ms(args.foxrun, prog, data, args.backend, plan) for _ in range(args.repeat)]
                got = runs[0][1]
                if got != want:
                    sys.exit(f"{case}, {n} rows ({note}): Fox counts {got}, DuckDB {want}")
                fox = statistics.median(r[0] for r in runs)
                print(f"{n:>12} {want:>14} {fox:>10.2f} {duck:>10.2f} {duck / fox:>10.1f}x  {note}")
                sys.stdout.flush()
        print()


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# TPC-H: Fox against DuckDB on the same machine and the same data, in one run.
#
#   bash tpch/bench.sh SF [BACKEND] [REPEAT] [QUERIES]
#
# Writes the eight tables at scale factor SF as .tbl files (foxbench tpch-gen) into
# $TPCH_DATA (default /tmp/tpch-sfSF), runs DuckDB on them (tpch/bench-duckdb.py: all
# cores, one warm-up then REPEAT runs per query), then Fox (foxbench tpch --sf SF: the same
# rows generated in memory, resident on BACKEND, default gpu), and prints both medians per
# query with the ratio DuckDB / Fox. JSON files of both runs go to $TPCH_OUT (default the
# data folder). $FOXBENCH names the foxbench binary (default target/release/foxbench).
set -euo pipefail
sf=${1:?usage: bash tpch/bench.sh SF [BACKEND] [REPEAT] [QUERIES]}
backend=${2:-gpu}
repeat=${3:-5}
queries=${4:-all}
foxbench=${FOXBENCH:-target/release/foxbench}
data=${TPCH_DATA:-/tmp/tpch-sf$sf}
out=${TPCH_OUT:-$data}
cd "$(dirname "$0")/.."
mkdir -p "$out"
if [ ! -f "$data/lineitem.tbl" ]; then
    "$foxbench" tpch-gen --sf "$sf" --out "$data"
fi
qarg=()
if [ "$queries" != all ]; then qarg=(--queries "$queries"); fi
echo "== DuckDB, SF $sf"
python3 tpch/bench-duckdb.py --data "$data" --repeat "$repeat" ${qarg[@]+"${qarg[@]}"} --json "$out/duckdb.json"
echo "== Fox ($backend), SF $sf"
"$foxbench" tpch --sf "$sf" --backend "$backend" --repeat "$repeat" ${qarg[@]+"${qarg[@]}"} --json "$out/fox.json"
echo "== Fox against DuckDB"
python3 - "$out/duckdb.json" "$out/fox.json" <<'EOF'
import json, math, sys
d = {q["query"]: q["median_ms"] for q in json.load(open(sys.argv[1]))["queries"]}
f = {q["query"]: q["median_ms"] for q in json.load(open(sys.argv[2]))["queries"]}
print(f"{'query':>5} {'Fox ms':>10} {'DuckDB ms':>10} {'DuckDB/Fox':>11}")
ratios = []
for q in sorted(set(d) & set(f)):
    r = d[q] / f[q] if f[q] > 0 else float("inf")
    ratios.append(r)
    print(f"{'Q%d' % q:>5} {f[q]:>10.2f} {d[q]:>10.2f} {r:>11.2f}")
if ratios:
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"total {sum(f[q] for q in f):>10.1f} {sum(d[q] for q in d):>10.1f}")
    print(f"geometric mean of DuckDB/Fox: {geo:.2f}; Fox faster on {sum(r > 1 for r in ratios)} of {len(ratios)}")
EOF

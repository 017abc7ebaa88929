#!/usr/bin/env bash
# Times the loading of a large CSV file by one or more foxrun binaries, alternating them.
#
#   bash bench/load_csv.sh ROWS RUNS FOXRUN...
#
# Writes DIR/r.csv (DIR: $LOAD_DIR, default /tmp/fox-load-csv; kept between calls) with
# ROWS rows of five columns (int32, int64, decimal, date, string of 1,000 values) and
# runs `FOXRUN load.logic --data DIR --backend cpu --timing` RUNS times per binary, the
# binaries in turn. Prints each run's load time (`load (parse)` of --timing) and CPU
# seconds (user + sys), then per binary the medians.
set -euo pipefail
rows=${1:?rows}
runs=${2:?runs}
shift 2
dir=${LOAD_DIR:-/tmp/fox-load-csv}
mkdir -p "$dir"
if [ ! -f "$dir/r.csv" ] || [ "$(cat "$dir/rows" 2>/dev/null)" != "$rows" ]; then
  python3 - "$rows" "$dir/r.csv" <<'EOF'
import sys
rows, out = int(sys.argv[1]), sys.argv[2]
tags = [f"tag{i}" for i in range(1000)]
days = [f"{1992 + i // 365}-{(i % 365) // 31 + 1:02d}-{(i % 31) % 28 + 1:02d}" for i in range(2555)]
with open(out, "w") as f:
    for start in range(0, rows, 100_000):
        lines = []
        for k in range(start, min(rows, start + 100_000)):
            v = (k * 2654435761) % 1000000007
            lines.append(f"{k},{v},{v % 100000}.{k % 100:02d},{days[k % 2555]},{tags[v % 1000]}\n")
        f.write("".join(lines))
EOF
  echo "$rows" > "$dir/rows"
fi
cat > "$dir/load.logic" <<'EOF'
r(k, v, p, d, t) -> int32(k), int64(v), decimal(p), date(d), string(t).
.input r.
q(k, v, p, d, t) <- r(k, v, p, d, t), k < 3.
.output q.
EOF
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
for b in "$@"; do rm -f "$dir/results.$(echo "$b" | tr '/' '_')"; done
for i in $(seq 1 "$runs"); do
  for b in "$@"; do
    /usr/bin/time -o "$dir/time" -f '%U %S' "$b" "$dir/load.logic" --data "$dir" --backend cpu --timing \
      2> "$dir/err" > /dev/null
    load=$(grep -o 'load (parse) [0-9.]*' "$dir/err" | awk '{print $3}')
    cpu=$(awk '{print $1 + $2}' "$dir/time")
    echo "$b run $i: load $load ms, cpu $cpu s"
    echo "$load $cpu" >> "$dir/results.$(echo "$b" | tr '/' '_')"
  done
done
for b in "$@"; do
  f="$dir/results.$(echo "$b" | tr '/' '_')"
  echo "$b: median load $(awk '{print $1}' "$f" | median) ms, median cpu $(awk '{print $2}' "$f" | median) s"
  rm -f "$f"
done

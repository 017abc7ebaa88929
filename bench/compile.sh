#!/usr/bin/env bash
# Compile time of generated programs of growing size, per shape.
#   bash bench/compile.sh [SHAPE ...] [-- SIZE ...]
# Shapes: cmp chain unsafe unknown joins rules strata facts singles recursive negations
# cycle atoms eqjoins columns order loops typos (all by default; see
# bench/compile_shapes.py). Sizes default to 1000 2000 4000 8000 16000. FOXC names the
# foxc binary (default: build target/release/foxc with cargo). A run longer than LIMIT
# seconds (default 60) is stopped, and the shape's larger sizes are skipped.
# For each shape and size, prints the seconds `foxc compile --emit kernels` takes (check,
# plan and lower; a program with errors stops after the check) and the ratio to the
# previous size: near 2 for linear growth, near 4 for quadratic.
set -euo pipefail
cd "$(dirname "$0")/.."
shapes=(); sizes=()
while [ $# -gt 0 ]; do
    if [ "$1" = "--" ]; then shift; sizes=("$@"); break; fi
    shapes+=("$1"); shift
done
[ ${#shapes[@]} -gt 0 ] || shapes=(cmp chain unsafe unknown joins rules strata facts singles recursive negations cycle atoms eqjoins columns order loops typos)
[ ${#sizes[@]} -gt 0 ] || sizes=(1000 2000 4000 8000 16000)
foxc=${FOXC:-}
if [ -z "$foxc" ]; then
    cargo build -q --release -p fox-cli --bin foxc
    foxc=target/release/foxc
fi
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
printf "%-8s %8s %9s %7s %s\n" shape n seconds ratio status
for s in "${shapes[@]}"; do
    prev=""
    for n in "${sizes[@]}"; do
        python3 bench/compile_shapes.py "$s" "$n" > "$dir/q.logic"
        start=$(date +%s.%N)
        set +e
        timeout "${LIMIT:-60}" "$foxc" compile "$dir/q.logic" --emit kernels --color never > /dev/null 2> "$dir/err"
        rc=$?
        set -e
        end=$(date +%s.%N)
        t=$(echo "$end - $start" | bc -l)
        ratio=$( [ -n "$prev" ] && echo "scale=2; $t / $prev" | bc -l || echo "-")
        printf "%-8s %8d %9.3f %7s exit %d, %d lines on stderr\n" "$s" "$n" "$t" "$ratio" "$rc" "$(wc -l < "$dir/err")"
        prev=$t
        if [ "$rc" = 124 ]; then echo "$s: stopped after ${LIMIT:-60} s; larger sizes skipped"; break; fi
    done
done

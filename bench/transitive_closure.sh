#!/usr/bin/env bash
# Transitive closure of a random directed graph on the CPU backend.
#   bash bench/transitive_closure.sh [NODES] [EDGES] [SEED]
# Prints foxrun's --timing report and the size of the closure.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000}; m=${2:-50000}; seed=${3:-1}
dir=$(mktemp -d); out=$(mktemp -d); trap 'rm -rf "$dir" "$out"' EXIT
python3 bench/gnm.py "$n" "$m" "$seed" > "$dir/edge.csv"
cargo build -q --release -p fox-cli --bin foxrun
echo "G($n, $m) seed $seed: $(wc -l < "$dir/edge.csv") edges"
/usr/bin/time -f "wall %e s, max RSS %M KB" target/release/foxrun queries/transitive_closure.logic \
    --data "$dir" --out "$out" --backend cpu --timing
echo "closure: $(($(wc -l < "$out/path.csv") - 1)) pairs"

#!/usr/bin/env bash
# Transitive closure of a random directed graph G(n, m).
#   bash bench/transitive_closure.sh [NODES] [EDGES] [SEED] [BACKEND...]
# BACKEND defaults to cpu; several may be given (e.g. `gpu cpu`) to run both on the same
# data. FOXRUN names the foxrun binary (default: build target/release/foxrun with cargo).
# Prints foxrun's --timing report per backend and the size of the closure; on a terminal,
# foxrun also shows the iteration under way and its new rows.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000}; m=${2:-50000}; seed=${3:-1}; shift $(( $# < 3 ? $# : 3 ))
backends=("${@:-cpu}")
[ ${#backends[@]} -gt 0 ] || backends=(cpu)
dir=$(mktemp -d); out=$(mktemp -d); trap 'rm -rf "$dir" "$out"' EXIT
echo "generating G($n, $m) seed $seed" >&2
python3 bench/gnm.py "$n" "$m" "$seed" > "$dir/edge.csv"
foxrun=${FOXRUN:-}
if [ -z "$foxrun" ]; then
    echo "building foxrun (cargo build --release)" >&2
    cargo build --release -p fox-cli --bin foxrun
    foxrun=target/release/foxrun
fi
echo "G($n, $m) seed $seed: $(wc -l < "$dir/edge.csv") edges"
for b in "${backends[@]}"; do
    echo "== backend $b"
    run=("$foxrun" queries/transitive_closure.logic --data "$dir" --out "$out/$b" --backend "$b" --timing)
    if [ -x /usr/bin/time ]; then /usr/bin/time -f "wall %e s, max RSS %M KB" "${run[@]}"
    else TIMEFORMAT="wall %R s"; time "${run[@]}"; fi
    echo "closure: $(($(wc -l < "$out/$b/path.csv") - 1)) pairs"
done
if [ ${#backends[@]} -gt 1 ]; then
    cmp "$out/${backends[0]}/path.csv" "$out/${backends[1]}/path.csv" && echo "outputs identical"
fi

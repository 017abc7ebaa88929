#!/usr/bin/env bash
# Kernel benchmarks on the GPU machine, against CUB in the same run.
#
#   bash bench/kernels.sh [FOXBENCH]        (from the repository root)
#
# FOXBENCH is the foxbench binary (default target/release/foxbench; the bundle's is
# .gpu/bin/foxbench). Builds bench/cub_reference.cu with nvcc, runs it, then runs
# `foxbench kernels --backend gpu --cub <its results>`, which prints the table with
# Fox's speed as a percentage of CUB's per primitive. Results and logs go to
# $BENCH_OUT (default $OUT/bench when $OUT is set, else /tmp/fox-bench):
# cub.txt, foxbench.json, table.txt.
#
# Environment: LOG2N (28), JOIN_LOG2N (26), REPEAT (10), NVCC (/usr/local/cuda/bin/nvcc),
# ARCH (sm_90).
set -euo pipefail

FOXBENCH=${1:-target/release/foxbench}
LOG2N=${LOG2N:-28}
JOIN_LOG2N=${JOIN_LOG2N:-26}
REPEAT=${REPEAT:-10}
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
ARCH=${ARCH:-sm_90}
if [ -n "${OUT:-}" ]; then
    BENCH_OUT=${BENCH_OUT:-$OUT/bench}
else
    BENCH_OUT=${BENCH_OUT:-/tmp/fox-bench}
fi
mkdir -p "$BENCH_OUT"

if [ ! -x "$FOXBENCH" ]; then
    echo "kernels.sh: $FOXBENCH is not an executable (give the foxbench binary as the first argument)" >&2
    exit 2
fi
if [ ! -x "$NVCC" ]; then
    echo "kernels.sh: no nvcc at $NVCC (set NVCC)" >&2
    exit 2
fi
if [ ! -f bench/cub_reference.cu ]; then
    echo "kernels.sh: run from the repository root (bench/cub_reference.cu not found)" >&2
    exit 2
fi

nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv \
    >"$BENCH_OUT/nvidia-smi.txt" 2>&1 || true

echo "== building the CUB reference ($("$NVCC" --version | tail -1))"
"$NVCC" -O3 -arch="$ARCH" -o /tmp/cub_reference bench/cub_reference.cu

echo "== CUB reference, n = 2^$LOG2N, $REPEAT repeats"
/tmp/cub_reference --log2n "$LOG2N" --repeat "$REPEAT" --out "$BENCH_OUT/cub.txt"

echo "== foxbench kernels"
"$FOXBENCH" kernels --backend gpu --log2n "$LOG2N" --join-log2n "$JOIN_LOG2N" --repeat "$REPEAT" \
    --cub "$BENCH_OUT/cub.txt" --json "$BENCH_OUT/foxbench.json" | tee "$BENCH_OUT/table.txt"
echo "== results in $BENCH_OUT"

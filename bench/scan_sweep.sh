#!/usr/bin/env bash
# Tile-size sweep of the scan and compaction kernels on the GPU machine.
#
#   bash bench/scan_sweep.sh [VARIANT ...]        (from the repository root)
#
# A VARIANT is SCAN_THREADS:SCAN_ITEMS:CPT_THREADS:CPT_ITEMS (CPT_ITEMS a multiple of 16;
# the kernels' static shared memory, at most 48 KiB, allows scan tiles of up to about
# 5,000 u64 and compaction tiles of up to 4096 rows); the default list starts with the
# tile sizes kernels/scan.cu uses. Each variant of
# bench/scan_sweep.cu is built with nvcc (in parallel), run, and prints one line: the
# copy bandwidth, the scan and compaction times and their fraction of it.
# Environment: NVCC (/usr/local/cuda/bin/nvcc), ARCH (sm_90).
set -euo pipefail
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
ARCH=${ARCH:-sm_90}
if [ ! -f bench/scan_sweep.cu ]; then
    echo "scan_sweep.sh: run from the repository root" >&2
    exit 2
fi
variants=("$@")
if [ ${#variants[@]} -eq 0 ]; then
    variants=(128:20:128:16 128:24:256:16 128:16:128:16 128:32:128:32 256:16:256:16 256:12:128:32 128:40:64:32
        64:24:256:16)
fi
dir=$(mktemp -d)
echo "building ${#variants[@]} variants with $NVCC" >&2
for v in "${variants[@]}"; do
    IFS=: read -r st si ct ci <<<"$v"
    "$NVCC" -O3 -arch="$ARCH" -std=c++17 -I. -DSCAN_THREADS="$st" -DSCAN_ITEMS="$si" -DCPT_THREADS="$ct" \
        -DCPT_ITEMS="$ci" -o "$dir/v_$st.$si.$ct.$ci" bench/scan_sweep.cu &
done
wait
for v in "${variants[@]}"; do
    IFS=: read -r st si ct ci <<<"$v"
    "$dir/v_$st.$si.$ct.$ci"
done

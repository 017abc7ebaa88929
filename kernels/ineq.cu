// Inequality joins (crates/fox-cuda/src/k_ineq.rs): the merge-sort tree of the searched
// side's second column (IneqTree) and each probing row's ranges of it (IneqRanges).
#include "common.cuh"

// Value i of an i32 (wide = 0) or i64 (wide = 1) column, widened.
__device__ __forceinline__ i128 ineq_value(const void* p, int wide, u64 i) {
    return wide ? (i128)((const long long*)p)[i] : (i128)((const int*)p)[i];
}

// The entries of tree[start .. start + len] (ordered by the values d) whose value is
// below x, or not above x when with_equal.
__device__ __forceinline__ u64 ineq_before(const u32* tree, u64 start, u64 len, const void* d, int wide, i128 x,
                                           bool with_equal) {
    u64 a = 0, b = len;
    while (a < b) {
        u64 mid = a + (b - a) / 2;
        i128 v = ineq_value(d, wide, tree[start + mid]);
        if (v < x || (with_equal && v == x)) a = mid + 1;
        else b = mid;
    }
    return a;
}

// Level 0 of the tree: the identity.
extern "C" __global__ void ineq_identity(u64 n, u32* tree) {
    for (u64 p = (u64)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += (u64)gridDim.x * blockDim.x)
        tree[p] = (u32)p;
}

// Level l >= 1 from level l - 1 (prev): every entry of a block's left half goes to its
// rank in the half plus the entries of the right half with a smaller value; every entry
// of the right half to its rank plus the entries of the left half with a value not
// larger (the left half's positions are smaller, so the order by (value, position) is
// total and equals a stable merge).
extern "C" __global__ void ineq_merge_level(const void* d, int wide, u64 n, int l, const u32* prev, u32* cur) {
    u64 width = 1ull << l, half = width >> 1;
    for (u64 p = (u64)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += (u64)gridDim.x * blockDim.x) {
        u64 start = p & ~(width - 1);
        u64 mid = start + half < n ? start + half : n;
        u64 end = start + width < n ? start + width : n;
        u32 v = prev[p];
        i128 x = ineq_value(d, wide, v);
        u64 rank;
        if (p < mid) rank = (p - start) + ineq_before(prev, mid, end - mid, d, wide, x, false);
        else rank = (p - mid) + ineq_before(prev, start, mid - start, d, wide, x, true);
        cur[start + rank] = v;
    }
}

// IneqRanges: one thread per probing row i writes its 2 * levels slots (see the kernel's
// contract in fox-kernel). lower / upper: 0 no bound, 1 closed, 2 open; a bound is its
// column's value plus the offset, in i128. A range outside 0 .. n is clamped to it.
extern "C" __global__ void ineq_ranges(const void* d, int wide, u64 n, int levels, const u32* tree, const u32* plo,
                                       const u32* phi, const void* lo_b, int lower, long long lo_off,
                                       const void* hi_b, int upper, long long hi_off, u64 rows, u32* lo, u32* hi,
                                       u32* row) {
    u64 slots = 2 * (u64)levels;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < rows; i += (u64)gridDim.x * blockDim.x) {
        u64 base = i * slots;
        for (u64 s = 0; s < slots; s++) {
            lo[base + s] = 0;
            hi[base + s] = 0;
            row[base + s] = (u32)i;
        }
        i128 xl = lower != 0 ? ineq_value(lo_b, wide, i) + (i128)lo_off : 0;
        i128 xh = upper != 0 ? ineq_value(hi_b, wide, i) + (i128)hi_off : 0;
        u64 r = phi[i] < n ? phi[i] : n;
        u64 q = plo[i] < r ? plo[i] : r;
        for (int l = 0; q < r; l++) {
            for (int side = 0; side < 2; side++) {
                u64 j, slot;
                if (side == 0) {
                    if (!(q & 1)) continue;
                    j = q++;
                    slot = l;
                } else {
                    if (!(r & 1)) continue;
                    j = --r;
                    slot = slots - 1 - l;
                }
                u64 start = (u64)l * n + (j << l), len = 1ull << l;
                u64 a = lower != 0 ? ineq_before(tree, start, len, d, wide, xl, lower == 2) : 0;
                u64 b = upper != 0 ? ineq_before(tree, start, len, d, wide, xh, upper == 1) : len;
                if (b < a) b = a;
                lo[base + slot] = (u32)(start + a);
                hi[base + slot] = (u32)(start + b);
            }
            q >>= 1;
            r >>= 1;
        }
    }
}

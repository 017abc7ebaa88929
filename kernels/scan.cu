// Exclusive scan of u64 counts (single pass, decoupled look-back) and stream compaction
// (per-tile counts, a scan of the counts, an order-preserving scatter per column).
//
// Errors go to the error word of common.cuh (`report_err`); ERR_OVERFLOW and the tile
// sizes the host uses too come with the prelude (k_scan.rs).

#include <cub/block/block_load.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/block/block_store.cuh>

#include "common.cuh"

// ---- exclusive scan ----------------------------------------------------------------------
//
// A plain u64 scan; overflow is found afterwards, element by element: the running sum
// wraps past 2^64 exactly at the elements where exclusive + count wraps (every count is
// below 2^64, so each step crosses at most one multiple of 2^64), which every thread
// checks for its own elements.

struct U64Add {
    __device__ __forceinline__ u64 operator()(const u64& a, const u64& b) const { return a + b; }
};

// SCAN_THREADS and SCAN_ITEMS come with the prelude (k_scan.rs).
#define SCAN_TILE (SCAN_THREADS * SCAN_ITEMS)

// Tile status: one 16-byte word per tile, {flag, value}, written and read with a single
// 16-byte access, so a reader sees a flag together with its value and no fence is needed
// between them (aligned 16-byte accesses of one instruction are not torn on the GPU; CUB's
// single-pass scan makes the same assumption). Flag 0 = nothing yet, ST_AGG = the value is
// the tile's own sum, ST_PREFIX = the value is the inclusive prefix up to and including
// the tile.
#define ST_AGG 1ULL
#define ST_PREFIX 2ULL

__device__ __forceinline__ void st_status(ulonglong2* p, u64 flag, u64 v) {
    asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(flag), "l"(v) : "memory");
}
__device__ __forceinline__ void ld_status(const ulonglong2* p, u64& flag, u64& v) {
    asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(flag), "=l"(v) : "l"(p) : "memory");
}

// The block-prefix callback of BlockScan: called by the 32 lanes of warp 0 with the tile's
// aggregate; returns (in lane 0) the sum of all earlier tiles. Each lane waits for one
// earlier tile, 32 tiles per step, backing off with a short sleep while a tile has
// published nothing.
struct LookBack {
    ulonglong2* status;
    u32 tile;
    u32 ntiles;
    u64* total;

    __device__ __forceinline__ void publish_prefix(u64 p) {
        st_status(&status[tile], ST_PREFIX, p);
        if (tile == ntiles - 1) total[0] = p;
    }

    __device__ u64 operator()(u64 block_agg) {
        const u32 lane = threadIdx.x & 31;
        u64 excl = 0;
        if (tile == 0) {
            if (lane == 0) publish_prefix(block_agg);
            return excl;
        }
        if (lane == 0) st_status(&status[tile], ST_AGG, block_agg);
        long long end = (long long)tile - 1;
        while (true) {
            const long long p = end - (long long)lane;
            u64 f = ST_PREFIX;
            u64 val = 0;
            if (p >= 0) {
                u32 delay = 0;
                while (true) {
                    ld_status(&status[p], f, val);
                    if (f != 0) break;
                    __nanosleep(delay);
                    delay = delay ? min(2 * delay, 256u) : 16u;
                }
            }
            const u32 ballot = __ballot_sync(0xffffffffu, f == ST_PREFIX);
            // Lanes up to and including the nearest tile with a prefix contribute.
            const u32 first = ballot ? (u32)(__ffs(ballot) - 1) : 32u;
            if (lane > first) val = 0;
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) val += __shfl_xor_sync(0xffffffffu, val, off);
            excl += val;
            if (ballot) break;
            end -= 32;
        }
        if (lane == 0) publish_prefix(excl + block_agg);
        return excl;
    }
};

// offsets[i] = counts[0] + ... + counts[i-1], total[0] = the sum of all counts (n > 0).
// `counter` is one zeroed word handing out tile indices in launch order (so every tile a
// tile waits for has started); `status` holds ntiles zeroed 16-byte words (16-byte
// aligned). An overflowing sum sets ERR_OVERFLOW.
extern "C" __global__ void __launch_bounds__(SCAN_THREADS)
    exclusive_scan_u64(const u64* __restrict__ counts, u64* __restrict__ offsets, u64* __restrict__ total, u64 n,
                       u32* counter, ulonglong2* status, u32 ntiles, u64* err) {
    typedef cub::BlockLoad<u64, SCAN_THREADS, SCAN_ITEMS, cub::BLOCK_LOAD_WARP_TRANSPOSE> Load;
    typedef cub::BlockStore<u64, SCAN_THREADS, SCAN_ITEMS, cub::BLOCK_STORE_WARP_TRANSPOSE> Store;
    typedef cub::BlockScan<u64, SCAN_THREADS, cub::BLOCK_SCAN_WARP_SCANS> Scan;
    __shared__ union {
        typename Load::TempStorage load;
        typename Store::TempStorage store;
        typename Scan::TempStorage scan;
    } smem;
    __shared__ u32 s_tile;

    if (threadIdx.x == 0) s_tile = atomicAdd(counter, 1u);
    __syncthreads();
    const u32 tile = s_tile;
    const u64 base = (u64)tile * SCAN_TILE;
    const int valid = (int)min((u64)SCAN_TILE, n - base);

    u64 items[SCAN_ITEMS];
    if (valid == SCAN_TILE) {
        Load(smem.load).Load(counts + base, items);
    } else {
        Load(smem.load).Load(counts + base, items, valid, 0ULL);
    }
    __syncthreads();

    const u64 last = items[SCAN_ITEMS - 1];
    LookBack lb;
    lb.status = status;
    lb.tile = tile;
    lb.ntiles = ntiles;
    lb.total = total;
    Scan(smem.scan).ExclusiveScan(items, items, U64Add(), lb);
    __syncthreads();

    // Element j wraps exactly when its inclusive sum, the next exclusive one, is below its
    // exclusive one; the last element's inclusive sum is items[last] + its count. Padding
    // counts are 0 and never wrap.
    bool wrapped = items[SCAN_ITEMS - 1] + last < items[SCAN_ITEMS - 1];
#pragma unroll
    for (int j = 0; j + 1 < SCAN_ITEMS; j++) wrapped |= items[j + 1] < items[j];
    if (wrapped) report_err(err, ERR_OVERFLOW, 0);
    if (valid == SCAN_TILE) {
        Store(smem.store).Store(offsets + base, items);
    } else {
        Store(smem.store).Store(offsets + base, items, valid);
    }
}

// ---- compaction --------------------------------------------------------------------------

// CPT_THREADS and CPT_ITEMS come with the prelude (k_scan.rs).
#define CPT_TILE (CPT_THREADS * CPT_ITEMS)

// The CPT_ITEMS flags of this thread (blocked: flags base + tid * CPT_ITEMS ..), 0 past
// `valid`. CPT_ITEMS is a multiple of 16.
__device__ __forceinline__ void load_flags16(const u8* __restrict__ flags, u64 base, int valid, u8 (&f)[CPT_ITEMS]) {
    const int first = threadIdx.x * CPT_ITEMS;
    if (valid == CPT_TILE) {
        // The tile starts at a multiple of CPT_TILE bytes of a 16-byte aligned buffer.
#pragma unroll
        for (int k = 0; k < CPT_ITEMS / 16; k++) {
            const uint4 w = reinterpret_cast<const uint4*>(flags + base + first)[k];
            const u32 words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
            for (int q = 0; q < 4; q++) {
#pragma unroll
                for (int b = 0; b < 4; b++) f[k * 16 + q * 4 + b] = (u8)(words[q] >> (8 * b));
            }
        }
    } else {
#pragma unroll
        for (int j = 0; j < CPT_ITEMS; j++) f[j] = (first + j < valid) ? flags[base + first + j] : (u8)0;
    }
}

// counts[tile] = the number of non-zero flags in tile `tile` (one block per tile).
extern "C" __global__ void __launch_bounds__(CPT_THREADS)
    compact_count(const u8* __restrict__ flags, u64 n, u64* __restrict__ counts) {
    typedef cub::BlockReduce<u32, CPT_THREADS> Reduce;
    __shared__ typename Reduce::TempStorage smem;
    const u64 base = (u64)blockIdx.x * CPT_TILE;
    const int valid = (int)min((u64)CPT_TILE, n - base);
    u8 f[CPT_ITEMS];
    load_flags16(flags, base, valid, f);
    u32 c = 0;
#pragma unroll
    for (int j = 0; j < CPT_ITEMS; j++) c += f[j] != 0;
    const u32 sum = Reduce(smem).Sum(c);
    if (threadIdx.x == 0) counts[blockIdx.x] = sum;
}

// out[offsets[tile] + k] = the k-th flagged value of tile `tile`, in order (one block per
// tile). The flagged values are packed in shared memory, then written out contiguously.
template <typename T>
__device__ __forceinline__ void compact_scatter_impl(const u8* __restrict__ flags, const T* __restrict__ col, u64 n,
                                                     const u64* __restrict__ offsets, T* __restrict__ out) {
    typedef cub::BlockScan<u32, CPT_THREADS> Scan;
    typedef cub::BlockLoad<T, CPT_THREADS, CPT_ITEMS, cub::BLOCK_LOAD_WARP_TRANSPOSE> Load;
    __shared__ typename Scan::TempStorage scan_storage;
    __shared__ union {
        typename Load::TempStorage load;
        T stage[CPT_TILE];
    } smem;

    const u64 base = (u64)blockIdx.x * CPT_TILE;
    const int valid = (int)min((u64)CPT_TILE, n - base);
    u8 f[CPT_ITEMS];
    load_flags16(flags, base, valid, f);
    u32 c = 0;
#pragma unroll
    for (int j = 0; j < CPT_ITEMS; j++) c += f[j] != 0;
    u32 pos, tile_total;
    Scan(scan_storage).ExclusiveSum(c, pos, tile_total);
    if (tile_total == 0) return;  // uniform across the block

    T v[CPT_ITEMS];
    if (valid == CPT_TILE) {
        Load(smem.load).Load(col + base, v);
    } else {
        Load(smem.load).Load(col + base, v, valid, T());
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < CPT_ITEMS; j++) {
        if (f[j]) smem.stage[pos++] = v[j];
    }
    __syncthreads();
    const u64 dst = offsets[blockIdx.x];
    for (u32 i = threadIdx.x; i < tile_total; i += CPT_THREADS) out[dst + i] = smem.stage[i];
}

extern "C" __global__ void __launch_bounds__(CPT_THREADS)
    compact_scatter_u8(const u8* flags, const u8* col, u64 n, const u64* offsets, u8* out) {
    compact_scatter_impl<u8>(flags, col, n, offsets, out);
}

extern "C" __global__ void __launch_bounds__(CPT_THREADS)
    compact_scatter_u32(const u8* flags, const u32* col, u64 n, const u64* offsets, u32* out) {
    compact_scatter_impl<u32>(flags, col, n, offsets, out);
}

extern "C" __global__ void __launch_bounds__(CPT_THREADS)
    compact_scatter_u64(const u8* flags, const u64* col, u64 n, const u64* offsets, u64* out) {
    compact_scatter_impl<u64>(flags, col, n, offsets, out);
}

// out[offsets[tile] + k] = the row number of the k-th flagged row of tile `tile`, in
// order (one block per tile; row numbers below 2^32).
extern "C" __global__ void __launch_bounds__(CPT_THREADS)
    compact_rows_u32(const u8* __restrict__ flags, u64 n, const u64* __restrict__ offsets, u32* __restrict__ out) {
    typedef cub::BlockScan<u32, CPT_THREADS> Scan;
    __shared__ typename Scan::TempStorage scan_storage;
    __shared__ u32 stage[CPT_TILE];
    const u64 base = (u64)blockIdx.x * CPT_TILE;
    const int valid = (int)min((u64)CPT_TILE, n - base);
    u8 f[CPT_ITEMS];
    load_flags16(flags, base, valid, f);
    u32 c = 0;
#pragma unroll
    for (int j = 0; j < CPT_ITEMS; j++) c += f[j] != 0;
    u32 pos, tile_total;
    Scan(scan_storage).ExclusiveSum(c, pos, tile_total);
    if (tile_total == 0) return;  // uniform across the block
    const u32 first = (u32)base + threadIdx.x * CPT_ITEMS;
#pragma unroll
    for (int j = 0; j < CPT_ITEMS; j++) {
        if (f[j]) stage[pos++] = first + j;
    }
    __syncthreads();
    const u64 dst = offsets[blockIdx.x];
    for (u32 i = threadIdx.x; i < tile_total; i += CPT_THREADS) out[dst + i] = stage[i];
}

// 16-byte elements (i128): the staged tile takes CPT_TILE * 16 bytes of shared memory
// (32 KiB at 2048 rows).
extern "C" __global__ void __launch_bounds__(CPT_THREADS)
    compact_scatter_u128(const u8* flags, const uint4* col, u64 n, const u64* offsets, uint4* out) {
    compact_scatter_impl<uint4>(flags, col, n, offsets, out);
}

// Leapfrog-triejoin levels: trie construction, load-balanced expansion (also the write
// pass of sort-merge joins), and search in sorted trie levels.
//
// Values are compared through their order-preserving u64 image (`okey` of common.cuh,
// by type code; floats by total order with NaN last), as fox-cpu does; i128 values
// (T_I128) through an order-preserving u128 image.

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "common.cuh"

// EXPAND_ITEMS, IC_MAX_WAYS, ICH_ITEMS, IC2_ITEMS and the table sizes ICH_CAP_32,
// ICH_CAP_64, IC2_SLOTS_32 and IC2_SLOTS_64, which the host uses too, come with the
// prelude (k_join.rs, k_trie.rs).
#define EXPAND_TILE (BLOCK * EXPAND_ITEMS)

// The order-preserving image of i128 value i (sign bit flipped).
__device__ __forceinline__ u128 okey128(const void* p, u64 i) {
    const u64* w = (const u64*)p;
    return ((u128)(w[2 * i + 1] ^ 0x8000000000000000ull) << 64) | (u128)w[2 * i];
}

// The comparison key of value i of type code T: u128 for i128 (T_I128), else u64.
template <int T>
__device__ __forceinline__ auto tkey(const void* p, u64 i) {
    if constexpr (T == T_I128) {
        return okey128(p, i);
    } else {
        return okey(p, T, i);
    }
}

// out[i] = i.
extern "C" __global__ void iota_u32(unsigned* out, u64 n) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
        out[i] = (unsigned)i;
}

// new[i] = prev[i] (when prev is given) || i == 0 || col[i] != col[i-1].
extern "C" __global__ void trie_flags(const unsigned char* prev, const void* col, int t, u64 n, unsigned char* out) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        bool f = i == 0 || (prev != 0 && prev[i] != 0) || okey(col, t, i) != okey(col, t, i - 1) ||
                 (t == T_I128 && ((const u64*)col)[2 * i] != ((const u64*)col)[2 * i - 2]);
        out[i] = (unsigned char)f;
    }
}

// start[j] = the number of level-d node rows before parent j's row (a binary search in
// the sorted node rows of level d: every parent row is also a level-d node row);
// start[np] = nd.
extern "C" __global__ void trie_start(const unsigned* parents, u64 np, const unsigned* nodes, u64 nd,
                                      unsigned* start) {
    for (u64 j = (u64)blockIdx.x * blockDim.x + threadIdx.x; j <= np; j += (u64)gridDim.x * blockDim.x) {
        if (j == np) {
            start[j] = (unsigned)nd;
            continue;
        }
        unsigned p = parents[j];
        u64 lo = 0, hi = nd;
        while (lo < hi) {
            u64 mid = lo + (hi - lo) / 2;
            if (nodes[mid] < p) lo = mid + 1;
            else hi = mid;
        }
        start[j] = (unsigned)lo;
    }
}

// The starts of the parents of a last level whose every row is a node: a parent's first
// child is the node of its own row. start[j] = parents[j]; start[np] = nd.
extern "C" __global__ void trie_start_rows(const unsigned* parents, u64 np, u64 nd, unsigned* start) {
    for (u64 j = (u64)blockIdx.x * blockDim.x + threadIdx.x; j <= np; j += (u64)gridDim.x * blockDim.x)
        start[j] = j == np ? (unsigned)nd : parents[j];
}

// Checks the arguments of Expand: offsets[0] == 0, offsets non-decreasing up to total
// (code 1), and lo[i] + count_i <= 2^32 (code 2).
extern "C" __global__ void expand_check(const unsigned* lo, const u64* offsets, u64 n, u64 total, u64* err) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        u64 s = offsets[i];
        u64 e = i + 1 < n ? offsets[i + 1] : total;
        if ((i == 0 && s != 0) || e < s) {
            set_err(err, 1, i, s);
        } else if ((u64)lo[i] + (e - s) > 0x100000000ull) {
            set_err(err, 2, i, lo[i]);
        }
    }
}

// tstart[k] = the row whose range [offsets[r], offsets[r+1]) (the last ending at total)
// holds output start + k * tile, for the tiles of [start, end): the first row of each
// block of a load-balanced kernel, found by scattering from the rows instead of a search
// per block.
extern "C" __global__ void tile_owners(const u64* offsets, u64 n, u64 total, u64 start, u64 end, u64 tile,
                                       unsigned* tstart) {
    for (u64 r = (u64)blockIdx.x * blockDim.x + threadIdx.x; r < n; r += (u64)gridDim.x * blockDim.x) {
        const u64 s = max(offsets[r], start);
        const u64 e = min(r + 1 < n ? offsets[r + 1] : total, end);
        if (s >= e) continue;
        const u64 k1 = (e - start + tile - 1) / tile;
        for (u64 k = (s - start + tile - 1) / tile; k < k1; ++k) tstart[k] = (unsigned)r;
    }
}

// Thread 0 of block b reads the rows [*r0, *r1) that hold the outputs of its tile: from its
// first output's row to the next tile's first row (the caller synchronises before reading).
// Both are clamped to the n rows: offsets that are not an exclusive scan ending at the total
// (which the launcher's check reports, perhaps only at its next wait) leave tiles without an
// owner, and their rows are then whatever tstart held, so every read stays within the rows.
__device__ __forceinline__ void tile_rows(const unsigned* tstart, u64 ntiles, u64 n, u64* r0, u64* r1) {
    if (threadIdx.x == 0) {
        const u64 b = blockIdx.x;
        *r0 = min((u64)tstart[b], n);
        *r1 = b + 1 < ntiles ? min((u64)tstart[b + 1] + 1, n) : n;
    }
}

// Load-balanced expansion of the outputs o in [start, end) (a window of the whole
// expansion): parent[o - start] = the row r whose range [offsets[r], offsets[r+1]) holds o,
// and pos[o - start] = lo[r] + (o - offsets[r]). A block handles a tile of EXPAND_TILE
// outputs (tile_owners gives its first row), and each output searches only between the
// tile's rows.
extern "C" __global__ void __launch_bounds__(BLOCK)
    expand_write(const unsigned* lo, const u64* offsets, u64 n, u64 start, u64 end, const unsigned* tstart,
                 u64 ntiles, unsigned* parent, unsigned* pos) {
    __shared__ u64 s_r0, s_r1;
    u64 t0 = start + (u64)blockIdx.x * EXPAND_TILE;
    if (t0 >= end) return;
    u64 t1 = min(t0 + EXPAND_TILE, end);
    tile_rows(tstart, ntiles, n, &s_r0, &s_r1);
    __syncthreads();
    u64 r0 = s_r0, r1 = s_r1;
#pragma unroll
    for (int it = 0; it < EXPAND_ITEMS; ++it) {
        u64 o = t0 + (u64)it * BLOCK + threadIdx.x;
        if (o < t1) {
            u64 r = owner(offsets, r0, r1, o);
            // Only offsets that fail the launcher's check leave an output without a row.
            if (r >= n) continue;
            parent[o - start] = (unsigned)r;
            pos[o - start] = lo[r] + (unsigned)(o - offsets[r]);
        }
    }
}

// SortedSearch: found[i] = needle[i] occurs in values[lo[i]..hi[i]], pos[i] = the first
// index of that slice whose value is not below the needle (hi[i] if none). A range outside
// the values is error code 1 (detail: lo, row: i).
// The comparison key of value i of type code t: u64 (any code but 6) or u128 (i128).
__device__ __forceinline__ void rkey(const void* p, int t, u64 i, u64* k) { *k = okey(p, t, i); }
__device__ __forceinline__ void rkey(const void* p, int t, u64 i, u128* k) { *k = okey128(p, i); }

template <typename K>
__device__ __forceinline__ void sorted_search_impl(const void* values, u64 nv, int t, const unsigned* lo,
                                                   const unsigned* hi, const void* needle, u64 n, unsigned char* found,
                                                   unsigned* pos, u64* err) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        u64 a = lo[i], b = hi[i];
        if (a > b || b > nv) {
            set_err(err, 1, i, a);
            found[i] = 0;
            pos[i] = (unsigned)a;
            continue;
        }
        K key, v;
        rkey(needle, t, i, &key);
        u64 end = b;
        while (a < b) {
            u64 mid = a + (b - a) / 2;
            rkey(values, t, mid, &v);
            if (v < key) a = mid + 1;
            else b = mid;
        }
        bool hit = false;
        if (a < end) {
            rkey(values, t, a, &v);
            hit = v == key;
        }
        found[i] = (unsigned char)hit;
        pos[i] = (unsigned)a;
    }
}

extern "C" __global__ void sorted_search(const void* values, u64 nv, int t, const unsigned* lo, const unsigned* hi,
                                         const void* needle, u64 n, unsigned char* found, unsigned* pos, u64* err) {
    if (t == T_I128) {
        sorted_search_impl<u128>(values, nv, t, lo, hi, needle, n, found, pos, err);
    } else {
        sorted_search_impl<u64>(values, nv, t, lo, hi, needle, n, found, pos, err);
    }
}

// IntersectCount. desc holds, for `ways` ways, the pointers of their values, lo and hi
// columns and the lengths of their values: desc[w], desc[ways + w], desc[2 ways + w],
// desc[3 ways + w]. At most IC_MAX_WAYS ways.

// Per row: work = the size of the smallest range, lead = its way. A range outside its
// values is error code 1 (detail: lo, row: the row).
extern "C" __global__ void ic_work(const u64* desc, int ways, u64 n, u64* work, unsigned char* lead, u64* err) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        u64 best = ~0ull;
        int bw = 0;
        for (int w = 0; w < ways; ++w) {
            unsigned a = ((const unsigned*)desc[ways + w])[i];
            unsigned b = ((const unsigned*)desc[2 * ways + w])[i];
            if (a > b || (u64)b > desc[3 * ways + w]) {
                set_err(err, 1, i, a);
                best = 0;
                bw = w;
                break;
            }
            if ((u64)(b - a) < best) {
                best = b - a;
                bw = w;
            }
        }
        work[i] = best;
        lead[i] = (unsigned char)bw;
    }
}

// The block-wide sum of the threads' counts (exact in 64 bits).
typedef cub::BlockReduce<u64, BLOCK> CountReduce;

// Adds the block's counts (one per thread) to *out; every thread of the block calls it.
__device__ __forceinline__ void block_count_add(unsigned cnt, CountReduce::TempStorage& tmp, u64* out) {
    const u64 sum = CountReduce(tmp).Sum((u64)cnt);
    if (threadIdx.x == 0 && sum) atomicAdd((unsigned long long*)out, (unsigned long long)sum);
}

// Whether `key` is among the values of way w's range of row r (binary search); desc as
// for IntersectCount, T the values' type code.
template <int T, typename K>
__device__ __forceinline__ bool way_has(const u64* desc, int ways, int w, u64 r, K key) {
    const void* vals = (const void*)desc[w];
    u64 a = ((const unsigned*)desc[ways + w])[r];
    const u64 end = ((const unsigned*)desc[2 * ways + w])[r];
    u64 b = end;
    while (a < b) {
        const u64 mid = a + (b - a) / 2;
        if (tkey<T>(vals, mid) < key) a = mid + 1;
        else b = mid;
    }
    return a < end && tkey<T>(vals, a) == key;
}

// Counts the candidates (row r, k-th value of its lead's range) whose value lies in the
// range of every other way of row r (binary search). Candidates are load-balanced as in
// expand_write: a block takes a tile of EXPAND_TILE of them, whatever rows they belong
// to; the offsets of the tile's rows are staged in shared memory for the owner searches
// when there are at most ICC_ROWS of them. The block's count is added to *out. T is the
// values' type code.
#define ICC_ROWS 1024
template <int T>
__device__ __forceinline__ void ic_count_impl(const u64* desc, int ways, const u64* offsets, const unsigned char* lead,
                                              u64 n, u64 total, const unsigned* tstart, u64 ntiles, u64* out) {
    __shared__ u64 s_r0, s_r1;
    __shared__ u64 s_desc[3 * IC_MAX_WAYS];
    __shared__ CountReduce::TempStorage s_reduce;
    __shared__ u64 s_off[ICC_ROWS];
    const u64 t0 = (u64)blockIdx.x * EXPAND_TILE;
    if (t0 >= total) return;
    const u64 t1 = min(t0 + EXPAND_TILE, total);
    tile_rows(tstart, ntiles, n, &s_r0, &s_r1);
    if (threadIdx.x < 3 * ways) s_desc[threadIdx.x] = desc[threadIdx.x];
    __syncthreads();
    const u64 r0 = s_r0, r1 = s_r1;
    const bool staged = r1 - r0 <= ICC_ROWS;
    if (staged)
        for (u64 i = threadIdx.x; i < r1 - r0; i += BLOCK) s_off[i] = offsets[r0 + i];
    __syncthreads();
    unsigned cnt = 0;
#pragma unroll
    for (int it = 0; it < EXPAND_ITEMS; ++it) {
        const u64 o = t0 + (u64)it * BLOCK + threadIdx.x;
        if (o < t1) {
            u64 r, off;
            if (staged) {
                u64 lo = 0, hi = r1 - r0;
                while (lo < hi) {
                    const u64 mid = lo + (hi - lo) / 2;
                    if (s_off[mid] <= o) lo = mid + 1;
                    else hi = mid;
                }
                r = r0 + lo - 1;
                off = s_off[lo - 1];
            } else {
                r = owner(offsets, r0, r1, o);
                off = offsets[r];
            }
            const int l = lead[r];
            const unsigned pos = ((const unsigned*)s_desc[ways + l])[r] + (unsigned)(o - off);
            const auto key = tkey<T>((const void*)s_desc[l], pos);
            bool all = true;
            for (int w = 0; w < ways && all; ++w)
                if (w != l) all = way_has<T>(s_desc, ways, w, r, key);
            cnt += all ? 1u : 0u;
        }
    }
    block_count_add(cnt, s_reduce, out);
}

#define IC_COUNT_KERNEL(NAME, T)                                                                          \
    extern "C" __global__ void __launch_bounds__(BLOCK)                                                  \
        NAME(const u64* desc, int ways, const u64* offsets, const unsigned char* lead, u64 n, u64 total, \
             const unsigned* tstart, u64 ntiles, u64* out) {                                             \
        ic_count_impl<T>(desc, ways, offsets, lead, n, total, tstart, ntiles, out);                      \
    }
IC_COUNT_KERNEL(ic_count_u8, T_U8)
IC_COUNT_KERNEL(ic_count_i32, T_I32)
IC_COUNT_KERNEL(ic_count_u32, T_U32)
IC_COUNT_KERNEL(ic_count_i64, T_I64)
IC_COUNT_KERNEL(ic_count_u64, T_U64)
IC_COUNT_KERNEL(ic_count_f64, T_F64)
IC_COUNT_KERNEL(ic_count_i128, T_I128)

// ---- IntersectCount with a shared way ---------------------------------------------------
//
// When one way's range (way s) is the same over runs of consecutive rows (the rows of a
// level expanded from the same parent), its values are put in a hash table in shared memory
// once per run and tile, and the candidates of those rows (the values of the smallest other
// way) are looked up there instead of being searched for.

// Per way w: the number of rows whose (lo, hi) differs from the previous row's (the first
// row counts), added to runs[w].
extern "C" __global__ void ic_runs(const u64* desc, int ways, u64 n, u64* runs) {
    for (int w = 0; w < ways; ++w) {
        const unsigned* lo = (const unsigned*)desc[ways + w];
        const unsigned* hi = (const unsigned*)desc[2 * ways + w];
        unsigned c = 0;
        for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
            c += (i == 0 || lo[i] != lo[i - 1] || hi[i] != hi[i - 1]) ? 1u : 0u;
        for (int d = 16; d > 0; d >>= 1) c += __shfl_down_sync(0xffffffffu, c, d);
        if ((threadIdx.x & 31) == 0 && c) atomicAdd((unsigned long long*)&runs[w], (unsigned long long)c);
    }
}

// Per row, which way a row's candidates come from, and how it finds them in the others:
// hashed (work_h = the size of the smallest way other than s, lead_h = that way) when way
// s's range fits a table (at most `cap` values) and the candidates are at most `factor`
// times as many as its values, otherwise searched as in ic_work (work_b, lead_b). A range outside its values is error
// code 1 (detail: lo, row: the row).
extern "C" __global__ void ic_split(const u64* desc, int ways, int s, u64 n, unsigned cap, unsigned factor, u64* work_h,
                                   unsigned char* lead_h, u64* work_b, unsigned char* lead_b, u64* err) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        u64 best = ~0ull, other = ~0ull;
        int bw = 0, ow = s == 0 ? 1 : 0;
        bool bad = false;
        for (int w = 0; w < ways; ++w) {
            unsigned a = ((const unsigned*)desc[ways + w])[i];
            unsigned b = ((const unsigned*)desc[2 * ways + w])[i];
            if (a > b || (u64)b > desc[3 * ways + w]) {
                set_err(err, 1, i, a);
                bad = true;
                break;
            }
            u64 len = b - a;
            if (len < best) {
                best = len;
                bw = w;
            }
            if (w != s && len < other) {
                other = len;
                ow = w;
            }
        }
        u64 shared = (u64)(((const unsigned*)desc[2 * ways + s])[i] - ((const unsigned*)desc[ways + s])[i]);
        bool hashed = !bad && best > 0 && shared <= cap && other <= (u64)factor * shared;
        work_h[i] = hashed ? other : 0;
        lead_h[i] = (unsigned char)ow;
        work_b[i] = (hashed || bad) ? 0 : best;
        lead_b[i] = (unsigned char)bw;
    }
}

#define ICH_TILE (BLOCK * ICH_ITEMS)
#define ICH_PIECE 256
#define ICH_UNROLL 4

// The block-wide exclusive prefix sum of the threads' values.
typedef cub::BlockScan<unsigned, BLOCK, cub::BLOCK_SCAN_WARP_SCANS> CountScan;

// The exclusive prefix sum of v over the block's threads, written to out[threadIdx.x];
// returns the block's total (every thread). Every thread of the block calls it; `tmp`
// may be used again once it returns.
__device__ __forceinline__ unsigned block_exclusive_sum(unsigned v, unsigned* out, CountScan::TempStorage& tmp) {
    unsigned x, total;
    CountScan(tmp).ExclusiveSum(v, x, total);
    out[threadIdx.x] = x;
    __syncthreads();
    return total;
}

// The first row in (row, r1) whose range (lo, hi) differs from row's, or r1: the end of
// the run of rows that share row's range. Every thread of the block calls it and gets the
// same row; `s_next` is shared scratch.
__device__ __forceinline__ u64 run_end(const unsigned* lo, const unsigned* hi, u64 row, u64 r1, u64* s_next) {
    const unsigned klo = lo[row], khi = hi[row];
    if (threadIdx.x == 0) *s_next = r1;
    __syncthreads();
    for (u64 b = row + 1; b < r1; b += BLOCK) {
        const u64 r = b + threadIdx.x;
        const bool diff = r < r1 && (lo[r] != klo || hi[r] != khi);
        if (diff) atomicMin((unsigned long long*)s_next, (unsigned long long)r);
        if (__syncthreads_or(diff)) break;
    }
    return *s_next;
}

// log2 of the slots of a table for m keys: at least 2m slots, at least 32.
__device__ __forceinline__ int table_bits(unsigned m) {
    int bits = 5;
    while ((1u << bits) < 2 * m) ++bits;
    return bits;
}

template <typename K>
__device__ __forceinline__ unsigned ich_hash(K key, int bits) {
    if (sizeof(K) == 4) return ((unsigned)key * 2654435769u) >> (32 - bits);
    return (unsigned)(((u64)key * 0x9E3779B97F4A7C15ull) >> (64 - bits));
}

// Counts the hashed candidates of a tile of ICH_TILE of them. The tile's rows are cut into
// segments of equal way-s ranges; per segment the block fills the table with way s's values,
// then looks the candidates up (and searches the ways other than s and the lead). Keys
// equal to the empty marker are remembered apart. The rows of a segment are taken BLOCK
// at a time: each thread reads one row's lead and position into shared memory and cuts
// its candidates in the tile into pieces of ICH_PIECE, numbered by a block scan; warps take
// pieces in turn, their lanes consecutive candidates (coalesced loads, several in flight).
// T is the values' type code.
template <typename K, int CAP, int T>
__device__ __forceinline__ void ic_hash_impl(const u64* desc, int ways, int s, const u64* offsets,
                                             const unsigned char* lead, u64 n, u64 total, const unsigned* tstart,
                                             u64 ntiles, u64* out) {
    __shared__ K table[2 * CAP];
    __shared__ u64 s_desc[3 * IC_MAX_WAYS];
    __shared__ u64 s_r0, s_r1, s_next;
    __shared__ int s_marked;
    __shared__ CountReduce::TempStorage s_reduce;
    __shared__ unsigned s_pstart[BLOCK];
    __shared__ CountScan::TempStorage s_scan;
    __shared__ u64 s_os[BLOCK], s_oe[BLOCK], s_base[BLOCK];
    __shared__ unsigned char s_lead[BLOCK];
    const K EMPTY = (K)~(K)0;
    const u64 t0 = (u64)blockIdx.x * ICH_TILE;
    if (t0 >= total) return;
    const u64 t1 = min(t0 + ICH_TILE, total);
    tile_rows(tstart, ntiles, n, &s_r0, &s_r1);
    if (threadIdx.x < 3 * ways) s_desc[threadIdx.x] = desc[threadIdx.x];
    __syncthreads();
    const u64 r1 = s_r1;
    const unsigned* lo_s = (const unsigned*)s_desc[ways + s];
    const unsigned* hi_s = (const unsigned*)s_desc[2 * ways + s];
    const void* vals_s = (const void*)s_desc[s];
    const unsigned lane = threadIdx.x & 31;
    unsigned cnt = 0;
    u64 row = s_r0;
    while (true) {
        // Rows without candidates (hashed elsewhere, or searched) are skipped: the next
        // row with one is the last whose offset is not above this row's.
        row = owner(offsets, row, r1, offsets[row]);
        const unsigned klo = lo_s[row], khi = hi_s[row];
        // The segment ends at the first row after `row` with another range (or the tile's end).
        const u64 next = run_end(lo_s, hi_s, row, r1, &s_next);
        const u64 cs = max(t0, offsets[row]);
        const u64 ce = next < r1 ? min(offsets[next], t1) : t1;
        if (cs < ce) {
            const unsigned m = khi - klo;
            const int bits = table_bits(m);
            const unsigned mask = (1u << bits) - 1;
            for (unsigned i = threadIdx.x; i <= mask; i += BLOCK) table[i] = EMPTY;
            if (threadIdx.x == 0) s_marked = 0;
            __syncthreads();
            for (unsigned i = threadIdx.x; i < m; i += BLOCK) {
                const K key = (K)okey(vals_s, T, (u64)klo + i);
                if (key == EMPTY) {
                    s_marked = 1;
                    continue;
                }
                unsigned h = ich_hash<K>(key, bits);
                while (atomicCAS(&table[h], EMPTY, key) != EMPTY) h = (h + 1) & mask;
            }
            __syncthreads();
            const bool marked = s_marked != 0;
            for (u64 rb = row; rb < next; rb += BLOCK) {
                const u64 r = rb + threadIdx.x;
                u64 os = 0, oe = 0;
                if (r < next) {
                    os = max(offsets[r], cs);
                    oe = min(r + 1 < n ? offsets[r + 1] : total, ce);
                    if (oe < os) oe = os;
                    if (oe > os) {
                        const int l = lead[r];
                        s_lead[threadIdx.x] = (unsigned char)l;
                        s_base[threadIdx.x] = (u64)((const unsigned*)s_desc[ways + l])[r] - offsets[r];
                    }
                }
                const unsigned np = (unsigned)((oe - os + ICH_PIECE - 1) / ICH_PIECE);
                const unsigned pieces = block_exclusive_sum(np, s_pstart, s_scan);
                s_os[threadIdx.x] = os;
                s_oe[threadIdx.x] = oe;
                __syncthreads();
                for (unsigned q = threadIdx.x >> 5; q < pieces; q += BLOCK / 32) {
                    // The row slot j holding piece q: the last with s_pstart[j] <= q.
                    unsigned lo = 0, hi = BLOCK;
                    while (hi - lo > 1) {
                        const unsigned mid = (lo + hi) >> 1;
                        if (s_pstart[mid] <= q) lo = mid;
                        else hi = mid;
                    }
                    const unsigned j = lo;
                    const u64 rr = rb + j;
                    const u64 o0 = s_os[j] + (u64)(q - s_pstart[j]) * ICH_PIECE;
                    const u64 o1 = min(o0 + ICH_PIECE, s_oe[j]);
                    const int l = s_lead[j];
                    const void* vals_l = (const void*)s_desc[l];
                    const u64 base = s_base[j];
                    for (u64 o = o0 + lane; o < o1; o += 32 * ICH_UNROLL) {
                        u64 keys[ICH_UNROLL];
#pragma unroll
                        for (int u = 0; u < ICH_UNROLL; ++u) {
                            const u64 oo = o + 32 * u;
                            keys[u] = oo < o1 ? okey(vals_l, T, base + oo) : 0;
                        }
#pragma unroll
                        for (int u = 0; u < ICH_UNROLL; ++u) {
                            if (o + 32 * u >= o1) continue;
                            const u64 key = keys[u];
                            bool hit;
                            if ((K)key == EMPTY) {
                                hit = marked;
                            } else {
                                unsigned h = ich_hash<K>((K)key, bits);
                                while (true) {
                                    const K v = table[h];
                                    if (v == (K)key) {
                                        hit = true;
                                        break;
                                    }
                                    if (v == EMPTY) {
                                        hit = false;
                                        break;
                                    }
                                    h = (h + 1) & mask;
                                }
                            }
                            for (int w = 0; w < ways && hit; ++w)
                                if (w != s && w != l) hit = way_has<T>(s_desc, ways, w, rr, key);
                            cnt += hit ? 1u : 0u;
                        }
                    }
                }
                __syncthreads();
            }
        }
        __syncthreads();
        if (next >= r1) break;
        row = next;
    }
    block_count_add(cnt, s_reduce, out);
}

// One kernel per element type but i128 (T_U8 … T_F64): values of at most 32 bits get
// tables of u32 keys for ranges of way s of at most ICH_CAP_32 values, 64-bit values
// tables of u64 keys for at most ICH_CAP_64. i128 values are not hashed (their rows are
// searched: ic_count_i128).
#define IC_HASH_KERNEL(NAME, K, CAP, T)                                                                     \
    extern "C" __global__ void __launch_bounds__(BLOCK)                                                    \
        NAME(const u64* desc, int ways, int s, const u64* offsets, const unsigned char* lead, u64 n, u64 total, \
             const unsigned* tstart, u64 ntiles, u64* out) {                                                \
        ic_hash_impl<K, CAP, T>(desc, ways, s, offsets, lead, n, total, tstart, ntiles, out);              \
    }
IC_HASH_KERNEL(ic_hash_u8, unsigned, ICH_CAP_32, T_U8)
IC_HASH_KERNEL(ic_hash_i32, unsigned, ICH_CAP_32, T_I32)
IC_HASH_KERNEL(ic_hash_u32, unsigned, ICH_CAP_32, T_U32)
IC_HASH_KERNEL(ic_hash_i64, u64, ICH_CAP_64, T_I64)
IC_HASH_KERNEL(ic_hash_u64, u64, ICH_CAP_64, T_U64)
IC_HASH_KERNEL(ic_hash_f64, u64, ICH_CAP_64, T_F64)

// ---- IntersectCount of two ways: each row's smaller range looked up in the larger -------
//
// With two ways, a row's candidates are the values of its smaller range, looked up in a
// cuckoo table of its larger range (the table way). Rows that share the table way's range
// in consecutive runs build the table once per run and tile. The rows whose larger range
// is way s (the way shared in runs) are counted where they are; the others are gathered
// and sorted by their larger range first (k_trie.rs), and rows whose larger range does
// not fit a table are searched (ic_count_*).

// Per row (two ways, s the way shared in runs, u the other): flag_a = 1 when |u| <= |s|
// and s fits a table (at most `cap` values); flag_b = 1 when |s| < |u| and u fits a
// table; otherwise, or when neither range has more than `small` values (a table would
// serve few lookups), work_c = the smaller length and lead_c its way (searched). A row with
// an empty range has no work; pack = (lo_u, hi_u, lo_s, hi_s), the row as a flag_b row is
// counted (table range first). A range outside its values is error code 1 (detail: lo,
// row: the row).
extern "C" __global__ void ic_split2(const u64* desc, int s, u64 n, unsigned small, unsigned cap, unsigned char* flag_a, unsigned char* flag_b,
                                     u64* work_c, unsigned char* lead_c, uint4* pack, u64* err) {
    const int u = 1 - s;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        unsigned len[2];
        bool bad = false;
        for (int w = 0; w < 2 && !bad; ++w) {
            const unsigned a = ((const unsigned*)desc[2 + w])[i];
            const unsigned b = ((const unsigned*)desc[4 + w])[i];
            if (a > b || (u64)b > desc[6 + w]) {
                set_err(err, 1, i, a);
                bad = true;
            }
            len[w] = b - a;
        }
        u64 wc = 0;
        unsigned char fa = 0, fb = 0, lc = (unsigned char)u;
        if (!bad && len[s] > 0 && len[u] > 0) {
            if (max(len[s], len[u]) <= small) {
                wc = min(len[s], len[u]);
                lc = (unsigned char)(len[s] < len[u] ? s : u);
            } else if (len[u] <= len[s]) {
                if (len[s] <= cap) fa = 1;
                else wc = len[u];
            } else if (len[u] <= cap) {
                fb = 1;
            } else {
                wc = len[s];
                lc = (unsigned char)s;
            }
        }
        flag_a[i] = fa;
        flag_b[i] = fb;
        work_c[i] = wc;
        lead_c[i] = lc;
        pack[i] = make_uint4(((const unsigned*)desc[2 + u])[i], ((const unsigned*)desc[4 + u])[i],
                             ((const unsigned*)desc[2 + s])[i], ((const unsigned*)desc[4 + s])[i]);
    }
}

// Rows in a new order: row i takes the words of pack[perm[i]] as (lo_t, hi_t, lo_c, hi_c).
// One random 16-byte read per row, where four gathers of 4-byte columns would make four.
extern "C" __global__ void unpack_gather4(const uint4* pack, const unsigned* perm, u64 m, unsigned* lo_t,
                                          unsigned* hi_t, unsigned* lo_c, unsigned* hi_c) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += (u64)gridDim.x * blockDim.x) {
        const uint4 w = pack[perm[i]];
        lo_t[i] = w.x;
        hi_t[i] = w.y;
        lo_c[i] = w.z;
        hi_c[i] = w.w;
    }
}

#define IC2_TILE (BLOCK * IC2_ITEMS)
// 16-byte words of candidates in flight per thread.
#define IC2_UNROLL 2

// The two hash functions of the cuckoo tables (multiplicative, the top `bits` bits).
template <typename K>
__device__ __forceinline__ unsigned ck_hash(K key, int which, int bits) {
    if (sizeof(K) == 4) return ((unsigned)key * (which ? 0x85EBCA77u : 0x9E3779B1u)) >> (32 - bits);
    return (unsigned)(((u64)key * (which ? 0xC2B2AE3D27D4EB4Full : 0x9E3779B97F4A7C15ull)) >> (64 - bits));
}

__device__ __forceinline__ unsigned ck_exch(unsigned* p, unsigned v) { return atomicExch(p, v); }
__device__ __forceinline__ u64 ck_exch(u64* p, u64 v) {
    return atomicExch((unsigned long long*)p, (unsigned long long)v);
}

// Whether `key` is among vals[lo, hi) (sorted; binary search).
template <int T, typename K>
__device__ __forceinline__ bool range_has(const void* vals, unsigned lo, unsigned hi, K key) {
    const unsigned end = hi;
    while (lo < hi) {
        const unsigned mid = lo + (hi - lo) / 2;
        if ((K)okey(vals, T, mid) < key) lo = mid + 1;
        else hi = mid;
    }
    return lo < end && (K)okey(vals, T, lo) == key;
}

// Per type code (T_U8 … T_F64): E, a value as stored; K, a cuckoo table key.
template <int T> struct HashElem;
template <> struct HashElem<T_U8> { typedef unsigned char E; typedef unsigned K; };
template <> struct HashElem<T_I32> { typedef unsigned E; typedef unsigned K; };
template <> struct HashElem<T_U32> { typedef unsigned E; typedef unsigned K; };
template <> struct HashElem<T_I64> { typedef u64 E; typedef u64 K; };
template <> struct HashElem<T_U64> { typedef u64 E; typedef u64 K; };
template <> struct HashElem<T_F64> { typedef u64 E; typedef u64 K; };

// The table key of a stored value: equal keys exactly when okey is equal. Integers are
// their own bits (okey is a bijection of them); a double is its okey (every NaN the same).
template <int T>
__device__ __forceinline__ typename HashElem<T>::K hash_key(typename HashElem<T>::E raw) {
    if constexpr (T == T_F64) {
        const double x = __longlong_as_double((long long)raw);
        if (x != x) return ~0ull;
        return (raw >> 63) ? ~raw : (raw | 0x8000000000000000ull);
    } else {
        return (typename HashElem<T>::K)raw;
    }
}

// Counts the candidates of a tile of IC2_TILE of them: row r's candidates are the values
// vals_c[clo[r] + k] for k below its count (offsets, the exclusive scan of the counts,
// numbers them over the rows), each counted when it lies in vals_t[tlo[r], thi[r]). The
// tile's rows are cut into segments of equal (tlo, thi); per segment the block puts that
// range in a cuckoo table (two tables of 2^bits >= 2m slots: a lookup reads one slot of
// each, without a loop), then takes the segment's rows BLOCK at a time: each row's
// candidates are cut into chunks, the aligned 16-byte words of vals_c they touch (vals_c
// is 16-byte aligned and padded to 16 bytes, so such a word stays within it), the chunks
// are numbered over the rows by a block scan, and thread t looks up the candidates of
// chunks t, t + BLOCK, … (its row found by a binary search of the rows' first chunks),
// so that short rows do not leave lanes idle. A table whose range holds the empty
// marker, or an insertion that evicts more than `max_kicks` keys, makes the block search
// the segment's range instead (binary search, the same counts).
template <int T>
__device__ __forceinline__ void ic_hash2_impl(const void* vals_t, const unsigned* tlo, const unsigned* thi,
                                              const void* vals_c, const unsigned* clo, const u64* offsets, u64 n,
                                              u64 total, const unsigned* tstart, u64 ntiles, unsigned max_kicks,
                                              u64* out) {
    typedef typename HashElem<T>::E E;
    typedef typename HashElem<T>::K K;
    // Two tables of SLOTS keys (32 KiB of keys either way).
    constexpr unsigned SLOTS = sizeof(K) == 4 ? IC2_SLOTS_32 : IC2_SLOTS_64;
    // Values per 16-byte load.
    constexpr unsigned V = 16 / sizeof(E);
    __shared__ K tab[2 * SLOTS];
    __shared__ u64 s_r0, s_r1, s_next;
    __shared__ int s_fail;
    __shared__ CountReduce::TempStorage s_reduce;
    __shared__ unsigned s_cstart[BLOCK];
    __shared__ CountScan::TempStorage s_scan;
    __shared__ unsigned s_first[BLOCK], s_pos[BLOCK], s_len[BLOCK];
    const K EMPTY = (K)~(K)0;
    const E* ct = (const E*)vals_t;
    const E* cv = (const E*)vals_c;
    const u64 t0 = (u64)blockIdx.x * IC2_TILE;
    if (t0 >= total) return;
    const u64 t1 = min(t0 + IC2_TILE, total);
    tile_rows(tstart, ntiles, n, &s_r0, &s_r1);
    __syncthreads();
    const u64 r1 = s_r1;
    unsigned cnt = 0;
    u64 row = s_r0;
    while (true) {
        const unsigned klo = tlo[row], khi = thi[row];
        // The segment ends at the first row after `row` with another range (or the tile's end).
        const u64 next = run_end(tlo, thi, row, r1, &s_next);
        const u64 cs = max(t0, offsets[row]);
        const u64 ce = next < r1 ? min(offsets[next], t1) : t1;
        if (cs < ce) {
            const unsigned m = khi - klo;
            const int bits = table_bits(m);
            const unsigned size = 1u << bits;
            for (unsigned i = threadIdx.x; i < 2 * size; i += BLOCK) tab[i] = EMPTY;
            if (threadIdx.x == 0) s_fail = 0;
            __syncthreads();
            for (unsigned i = threadIdx.x; i < m; i += BLOCK) {
                K key = hash_key<T>(ct[(u64)klo + i]);
                if (key == EMPTY) {
                    s_fail = 1;
                    continue;
                }
                int which = 0;
                for (unsigned kick = 0;; ++kick) {
                    const unsigned h = ck_hash<K>(key, which, bits) + (which ? size : 0u);
                    const K old = ck_exch(&tab[h], key);
                    if (old == EMPTY) break;
                    if (kick >= max_kicks) {
                        s_fail = 1;
                        break;
                    }
                    key = old;
                    which ^= 1;
                }
            }
            __syncthreads();
            const bool fail = s_fail != 0;
            const K* tab1 = tab + size;
            for (u64 rb = row; rb < next; rb += BLOCK) {
                const u64 r = rb + threadIdx.x;
                unsigned len = 0, pos = 0;
                if (r < next) {
                    const u64 os = max(offsets[r], cs);
                    u64 oe = min(r + 1 < n ? offsets[r + 1] : total, ce);
                    if (oe > os) {
                        len = (unsigned)(oe - os);
                        pos = clo[r] + (unsigned)(os - offsets[r]);
                    }
                }
                // The row's chunks: the aligned runs of V positions its candidates touch.
                const unsigned nc = len == 0 ? 0u : (unsigned)(((u64)pos + len + (V - 1)) / V - pos / V);
                const unsigned chunks = block_exclusive_sum(nc, s_cstart, s_scan);
                s_first[threadIdx.x] = pos / V;
                s_pos[threadIdx.x] = pos;
                s_len[threadIdx.x] = len;
                __syncthreads();
                // Thread t takes chunks t, t + BLOCK, …: consecutive threads read consecutive
                // 16-byte words, whatever the rows' lengths. A chunk's row: the last slot
                // whose first chunk is at most it (slots without candidates start where
                // the next one does, and are passed over).
                auto chunk_row = [&](unsigned c) {
                    unsigned j = 0;
#pragma unroll
                    for (unsigned step = BLOCK / 2; step > 0; step >>= 1)
                        if (s_cstart[j + step] <= c) j += step;
                    return j;
                };
                if (fail) {
                    for (unsigned c = threadIdx.x; c < chunks; c += BLOCK) {
                        const unsigned j = chunk_row(c);
                        const unsigned at = (s_first[j] + (c - s_cstart[j])) * V;
                        for (unsigned v = 0; v < V; ++v) {
                            if (at + v - s_pos[j] >= s_len[j]) continue;
                            const K key = (K)okey(vals_c, T, (u64)(at + v));
                            cnt += range_has<T, K>(vals_t, klo, khi, key) ? 1u : 0u;
                        }
                    }
                } else {
                    for (unsigned base = 0; base < chunks; base += BLOCK * IC2_UNROLL) {
                        uint4 w[IC2_UNROLL];
                        unsigned rel[IC2_UNROLL], lim[IC2_UNROLL];
#pragma unroll
                        for (int u = 0; u < IC2_UNROLL; ++u) {
                            const unsigned c = base + u * BLOCK + threadIdx.x;
                            w[u] = make_uint4(0u, 0u, 0u, 0u);
                            rel[u] = 0;
                            lim[u] = 0;
                            if (c < chunks) {
                                const unsigned j = chunk_row(c);
                                const unsigned at = (s_first[j] + (c - s_cstart[j])) * V;
                                // Value v of the word is a candidate when rel + v < lim.
                                rel[u] = at - s_pos[j];
                                lim[u] = s_len[j];
                                w[u] = __ldg(reinterpret_cast<const uint4*>(cv + at));
                            }
                        }
#pragma unroll
                        for (int u = 0; u < IC2_UNROLL; ++u) {
                            const E* e = reinterpret_cast<const E*>(&w[u]);
#pragma unroll
                            for (unsigned v = 0; v < V; ++v) {
                                const K key = hash_key<T>(e[v]);
                                const bool in =
                                    (tab[ck_hash<K>(key, 0, bits)] == key) | (tab1[ck_hash<K>(key, 1, bits)] == key);
                                cnt += (in && key != EMPTY && rel[u] + v < lim[u]) ? 1u : 0u;
                            }
                        }
                    }
                }
                __syncthreads();
            }
        }
        __syncthreads();
        if (next >= r1) break;
        row = next;
    }
    block_count_add(cnt, s_reduce, out);
}

// One kernel per element type but i128 (T_U8 … T_F64): values of at most 32 bits get
// tables of u32 keys for ranges of at most IC2_SLOTS_32 / 2 values, 64-bit values tables
// of u64 keys for at most IC2_SLOTS_64 / 2 (32 KiB of shared memory either way). i128
// values are not hashed.
#define IC_HASH2_KERNEL(NAME, T)                                                                                  \
    extern "C" __global__ void __launch_bounds__(BLOCK)                                                         \
        NAME(const void* vals_t, const unsigned* tlo, const unsigned* thi, const void* vals_c, const unsigned* clo, \
             const u64* offsets, u64 n, u64 total, const unsigned* tstart, u64 ntiles, unsigned max_kicks,       \
             u64* out) {                                                                                         \
        ic_hash2_impl<T>(vals_t, tlo, thi, vals_c, clo, offsets, n, total, tstart, ntiles, max_kicks, out);      \
    }
IC_HASH2_KERNEL(ic_hash2_u8, T_U8)
IC_HASH2_KERNEL(ic_hash2_i32, T_I32)
IC_HASH2_KERNEL(ic_hash2_u32, T_U32)
IC_HASH2_KERNEL(ic_hash2_i64, T_I64)
IC_HASH2_KERNEL(ic_hash2_u64, T_U64)
IC_HASH2_KERNEL(ic_hash2_f64, T_F64)

// MinRange: per row, the (lo, hi) pair of the `ways` in desc (the lo columns, then the hi
// columns) with the fewest values, the first of equals; hi below lo is error code 1.
extern "C" __global__ void min_range(const u64* desc, int ways, u64 n, unsigned* lo_out, unsigned* hi_out, u64* err) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        unsigned best_lo = 0, best_hi = 0;
        u64 best = ~0ull;
        for (int w = 0; w < ways; ++w) {
            unsigned a = ((const unsigned*)desc[w])[i];
            unsigned b = ((const unsigned*)desc[ways + w])[i];
            if (b < a) {
                set_err(err, 1, i, a);
                break;
            }
            if ((u64)(b - a) < best) {
                best = b - a;
                best_lo = a;
                best_hi = b;
            }
        }
        lo_out[i] = best_lo;
        hi_out[i] = best_hi;
    }
}

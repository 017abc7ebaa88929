// Sorting: the stable permutation of SortPerm by LSB radix sort (8-bit digits, onesweep:
// one upfront histogram of every digit place, then per digit place one kernel that ranks
// a tile and finds its output offsets with a decoupled look-back across tiles), and the
// flags of AdjacentDistinct.
//
// A key column is first turned into order-preserving unsigned integers (32 bits for u8,
// i32, u32 and string ranks, 64 bits for i64, u64 and f64), inverted for a descending key.
// An i128 column is two 64-bit keys: its high word (sign bit flipped), then its low word.
// Keys are sorted from the least significant to the most significant one; each radix pass
// is stable, so the result orders rows lexicographically and keeps equal rows in input
// order.
//
// Errors go to the error word of common.cuh (`report_err`); ERR_INDEX and the tile sizes
// the host uses too come with the prelude (k_sort.rs).

#include <cub/block/block_load.cuh>
#include <cub/block/block_radix_rank.cuh>
#include <cub/block/block_scan.cuh>

#include "common.cuh"

// ---- key transformation ------------------------------------------------------------------

__device__ __forceinline__ u32 ukey(u8 x) { return x; }
__device__ __forceinline__ u32 ukey(u32 x) { return x; }
__device__ __forceinline__ u32 ukey(int x) { return (u32)x ^ 0x80000000u; }
__device__ __forceinline__ u64 ukey(u64 x) { return x; }
__device__ __forceinline__ u64 ukey(long long x) { return (u64)x ^ 0x8000000000000000ULL; }
// Total order with -0.0 < 0.0 and every NaN mapped to the largest key (NaN last).
__device__ __forceinline__ u64 ukey(double x) {
    const u64 b = (u64)__double_as_longlong(x);
    if ((b & 0x7fffffffffffffffULL) > 0x7ff0000000000000ULL) return ~0ULL;
    return (b >> 63) ? ~b : (b | 0x8000000000000000ULL);
}

// key_out[i] = ukey(col[src]) (inverted when desc), src = perm[i] when `perm` is given,
// else i; without `perm`, perm_out[i] = i starts the permutation.
template <typename T, typename K>
__device__ __forceinline__ void prep_impl(const T* __restrict__ col, const u32* __restrict__ perm,
                                          u32* __restrict__ perm_out, K* __restrict__ key_out, u64 n, u32 desc) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        u64 src = i;
        if (perm) {
            src = perm[i];
        } else {
            perm_out[i] = (u32)i;
        }
        K k = ukey(col[src]);
        key_out[i] = desc ? (K)~k : k;
    }
}

#define PREP(NAME, T, K)                                                                                 \
    extern "C" __global__ void NAME(const T* col, const u32* perm, u32* perm_out, K* key_out, u64 n,   \
                                    u32 desc) {                                                          \
        prep_impl<T, K>(col, perm, perm_out, key_out, n, desc);                                          \
    }

PREP(sort_prep_u8, u8, u32)
PREP(sort_prep_i32, int, u32)
PREP(sort_prep_u32, u32, u32)
PREP(sort_prep_i64, long long, u64)
PREP(sort_prep_u64, u64, u64)
PREP(sort_prep_f64, double, u64)

// As prep_impl for one 64-bit word of an i128 column (stored low word first): the high
// word (HI = 1) with its sign bit flipped, or the low word (HI = 0) as it is.
template <int HI>
__device__ __forceinline__ void prep_i128_impl(const u64* __restrict__ col, const u32* __restrict__ perm,
                                               u32* __restrict__ perm_out, u64* __restrict__ key_out, u64 n,
                                               u32 desc) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        u64 src = i;
        if (perm) {
            src = perm[i];
        } else {
            perm_out[i] = (u32)i;
        }
        const u64 w = col[2 * src + HI];
        const u64 k = HI ? w ^ 0x8000000000000000ULL : w;
        key_out[i] = desc ? ~k : k;
    }
}

extern "C" __global__ void sort_prep_i128_hi(const u64* col, const u32* perm, u32* perm_out, u64* key_out, u64 n,
                                             u32 desc) {
    prep_i128_impl<1>(col, perm, perm_out, key_out, n, desc);
}

extern "C" __global__ void sort_prep_i128_lo(const u64* col, const u32* perm, u32* perm_out, u64* key_out, u64 n,
                                             u32 desc) {
    prep_i128_impl<0>(col, perm, perm_out, key_out, n, desc);
}

// As prep_impl for a string key ordered by rank: key = rank[code]. A code outside the
// table records its (original) row in the error word and gives key 0.
extern "C" __global__ void sort_prep_rank(const u32* __restrict__ col, const u32* __restrict__ perm,
                                          u32* __restrict__ perm_out, u32* __restrict__ key_out, u64 n, u32 desc,
                                          const u32* __restrict__ rank, u64 rank_len, u64* err) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        u64 src = i;
        if (perm) {
            src = perm[i];
        } else {
            perm_out[i] = (u32)i;
        }
        const u32 code = col[src];
        u32 k = 0;
        if (code < rank_len) {
            k = rank[code];
        } else {
            report_err(err, ERR_INDEX, src);
        }
        key_out[i] = desc ? ~k : k;
    }
}

// ---- upfront histogram ---------------------------------------------------------------------

#define HIST_THREADS 256

// hist[p * 256 + d] += the number of keys whose digit p (bits 8p .. 8p+7) of key ^ xor_mask
// is d, for every digit place p < PLACES. `hist` is zeroed by the host. Grid-stride, with
// 16-byte loads (two in flight per thread) when `keys` is 16-byte aligned.
template <typename K, int PLACES>
__device__ __forceinline__ void hist_add(u32 (*s_hist)[256], K k) {
#pragma unroll
    for (int p = 0; p < PLACES; p++) atomicAdd(&s_hist[p][(u32)(k >> (8 * p)) & 255u], 1u);
}

template <typename K, int PLACES>
__device__ __forceinline__ void hist_impl(const K* __restrict__ keys, u64 n, u32* __restrict__ hist, K xor_mask) {
    __shared__ u32 s_hist[PLACES][256];
    for (int i = threadIdx.x; i < PLACES * 256; i += HIST_THREADS) (&s_hist[0][0])[i] = 0;
    __syncthreads();
    constexpr int PER_VEC = 16 / sizeof(K);
    const u64 gtid = (u64)blockIdx.x * HIST_THREADS + threadIdx.x;
    const u64 stride = (u64)gridDim.x * HIST_THREADS;
    u64 done = 0;
    if ((reinterpret_cast<size_t>(keys) & 15) == 0) {
        const uint4* v = reinterpret_cast<const uint4*>(keys);
        const u64 nvec = n / PER_VEC;
        u64 i = gtid;
        for (; i + stride < nvec; i += 2 * stride) {
            const uint4 a = v[i];
            const uint4 b = v[i + stride];
            const K* ka = reinterpret_cast<const K*>(&a);
            const K* kb = reinterpret_cast<const K*>(&b);
#pragma unroll
            for (int j = 0; j < PER_VEC; j++) hist_add<K, PLACES>(s_hist, (K)(ka[j] ^ xor_mask));
#pragma unroll
            for (int j = 0; j < PER_VEC; j++) hist_add<K, PLACES>(s_hist, (K)(kb[j] ^ xor_mask));
        }
        if (i < nvec) {
            const uint4 a = v[i];
            const K* ka = reinterpret_cast<const K*>(&a);
#pragma unroll
            for (int j = 0; j < PER_VEC; j++) hist_add<K, PLACES>(s_hist, (K)(ka[j] ^ xor_mask));
        }
        done = nvec * PER_VEC;
    }
    for (u64 i = done + gtid; i < n; i += stride) hist_add<K, PLACES>(s_hist, (K)(keys[i] ^ xor_mask));
    __syncthreads();
    for (int i = threadIdx.x; i < PLACES * 256; i += HIST_THREADS) {
        const u32 c = (&s_hist[0][0])[i];
        if (c) atomicAdd(&hist[i], c);
    }
}

extern "C" __global__ void __launch_bounds__(HIST_THREADS)
    radix_hist_u32(const u32* keys, u64 n, u32* hist, u32 xor_mask) {
    hist_impl<u32, 4>(keys, n, hist, xor_mask);
}

extern "C" __global__ void __launch_bounds__(HIST_THREADS)
    radix_hist_u64(const u64* keys, u64 n, u32* hist, u64 xor_mask) {
    hist_impl<u64, 8>(keys, n, hist, xor_mask);
}

// One block of 256 threads: offsets[p * 256 + d] = the number of keys whose digit p is
// below d (exclusive scan of each place's histogram), and bit p of mask[0] set when every
// key has the same digit p (the pass can be skipped).
extern "C" __global__ void __launch_bounds__(256)
    radix_digit_offsets(const u32* __restrict__ hist, u32* __restrict__ offsets, u32 places, u64 n, u64* mask) {
    typedef cub::BlockScan<u32, 256> Scan;
    __shared__ typename Scan::TempStorage smem;
    __shared__ u32 s_mask;
    if (threadIdx.x == 0) s_mask = 0;
    __syncthreads();
    for (u32 p = 0; p < places; p++) {
        const u32 c = hist[p * 256 + threadIdx.x];
        if ((u64)c == n) atomicOr(&s_mask, 1u << p);
        u32 excl;
        Scan(smem).ExclusiveSum(c, excl);
        offsets[p * 256 + threadIdx.x] = excl;
        __syncthreads();
    }
    if (threadIdx.x == 0) mask[0] = s_mask;
}

// ---- onesweep pass ---------------------------------------------------------------------------

// SWEEP_THREADS, SWEEP_ITEMS_32 and SWEEP_ITEMS_64 come with the prelude (k_sort.rs).
#define SWEEP_WARPS (SWEEP_THREADS / 32)
#define RADIX_BITS 8
#define RADIX_DIGITS 256
// Status words read at once by a thread walking back over earlier tiles.
#define LOOKBACK_WINDOW 4

// Per (tile, digit) status word: the top two bits say what the low 56 hold, bits 56..61
// the pass (its epoch) that wrote it, so that one zeroed status array serves 64 passes: a
// word of an earlier pass reads as "nothing yet".
#define ST_AGG (1ULL << 62)     // the count of the digit in this tile
#define ST_PREFIX (2ULL << 62)  // the count of the digit in this tile and all earlier ones
#define ST_VALUE ((1ULL << 56) - 1)
#define ST_EPOCH_SHIFT 56

__device__ __forceinline__ bool st_ready(u64 s, u64 epoch) {
    return (s >> 62) != 0 && ((s >> ST_EPOCH_SHIFT) & 63) == epoch;
}

struct DigitOf {
    u32 shift;
    __device__ __forceinline__ u32 Digit(u32 k) const { return (k >> shift) & 255u; }
    __device__ __forceinline__ u32 Digit(u64 k) const { return (u32)(k >> shift) & 255u; }
};

// Called by every thread once the tile's digit counts are known (before the ranks are):
// thread t < 256 publishes the count of digit t as its tile's aggregate (the prefix for
// tile 0), so that later tiles can look back past this one early.
struct PublishCounts {
    u64* status;
    u64 tile;
    u64 epoch;
    int pad;  // out-of-range slots, all counted under digit 255
    u32* cnt;
    __device__ __forceinline__ void operator()(int (&bins)[1]) {
        const u32 t = threadIdx.x;
        if (t < RADIX_DIGITS) {
            u32 c = (u32)bins[0];
            if (t == RADIX_DIGITS - 1) c -= (u32)pad;
            *cnt = c;
            *(volatile u64*)(status + tile * RADIX_DIGITS + t) =
                (tile == 0 ? ST_PREFIX : ST_AGG) | (epoch << ST_EPOCH_SHIFT) | (u64)c;
        }
    }
};

// One digit place of the LSB sort: moves (key, value) pairs from *_in to *_out, stably by
// digit `shift / 8`. `digit_start[d]` is the number of keys whose digit is below d (from
// radix_digit_offsets); `status` holds ntiles * 256 words, none of which holds a word of
// epoch `epoch` (0..63); `counter` is a zeroed word handing out tile indices in launch
// order (so a tile only waits for tiles that have started). Without `keys_out` (the last
// pass of a sort that only needs the permutation) the keys are not written. Keys are loaded warp-striped, the arrangement BlockRadixRankMatchEarlyCounts
// ranks stably, and xor-ed with `xor_mask`; without `vals_in` the value of row i is i (the
// identity permutation). The ranked tile is exchanged through shared memory and written out
// digit run by digit run, first the keys, then the values (loaded only then).
template <typename K, int ITEMS>
__device__ __forceinline__ void onesweep_impl(const K* __restrict__ keys_in, const u32* __restrict__ vals_in,
                                              K* __restrict__ keys_out, u32* __restrict__ vals_out, u64 n, u32 shift,
                                              const u32* __restrict__ digit_start, u64* status, u64* counter,
                                              u32 epoch, K xor_mask) {
    constexpr int TILE = SWEEP_THREADS * ITEMS;
    typedef cub::BlockRadixRankMatchEarlyCounts<SWEEP_THREADS, RADIX_BITS, false, cub::BLOCK_SCAN_RAKING_MEMOIZE,
                                                cub::WARP_MATCH_ANY, 1>
        Rank;
    __shared__ union {
        typename Rank::TempStorage rank;
        K keys[TILE];
        u32 vals[TILE];
    } smem;
    __shared__ u32 s_base[RADIX_DIGITS];
    __shared__ u32 s_tile;

    const u32 t = threadIdx.x;
    if (t == 0) s_tile = (u32)atomicAdd(counter, 1ULL);
    __syncthreads();
    const u64 tile = s_tile;
    const u64 base = tile * TILE;
    const int valid = (int)min((u64)TILE, n - base);
    // Warp-striped: item j of this thread is row base + wbase + j * 32.
    const int wbase = (int)(t / 32) * (ITEMS * 32) + (int)(t % 32);

    K keys[ITEMS];
    if (valid == TILE) {
        cub::LoadDirectWarpStriped(t, keys_in + base, keys);
#pragma unroll
        for (int j = 0; j < ITEMS; j++) keys[j] ^= xor_mask;
    } else {
        cub::LoadDirectWarpStriped(t, keys_in + base, keys, valid, (K)0);
        // Out-of-range slots get the largest key: digit 255, ranked after every valid key.
#pragma unroll
        for (int j = 0; j < ITEMS; j++) keys[j] = (wbase + j * 32 < valid) ? (K)(keys[j] ^ xor_mask) : (K)~(K)0;
    }

    int ranks[ITEMS];
    int excl_in_tile[1];
    u32 cnt = 0;
    DigitOf digit;
    digit.shift = shift;
    PublishCounts cb;
    cb.status = status;
    cb.tile = tile;
    cb.epoch = epoch;
    cb.pad = TILE - valid;
    cb.cnt = &cnt;
    Rank(smem.rank).RankKeys(keys, ranks, digit, excl_in_tile, cb);

    // Thread t < 256 owns digit t: its start before this tile, from a look-back over the
    // status words of the earlier tiles, LOOKBACK_WINDOW at a time. Tile 0 holds a prefix,
    // so the walk ends at tile 0 at the latest.
    if (t < RADIX_DIGITS) {
        u64 before = 0;
        if (tile > 0) {
            long long p = (long long)tile - 1;
            bool done = false;
            while (!done) {
                u64 s[LOOKBACK_WINDOW];
#pragma unroll
                for (int w = 0; w < LOOKBACK_WINDOW; w++) {
                    s[w] = (p - w >= 0) ? *(volatile u64*)(status + (u64)(p - w) * RADIX_DIGITS + t)
                                        : ST_PREFIX | ((u64)epoch << ST_EPOCH_SHIFT);
                }
#pragma unroll
                for (int w = 0; w < LOOKBACK_WINDOW; w++) {
                    if (!done) {
                        while (!st_ready(s[w], epoch))
                            s[w] = *(volatile u64*)(status + (u64)(p - w) * RADIX_DIGITS + t);
                        before += s[w] & ST_VALUE;
                        if (s[w] & ST_PREFIX) done = true;
                    }
                }
                p -= LOOKBACK_WINDOW;
            }
            *(volatile u64*)(status + tile * RADIX_DIGITS + t) =
                ST_PREFIX | ((u64)epoch << ST_EPOCH_SHIFT) | (before + (u64)cnt);
        }
        // Key of rank r in this tile with digit d goes to digit_start[d] + before[d] + r - excl[d].
        s_base[t] = digit_start[t] + (u32)before - (u32)excl_in_tile[0];
    }
    __syncthreads();  // the rank storage is reused below

#pragma unroll
    for (int j = 0; j < ITEMS; j++) smem.keys[ranks[j]] = keys[j];
    __syncthreads();
    u32 dst[ITEMS];
#pragma unroll
    for (int j = 0; j < ITEMS; j++) {
        const int r = (int)t + j * SWEEP_THREADS;
        const K k = smem.keys[r];
        dst[j] = s_base[digit.Digit(k)] + (u32)r;
        if (keys_out && r < valid) keys_out[dst[j]] = k;
    }

    u32 vals[ITEMS];
    if (vals_in) {
        if (valid == TILE) {
            cub::LoadDirectWarpStriped(t, vals_in + base, vals);
        } else {
            cub::LoadDirectWarpStriped(t, vals_in + base, vals, valid, 0u);
        }
    } else {
#pragma unroll
        for (int j = 0; j < ITEMS; j++) vals[j] = (u32)(base + (u64)(wbase + j * 32));
    }
    __syncthreads();  // every key has been read from shared memory
#pragma unroll
    for (int j = 0; j < ITEMS; j++) smem.vals[ranks[j]] = vals[j];
    __syncthreads();
#pragma unroll
    for (int j = 0; j < ITEMS; j++) {
        const int r = (int)t + j * SWEEP_THREADS;
        if (r < valid) vals_out[dst[j]] = smem.vals[r];
    }
}

extern "C" __global__ void __launch_bounds__(SWEEP_THREADS)
    onesweep_u32(const u32* keys_in, const u32* vals_in, u32* keys_out, u32* vals_out, u64 n, u32 shift,
                 const u32* digit_start, u64* status, u64* counter, u32 epoch, u32 xor_mask) {
    onesweep_impl<u32, SWEEP_ITEMS_32>(keys_in, vals_in, keys_out, vals_out, n, shift, digit_start, status, counter,
                                       epoch, xor_mask);
}

extern "C" __global__ void __launch_bounds__(SWEEP_THREADS)
    onesweep_u64(const u64* keys_in, const u32* vals_in, u64* keys_out, u32* vals_out, u64 n, u32 shift,
                 const u32* digit_start, u64* status, u64* counter, u32 epoch, u64 xor_mask) {
    onesweep_impl<u64, SWEEP_ITEMS_64>(keys_in, vals_in, keys_out, vals_out, n, shift, digit_start, status, counter,
                                       epoch, xor_mask);
}

// ---- adjacent distinct -----------------------------------------------------------------------

// flags[i] = (i == 0 || col[i] != col[i-1]), or-ed into flags when `accumulate`. Floats
// compare by their total-order key (every NaN equal, -0.0 != 0.0).
template <typename T>
__device__ __forceinline__ bool differs(const T* __restrict__ col, u64 i) {
    return col[i] != col[i - 1];
}

template <>
__device__ __forceinline__ bool differs<double>(const double* __restrict__ col, u64 i) {
    return ukey(col[i]) != ukey(col[i - 1]);
}

template <typename T>
__device__ __forceinline__ void adjacent_impl(const T* __restrict__ col, u8* __restrict__ flags, u64 n,
                                              u32 accumulate) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const bool d = i == 0 || differs<T>(col, i);
        if (accumulate) {
            if (d) flags[i] = 1;
        } else {
            flags[i] = d ? 1 : 0;
        }
    }
}

extern "C" __global__ void adjacent_distinct_u8(const u8* col, u8* flags, u64 n, u32 accumulate) {
    adjacent_impl<u8>(col, flags, n, accumulate);
}

extern "C" __global__ void adjacent_distinct_u32(const u32* col, u8* flags, u64 n, u32 accumulate) {
    adjacent_impl<u32>(col, flags, n, accumulate);
}

extern "C" __global__ void adjacent_distinct_u64(const u64* col, u8* flags, u64 n, u32 accumulate) {
    adjacent_impl<u64>(col, flags, n, accumulate);
}

extern "C" __global__ void adjacent_distinct_u128(const u128* col, u8* flags, u64 n, u32 accumulate) {
    adjacent_impl<u128>(col, flags, n, accumulate);
}

extern "C" __global__ void adjacent_distinct_f64(const double* col, u8* flags, u64 n, u32 accumulate) {
    adjacent_impl<double>(col, flags, n, accumulate);
}

// ---- repeated keys ---------------------------------------------------------------------------
//
// From the flags of adjacent_distinct over the key columns: *last = max over rows i >= 1 whose
// flag is 0 (row i has the keys of row i - 1) of n - i, so that the first repeat is at row
// n - *last, and *last stays 0 when there is none. *last must be zero on entry.

extern "C" __global__ void repeated_key(const u8* __restrict__ flags, u64 n, unsigned long long* last) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    u64 best = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x + 1; i < n; i += stride) {
        if (flags[i] == 0) {
            best = n - i;
            break;
        }
    }
    if (best != 0) atomicMax(last, (unsigned long long)best);
}

// ---- already-sorted input ------------------------------------------------------------------
//
// *unsorted = 1 when some row of up to four keys (key j: column pj of width wj bytes, 4 or
// 8, compared after an xor with xj, which makes its order that of unsigned integers) is
// greater than the next row: when it stays 0, the identity is the stable sort.

__device__ __forceinline__ u64 skey(const void* p, unsigned w, u64 x, u64 i) {
    return (w == 8 ? ((const u64*)p)[i] : (u64)((const u32*)p)[i]) ^ x;
}

extern "C" __global__ void rows_sorted(const void* p0, const void* p1, const void* p2, const void* p3, u64 x0, u64 x1,
                                       u64 x2, u64 x3, unsigned widths, int k, u64 n, unsigned* unsorted) {
    const void* p[4] = {p0, p1, p2, p3};
    const u64 x[4] = {x0, x1, x2, x3};
    bool bad = false;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x + 1; i < n; i += (u64)gridDim.x * blockDim.x) {
        for (int j = 0; j < k; ++j) {
            const unsigned w = (widths >> (8 * j)) & 0xff;
            const u64 a = skey(p[j], w, x[j], i - 1), b = skey(p[j], w, x[j], i);
            if (a != b) {
                bad |= a > b;
                break;
            }
        }
    }
    if (__syncthreads_or(bad) && threadIdx.x == 0) *unsorted = 1;
}

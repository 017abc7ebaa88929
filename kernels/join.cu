// Sort-merge joins: per-left-row matching ranges (JoinCount, MatchFlags, JoinWrite's
// first pass), merge union positions, the ranges of band joins (BoundRange), and hash
// tables and their probes (HashBuild, HashProbe, HashMatch).
//
// Multi-column keys are described by a descriptor in device memory, copied into shared
// memory at the start of each kernel: `desc[0..k]` are element type codes (T_U8 …
// T_I128 of common.cuh; an i128 column is two key words, T_I128 and T_I128_LO, with the
// same pointer), then one group of `k` column pointers per side (`desc[k + g*k + c]`).
// Every value is compared through its order-preserving u64 image (`okey_word`), the
// order fox-cpu uses.

#include "common.cuh"

// Lexicographic comparison of row i of group ga with row j of group gb: -1, 0 or 1.
__device__ __forceinline__ int cmp_rows(const u64* sd, int k, int ga, u64 i, int gb, u64 j) {
    for (int c = 0; c < k; ++c) {
        u64 a = okey_word(sd[k + ga * k + c], sd[c], i);
        u64 b = okey_word(sd[k + gb * k + c], sd[c], j);
        if (a != b) return a < b ? -1 : 1;
    }
    return 0;
}

// First row r of group g in [lo, hi) with row r >= (upper: >) row i of group q.
__device__ __forceinline__ u64 search(const u64* sd, int k, int g, u64 lo, u64 hi, int q, u64 i, bool upper) {
    while (lo < hi) {
        u64 mid = lo + (hi - lo) / 2;
        int o = cmp_rows(sd, k, g, mid, q, i);
        if (o < 0 || (upper && o == 0)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

__device__ __forceinline__ void load_desc(u64* sd, const u64* desc, int n) {
    for (int t = threadIdx.x; t < n; t += blockDim.x) sd[t] = desc[t];
    __syncthreads();
}

// out[start + t] = v_t for t < n (n <= 16): builds key descriptors without host copies.
extern "C" __global__ void fill_desc(u64* out, unsigned start, unsigned n, u64 v0, u64 v1, u64 v2, u64 v3, u64 v4,
                                     u64 v5, u64 v6, u64 v7, u64 v8, u64 v9, u64 v10, u64 v11, u64 v12, u64 v13,
                                     u64 v14, u64 v15) {
    unsigned t = threadIdx.x;
    if (t >= n) return;
    u64 v = t == 0 ? v0 : t == 1 ? v1 : t == 2 ? v2 : t == 3 ? v3 : t == 4 ? v4 : t == 5 ? v5 : t == 6 ? v6
          : t == 7 ? v7 : t == 8 ? v8 : t == 9 ? v9 : t == 10 ? v10 : t == 11 ? v11 : t == 12 ? v12
          : t == 13 ? v13 : t == 14 ? v14 : v15;
    out[start + t] = v;
}

// The right rows each block of BLOCK left rows of join_bounds can match in group g:
// bounds[2b] is the first row >= the block's first row, bounds[2b + 1] the first row > its
// last row (both sides are sorted). One thread per block, so the searches over the whole
// right side run once for all blocks at once rather than at the start of every block.
// The descriptor has `nwords` words (the left group and every right group).
extern "C" __global__ void __launch_bounds__(BLOCK)
    join_block_bounds(const u64* desc, int nwords, int k, int g, u64 nl, u64 nr, u64 nblocks, u64* bounds) {
    extern __shared__ u64 sd[];
    load_desc(sd, desc, nwords);
    u64 b = (u64)blockIdx.x * BLOCK + threadIdx.x;
    if (b >= nblocks) return;
    u64 first = b * BLOCK;
    u64 last = min(first + BLOCK, nl) - 1;
    u64 a = search(sd, k, g, 0, nr, 0, first, false);
    bounds[2 * b] = a;
    bounds[2 * b + 1] = search(sd, k, g, a, nr, 0, last, true);
}

// Key words of a left row that join_bounds holds in registers; wider keys are compared
// through the descriptor.
#define JB_KREG 4
// A block's right range of at most JB_TILE * JB_TILES rows, with keys of at most
// JB_TILE_K words, is read by join_bounds in tiles of JB_TILE rows through shared memory
// (coalesced reads, searches in shared memory); a longer one is searched in global memory.
#define JB_TILE 1024
#define JB_TILES 8
#define JB_TILE_K 2

// Row r of group g against `key` (k <= JB_KREG words): -1, 0 or 1.
__device__ __forceinline__ int cmp_key(const u64* sd, int k, int g, u64 r, const u64* key) {
#pragma unroll
    for (int c = 0; c < JB_KREG; ++c) {
        if (c < k) {
            u64 a = okey_word(sd[k + g * k + c], sd[c], r);
            if (a != key[c]) return a < key[c] ? -1 : 1;
        }
    }
    return 0;
}

// First row r of group g in [lo, hi) with row r >= (upper: >) `key` (k <= JB_KREG words).
__device__ __forceinline__ u64 search_key(const u64* sd, int k, int g, u64 lo, u64 hi, const u64* key, bool upper) {
    while (lo < hi) {
        u64 mid = lo + (hi - lo) / 2;
        int o = cmp_key(sd, k, g, mid, key);
        if (o < 0 || (upper && o == 0)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// Row r of a shared-memory tile against `key`: -1, 0 or 1.
__device__ __forceinline__ int cmp_tile_key(const u64* tile, int k, u64 r, const u64* key) {
#pragma unroll
    for (int c = 0; c < JB_TILE_K; ++c) {
        if (c < k) {
            u64 a = tile[c * JB_TILE + r];
            if (a != key[c]) return a < key[c] ? -1 : 1;
        }
    }
    return 0;
}

// The first row of a shared-memory tile of n rows (word c of row r at
// tile[c * JB_TILE + r]) that is >= (upper: >) `key`.
__device__ __forceinline__ u64 search_tile(const u64* tile, int k, u64 n, const u64* key, bool upper) {
    u64 lo = 0, hi = n;
    while (lo < hi) {
        u64 mid = lo + (hi - lo) / 2;
        int o = cmp_tile_key(tile, k, mid, key);
        if (o < 0 || (upper && o == 0)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// Whether row r of group g equals `key` (k <= JB_KREG words).
__device__ __forceinline__ bool equal_key(const u64* sd, int k, int g, u64 r, const u64* key) {
    return cmp_key(sd, k, g, r, key) == 0;
}

// For every left row i (group 0, nl rows) the matching range [lo, hi) in right group g
// (nr rows). With k == 0 every pair matches: [0, nr).
//   mode 0: counts[i] = hi - lo (u64)
//   mode 1: flags of matches: found = hi > lo (only lo is searched: a match is lo's row
//           equal to row i). With `prior`, flags[i] holds whether an earlier right group
//           matched row i, and such a row is found without a search (a block whose rows
//           all are is skipped). flags[i] = found != anti on the `last` group, else found.
//   mode 2: lo_out[i] = lo (u32), and checks that `offsets`/`total` are the exclusive scan
//           of the counts (error code 1 at the first row found that disagrees).
// One left row per thread, searching only the right range of its block (`bounds`, from
// join_block_bounds; null for a grid that runs in one wave, whose blocks' first threads
// search their ranges). A row's key words are read once into registers; where the block's
// range has at most JB_TILE * JB_TILES rows of at most JB_TILE_K words, the block reads
// it tile by tile into shared memory and every search runs there.
extern "C" __global__ void __launch_bounds__(BLOCK)
    join_bounds(const u64* desc, int nwords, int k, int g, u64 nl, u64 nr, const u64* bounds, int mode, int anti,
                int prior, int last, u64* counts, unsigned char* flags, unsigned* lo_out, const u64* offsets,
                u64 total, u64* err) {
    extern __shared__ u64 sd[];
    __shared__ u64 tile[JB_TILE_K * JB_TILE];
    load_desc(sd, desc, nwords);
    u64 first = (u64)blockIdx.x * BLOCK;
    if (first >= nl) return;
    u64 i = first + threadIdx.x;
    bool pre = mode == 1 && prior && i < nl && flags[i] != 0;
    if (mode == 1 && prior && __syncthreads_and(pre || i >= nl)) {
        if (last && i < nl) flags[i] = (unsigned char)(anti == 0);
        return;
    }
    u64 s_lo, s_hi;
    if (bounds != nullptr) {
        s_lo = bounds[2 * blockIdx.x];
        s_hi = bounds[2 * blockIdx.x + 1];
    } else {
        // A grid of one wave: the block's first thread searches its range.
        __shared__ u64 b_lo, b_hi;
        if (threadIdx.x == 0) {
            u64 last = min(first + BLOCK, nl) - 1;
            b_lo = search(sd, k, g, 0, nr, 0, first, false);
            b_hi = search(sd, k, g, b_lo, nr, 0, last, true);
        }
        __syncthreads();
        s_lo = b_lo;
        s_hi = b_hi;
    }
    u64 lo, hi;
    bool found;
    if (k <= JB_KREG) {
        u64 key[JB_KREG];
#pragma unroll
        for (int c = 0; c < JB_KREG; ++c) key[c] = (c < k && i < nl) ? okey_word(sd[k + c], sd[c], i) : 0;
        u64 r = s_hi - s_lo;
        if (k <= JB_TILE_K && r <= (u64)JB_TILE * JB_TILES) {
            // Tile by tile; a row's bound lies in the first tile whose last row is >=
            // (upper: >) the row, else it is the range's end.
            bool lo_done = pre, hi_done = mode == 1;
            lo = s_hi;
            hi = s_hi;
            found = pre;
            for (u64 base = 0; base < r; base += JB_TILE) {
                u64 n = min((u64)JB_TILE, r - base);
                __syncthreads();
                for (u64 t = threadIdx.x; t < n; t += BLOCK)
                    for (int c = 0; c < k; ++c)
                        tile[c * JB_TILE + t] = okey_word(sd[k + g * k + c], sd[c], s_lo + base + t);
                __syncthreads();
                if (i < nl && !(lo_done && hi_done)) {
                    int o = cmp_tile_key(tile, k, n - 1, key);
                    if (!lo_done && o >= 0) {
                        u64 l = search_tile(tile, k, n, key, false);
                        lo = s_lo + base + l;
                        lo_done = true;
                        found = cmp_tile_key(tile, k, l, key) == 0;
                    }
                    if (!hi_done && o > 0) {
                        hi = s_lo + base + search_tile(tile, k, n, key, true);
                        hi_done = true;
                    }
                }
            }
            if (i >= nl) return;
            if (mode == 1) hi = lo;
            else found = hi > lo;
        } else {
            if (i >= nl) return;
            if (pre) {
                found = true;
                lo = hi = s_lo;
            } else {
                lo = search_key(sd, k, g, s_lo, s_hi, key, false);
                if (mode == 1) {
                    found = lo < s_hi && equal_key(sd, k, g, lo, key);
                    hi = lo;
                } else {
                    hi = search_key(sd, k, g, lo, s_hi, key, true);
                    found = hi > lo;
                }
            }
        }
    } else {
        if (i >= nl) return;
        if (pre) {
            found = true;
            lo = hi = s_lo;
        } else {
            lo = search(sd, k, g, s_lo, s_hi, 0, i, false);
            hi = search(sd, k, g, lo, s_hi, 0, i, true);
            found = hi > lo;
        }
    }
    if (mode == 0) {
        counts[i] = hi - lo;
    } else if (mode == 1) {
        flags[i] = (unsigned char)(last ? found != (anti != 0) : found);
    } else {
        lo_out[i] = (unsigned)lo;
        u64 s = offsets[i];
        u64 e = i + 1 < nl ? offsets[i + 1] : total;
        if ((i == 0 && s != 0) || e < s || e - s != hi - lo) set_err(err, 1, i, s);
    }
}

// Merge union, write positions, for keys too wide for merge_path_pos's tiles. Group 0 is
// `a` (na rows), group 1 is `b` with every row equal to a row of `a` removed (nb rows); the
// two are disjoint, so the output position of a[i] is i + #{b < a[i]} and that of b[j] is
// j + #{a < b[j]}. Thread t < na handles a[t],
// thread t >= na handles b[t - na].
extern "C" __global__ void __launch_bounds__(BLOCK)
    union_pos(const u64* desc, int k, u64 na, u64 nb, unsigned* pos_a, unsigned* pos_b) {
    extern __shared__ u64 sd[];
    load_desc(sd, desc, 3 * k);
    u64 t = (u64)blockIdx.x * BLOCK + threadIdx.x;
    if (t < na) {
        pos_a[t] = (unsigned)(t + search(sd, k, 1, 0, nb, 0, t, false));
    } else if (t < na + nb) {
        u64 j = t - na;
        pos_b[j] = (unsigned)(j + search(sd, k, 0, 0, na, 1, j, false));
    }
}

// Merge path (Odeh, Green et al.): the merge of group 0 (`a`, na rows) and group 1 (`b`, nb
// rows), both sorted, as tiles of `tile` output positions. Of equal rows `a`'s come first
// (the union's sides are disjoint, so there are none). splits[t] for t <= ntiles is the
// number of rows of `a` among the first min(t * tile, na + nb) outputs: the first i with
// a[i] > b[d - 1 - i] on the diagonal d, found by one binary search per tile boundary.
extern "C" __global__ void __launch_bounds__(BLOCK)
    merge_path_splits(const u64* desc, int k, u64 na, u64 nb, u64 tile, u64 ntiles, u64* splits) {
    extern __shared__ u64 sd[];
    load_desc(sd, desc, 3 * k);
    u64 t = (u64)blockIdx.x * BLOCK + threadIdx.x;
    if (t > ntiles) return;
    u64 d = min(t * tile, na + nb);
    u64 lo = d > nb ? d - nb : 0;
    u64 hi = min(d, na);
    while (lo < hi) {
        u64 mid = lo + (hi - lo) / 2;
        if (cmp_rows(sd, k, 0, mid, 1, d - 1 - mid) <= 0) lo = mid + 1;
        else hi = mid;
    }
    splits[t] = lo;
}

// Lexicographic comparison of rows r and s of a tile's keys in shared memory (word c of
// row r at keys[c * tile + r]): -1, 0 or 1.
__device__ __forceinline__ int cmp_tile(const u64* keys, int k, u64 tile, u64 r, u64 s) {
    for (int c = 0; c < k; ++c) {
        u64 a = keys[c * tile + r];
        u64 b = keys[c * tile + s];
        if (a != b) return a < b ? -1 : 1;
    }
    return 0;
}

// The output positions of a merge (pos_a[i] for a[i], pos_b[j] for b[j]), one block per
// tile of `items * BLOCK` outputs between the splits of merge_path_splits. The block
// copies its tile's rows of both sides, as order-preserving key words, into shared memory
// after the descriptor (3k + k * tile words); each thread finds where its `items`
// consecutive outputs start by a binary search on its diagonal of the tile, then merges
// them sequentially, with the same rule for equal rows as the splits.
extern "C" __global__ void __launch_bounds__(BLOCK)
    merge_path_pos(const u64* desc, int k, u64 na, u64 nb, const u64* splits, unsigned items, unsigned* pos_a,
                   unsigned* pos_b) {
    extern __shared__ u64 sd[];
    load_desc(sd, desc, 3 * k);
    u64* keys = sd + 3 * k;
    u64 tile = (u64)items * BLOCK;
    u64 t = blockIdx.x;
    u64 d0 = t * tile;
    u64 d1 = min(d0 + tile, na + nb);
    u64 i0 = splits[t], i1 = splits[t + 1];
    u64 j0 = d0 - i0, j1 = d1 - i1;
    u64 la = i1 - i0, lb = j1 - j0, n = la + lb;
    for (u64 r = threadIdx.x; r < n; r += BLOCK) {
        for (int c = 0; c < k; ++c) {
            keys[c * tile + r] = r < la ? okey_word(sd[k + c], sd[c], i0 + r)
                                        : okey_word(sd[2 * k + c], sd[c], j0 + (r - la));
        }
    }
    __syncthreads();
    u64 dd = min((u64)threadIdx.x * items, n);
    u64 de = min(dd + items, n);
    u64 lo = dd > lb ? dd - lb : 0;
    u64 hi = min(dd, la);
    while (lo < hi) {
        u64 mid = lo + (hi - lo) / 2;
        if (cmp_tile(keys, k, tile, mid, la + (dd - 1 - mid)) <= 0) lo = mid + 1;
        else hi = mid;
    }
    u64 x = lo, y = dd - lo;
    for (u64 d = dd; d < de; ++d) {
        bool take_a = y >= lb || (x < la && cmp_tile(keys, k, tile, x, la + y) <= 0);
        if (take_a) {
            pos_a[i0 + x] = (unsigned)(d0 + d);
            ++x;
        } else {
            pos_b[j0 + y] = (unsigned)(d0 + d);
            ++y;
        }
    }
}

// dst[pos[i]] = src[i] for i < n, per element size.
extern "C" __global__ void scatter_u8(const unsigned char* src, const unsigned* pos, u64 n, unsigned char* dst) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
        dst[pos[i]] = src[i];
}

extern "C" __global__ void scatter_u32(const unsigned* src, const unsigned* pos, u64 n, unsigned* dst) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
        dst[pos[i]] = src[i];
}

extern "C" __global__ void scatter_u64(const u64* src, const unsigned* pos, u64 n, u64* dst) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
        dst[pos[i]] = src[i];
}

extern "C" __global__ void scatter_u128(const uint4* src, const unsigned* pos, u64 n, uint4* dst) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
        dst[pos[i]] = src[i];
}

// out[i] = v for i < n (counts of a cross product).
extern "C" __global__ void fill_u64(u64* out, u64 n, u64 v) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) out[i] = v;
}

// BoundRange. Group 0 of the descriptor is the searched side's keys (nv rows, sorted on
// its keys and then `values`), group 1 the probing rows' keys (n rows); k may be 0. wide:
// the values and bounds are i64 (else i32). lower / upper: 0 no bound, 1 closed, 2 open.
// The bound of row i is its column's value plus the offset, in i128 (it never
// overflows). lo[i] = the number of searched rows before row i's keys or, of equal keys,
// with a value below the lower bound (closed) or not above it (open); hi[i] = the number
// before its keys or, of equal keys, with a value not above the upper bound (closed) or
// below it (open), every row of equal keys without an upper bound; hi is raised to lo.
// Without either bound (an index nested-loop join) `values` is never read and may be null.
__device__ __forceinline__ i128 band_value(const void* p, int wide, u64 i) {
    return wide ? (i128)((const long long*)p)[i] : (i128)((const int*)p)[i];
}

__device__ __forceinline__ u64 band_before(const u64* sd, int k, const void* values, u64 nv, int wide, u64 i,
                                           bool has, i128 x, bool with_equal, bool keys_equal_before) {
    u64 a = 0, b = nv;
    while (a < b) {
        u64 mid = a + (b - a) / 2;
        int o = cmp_rows(sd, k, 0, mid, 1, i);
        bool before;
        if (o != 0) {
            before = o < 0;
        } else if (has) {
            i128 v = band_value(values, wide, mid);
            before = v < x || (with_equal && v == x);
        } else {
            before = keys_equal_before;
        }
        if (before) a = mid + 1;
        else b = mid;
    }
    return a;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
    bound_range(const u64* desc, int k, const void* values, u64 nv, int wide, const void* lo_b, int lower,
                long long lo_off, const void* hi_b, int upper, long long hi_off, u64 n, unsigned* lo, unsigned* hi) {
    extern __shared__ u64 sd[];
    load_desc(sd, desc, 3 * k);
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        u64 a = band_before(sd, k, values, nv, wide, i, lower != 0,
                            lower != 0 ? band_value(lo_b, wide, i) + lo_off : 0, lower == 2, false);
        u64 b = band_before(sd, k, values, nv, wide, i, upper != 0,
                            upper != 0 ? band_value(hi_b, wide, i) + hi_off : 0, upper == 1, true);
        lo[i] = (unsigned)a;
        hi[i] = (unsigned)(b < a ? a : b);
    }
}

// Hash joins. The build side (group 0 of the descriptor, nb rows) is sorted on its keys;
// its table has `mask + 1` slots (a power of two), 0 for an empty slot, else 1 + the first
// row of a run of equal keys, placed by linear probing from the hash of the run's keys.
// Keys hash through their order-preserving words (`okey_word`), so keys equal as the merge
// join compares them hash equally (every NaN one key, -0.0 and 0.0 two); the mixing steps
// are fox-cpu's (crates/fox-cpu/src/hash.rs).
__device__ __forceinline__ u64 hash_word(u64 h, u64 w) {
    u64 x = (h ^ w) * 0xff51afd7ed558ccdull;
    return x ^ (x >> 32);
}

__device__ __forceinline__ u64 row_hash(const u64* sd, int k, int g, u64 i) {
    u64 h = 0x9e3779b97f4a7c15ull;
    for (int c = 0; c < k; ++c) h = hash_word(h, okey_word(sd[k + g * k + c], sd[c], i));
    return h ^ (h >> 29);
}

// HashBuild: every row that starts a run (row 0, or keys unlike the row before) claims the
// first empty slot from its hash with atomicCAS. The descriptor has one group.
extern "C" __global__ void __launch_bounds__(BLOCK)
    hash_build(const u64* desc, int k, u64 n, unsigned* table, u64 mask) {
    extern __shared__ u64 sd[];
    load_desc(sd, desc, 2 * k);
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        if (i > 0 && cmp_rows(sd, k, 0, i, 0, i - 1) == 0) continue;
        u64 s = row_hash(sd, k, 0, i) & mask;
        for (u64 step = 0; step <= mask; ++step) {
            if (atomicCAS(&table[s], 0u, (unsigned)(i + 1)) == 0u) break;
            s = (s + 1) & mask;
        }
    }
}

// HashProbe (mode 0: lo[i], hi[i] = the run of build rows equal to probing row i, group 1
// of the descriptor; 0, 0 when none) and HashMatch (mode 1: flags[i] = has a run != anti).
// With `shared`, each block first copies the table into shared memory after the
// descriptor's 3k words (the launcher sets it when the table fits); otherwise probes read
// it from global memory. A probe visits at most every slot once, so a table without an
// empty slot still ends.
extern "C" __global__ void __launch_bounds__(BLOCK)
    hash_probe(const u64* desc, int k, u64 nb, const unsigned* table, u64 mask, int shared, u64 n, int mode,
               int anti, unsigned* lo, unsigned* hi, unsigned char* flags) {
    extern __shared__ u64 sd[];
    load_desc(sd, desc, 3 * k);
    const unsigned* tab = table;
    if (shared) {
        unsigned* st = (unsigned*)(sd + 3 * k);
        for (u64 t = threadIdx.x; t <= mask; t += blockDim.x) st[t] = table[t];
        __syncthreads();
        tab = st;
    }
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        u64 s = row_hash(sd, k, 1, i) & mask;
        u64 a = 0, b = 0;
        for (u64 step = 0; step <= mask; ++step) {
            unsigned r = tab[s];
            if (r == 0u) break;
            u64 row = (u64)r - 1;
            if (row < nb && cmp_rows(sd, k, 0, row, 1, i) == 0) {
                a = row;
                b = mode == 0 ? search(sd, k, 0, row, nb, 1, i, true) : row + 1;
                break;
            }
            s = (s + 1) & mask;
        }
        if (mode == 0) {
            lo[i] = (unsigned)a;
            hi[i] = (unsigned)b;
        } else {
            flags[i] = (unsigned char)((b > a) != (anti != 0));
        }
    }
}

// Radix-partitioned hash tables (HashBuild beyond the launcher's size threshold, and the
// probes of such a table). The runs of equal keys of the sorted build side are split into
// P = 2^pbits partitions by the top pbits bits of their row_hash; partition p has its own
// open-addressing sub-table of cap_p slots (0 when it has no run, else the power of two
// >= twice its runs), placed by the low bits of the same hash with linear probing inside
// the sub-table. An entry holds its run whole: the run's start and end and its k key
// words, so a probe never reads the build side's columns. Layout, in u64 words of the
// table buffer (a U32 buffer of an even length that is no power of two, which is how a
// probe tells it from the unpartitioned table):
//   t[0] = HP_MAGIC, t[1] = pbits | k << 8, t[2] = nb (build rows), t[3] = E (entries),
//   t[HP_HEAD + p] for p <= P: the first entry of sub-table p (t[HP_HEAD + P] = E),
//   then E entries of 1 + k words from t[HP_HEAD + P + 1]: word 0 is start | end << 32
//   (0 for an empty slot; a run has end > start >= 0), words 1..k the run's key words.
// The probing rows are partitioned the same way (a histogram, its scan, a scatter of each
// row's index and key words into partition order), and each block then probes a chunk of
// the partitioned rows partition by partition, with the sub-table in shared memory where
// it fits and enough of the chunk's rows probe it. A probe finds the run the unpartitioned
// table finds: the same runs, the same equality of key words.
// HP_MAGIC and HP_HEAD (the words before the directory) come with the prelude.

// The partition of a hash: its top pbits bits (0 with none).
__device__ __forceinline__ u64 hp_part(u64 h, int pbits) { return pbits > 0 ? h >> (64 - pbits) : 0; }

// Warp-aggregated claim of ctr[key]: the lanes with `live` and equal keys add their number
// to the counter with one atomic, and each gets the old value plus its rank among them.
// Every lane of the warp calls it together (keys < 0xffffffff).
__device__ __forceinline__ u64 hp_claim(u64* ctr, unsigned key, bool live) {
    unsigned peers = __match_any_sync(0xffffffffu, live ? key : 0xffffffffu);
    unsigned lane = threadIdx.x & 31u;
    int leader = __ffs(peers) - 1;
    u64 base = 0;
    if (live && (int)lane == leader) base = atomicAdd(&ctr[key], (u64)__popc(peers));
    base = __shfl_sync(peers, base, leader);
    return base + (u64)__popc(peers & ((1u << lane) - 1u));
}

// Whether row i of group 0 starts a run of equal keys.
__device__ __forceinline__ bool hp_run_start(const u64* sd, int k, u64 i) {
    return i == 0 || cmp_rows(sd, k, 0, i, 0, i - 1) != 0;
}

// The end of the run of group 0 that starts at row i (n rows): galloping, then binary
// search.
__device__ u64 hp_run_end(const u64* sd, int k, u64 i, u64 n) {
    // Rows i..=a are in the run; b is past it (or n).
    u64 a = i, step = 1, b = n;
    while (a + step < n) {
        if (cmp_rows(sd, k, 0, a + step, 0, i) == 0) {
            a += step;
            step *= 2;
        } else {
            b = a + step;
            break;
        }
    }
    u64 x = a + 1, y = b;
    while (x < y) {
        u64 mid = x + (y - x) / 2;
        if (cmp_rows(sd, k, 0, mid, 0, i) == 0) x = mid + 1;
        else y = mid;
    }
    return x;
}

// The runs of group 0 (n sorted rows) added to *runs.
extern "C" __global__ void __launch_bounds__(BLOCK) hp_count_runs(const u64* desc, int k, u64 n, u64* runs) {
    extern __shared__ u64 sd[];
    load_desc(sd, desc, 2 * k);
    u64 c = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
        if (hp_run_start(sd, k, i)) ++c;
    for (int d = 16; d > 0; d >>= 1) c += __shfl_down_sync(0xffffffffu, c, d);
    if ((threadIdx.x & 31u) == 0 && c > 0) atomicAdd(runs, c);
}

// counts[p] += the runs of group 0 (n sorted rows) in partition p. The loop advances a
// whole warp at a time (BLOCK and the grid stride are multiples of 32), as hp_claim needs.
extern "C" __global__ void __launch_bounds__(BLOCK)
    hp_count_parts(const u64* desc, int k, u64 n, int pbits, u64* counts) {
    extern __shared__ u64 sd[];
    load_desc(sd, desc, 2 * k);
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 w = (u64)blockIdx.x * blockDim.x + (threadIdx.x & ~31u); w < n; w += stride) {
        u64 i = w + (threadIdx.x & 31u);
        bool live = i < n && hp_run_start(sd, k, i);
        unsigned p = live ? (unsigned)hp_part(row_hash(sd, k, 0, i), pbits) : 0u;
        hp_claim(counts, p, live);
    }
}

// In place, the slots of each partition's sub-table from its runs: 0 for none, else the
// power of two >= twice the runs.
extern "C" __global__ void __launch_bounds__(BLOCK) hp_caps(u64* counts, u64 parts) {
    for (u64 p = (u64)blockIdx.x * blockDim.x + threadIdx.x; p < parts; p += (u64)gridDim.x * blockDim.x) {
        u64 c = counts[p];
        counts[p] = c == 0 ? 0 : 1ull << (64 - __clzll(2 * c - 1));
    }
}

// The header and directory of a partitioned table `t` (its entries zeroed before): `dir`
// is the exclusive scan of the sub-tables' slots (parts words), e the entries in all.
extern "C" __global__ void __launch_bounds__(BLOCK)
    hp_init(u64* t, const u64* dir, u64 parts, int pbits, int k, u64 nb, u64 e) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0) {
        t[0] = HP_MAGIC;
        t[1] = (u64)pbits | ((u64)k << 8);
        t[2] = nb;
        t[3] = e;
    }
    for (; i <= parts; i += (u64)gridDim.x * blockDim.x) t[HP_HEAD + i] = i < parts ? dir[i] : e;
}

// Every run of group 0 (n sorted rows, n < 2^32) claims the first empty slot of its
// partition's sub-table from its hash with atomicCAS on the entry's first word, then
// writes its key words. The sub-tables have twice their runs' slots, so a slot is found.
extern "C" __global__ void __launch_bounds__(BLOCK)
    hp_fill(const u64* desc, int k, u64 n, int pbits, u64 parts, u64* t) {
    extern __shared__ u64 sd[];
    load_desc(sd, desc, 2 * k);
    const u64* dir = t + HP_HEAD;
    u64* ents = t + HP_HEAD + parts + 1;
    u64 width = 1 + (u64)k;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        if (!hp_run_start(sd, k, i)) continue;
        u64 h = row_hash(sd, k, 0, i);
        u64 p = hp_part(h, pbits);
        u64 e0 = dir[p];
        u64 mask = dir[p + 1] - e0 - 1;
        u64 head = i | (hp_run_end(sd, k, i, n) << 32);
        u64 s = h & mask;
        for (u64 step = 0; step <= mask; ++step) {
            u64* e = ents + (e0 + s) * width;
            if (atomicCAS(e, 0ull, head) == 0ull) {
                for (int c = 0; c < k; ++c) e[1 + c] = okey_word(sd[k + c], sd[c], i);
                break;
            }
            s = (s + 1) & mask;
        }
    }
}

// counts[p] += the probing rows base..base + m of group 0 in partition p (the loop
// advances whole warps, as in hp_count_parts).
extern "C" __global__ void __launch_bounds__(BLOCK)
    hp_hist(const u64* desc, int k, u64 base, u64 m, int pbits, u64* counts) {
    extern __shared__ u64 sd[];
    load_desc(sd, desc, 2 * k);
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 w = (u64)blockIdx.x * blockDim.x + (threadIdx.x & ~31u); w < m; w += stride) {
        u64 j = w + (threadIdx.x & 31u);
        bool live = j < m;
        unsigned p = live ? (unsigned)hp_part(row_hash(sd, k, 0, base + j), pbits) : 0u;
        hp_claim(counts, p, live);
    }
}

// Each probing row base + j (j < m < 2^32) takes the next position of its partition from
// `cursor` (the exclusive scan of hp_hist's counts) and writes there its index j and its
// key words (word c of position q at words[c * m + q]). Rows of a partition land in any
// order within its range: each is probed alone.
extern "C" __global__ void __launch_bounds__(BLOCK)
    hp_scatter(const u64* desc, int k, u64 base, u64 m, int pbits, u64* cursor, unsigned* idx, u64* words) {
    extern __shared__ u64 sd[];
    load_desc(sd, desc, 2 * k);
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 w = (u64)blockIdx.x * blockDim.x + (threadIdx.x & ~31u); w < m; w += stride) {
        u64 j = w + (threadIdx.x & 31u);
        bool live = j < m;
        unsigned p = live ? (unsigned)hp_part(row_hash(sd, k, 0, base + j), pbits) : 0u;
        u64 q = hp_claim(cursor, p, live);
        if (live) {
            idx[q] = (unsigned)j;
            for (int c = 0; c < k; ++c) words[(u64)c * m + q] = okey_word(sd[k + c], sd[c], base + j);
        }
    }
}

// The partition holding position x < m of the partitioned probing rows: the last q with
// offs[q] <= x (offs[0] = 0).
__device__ __forceinline__ u64 hp_part_of(const u64* offs, u64 parts, u64 x) {
    return owner(offs, 1, parts, x);
}

// The slots of sub-table q of a table of nent entries: 0 where the directory places it
// outside the entries or its size is no power of two (it then finds no run).
__device__ __forceinline__ u64 hp_cap(const u64* dir, u64 q, u64 nent) {
    u64 e0 = dir[q], e1 = dir[q + 1];
    u64 cap = e1 - e0;
    return e1 < e0 || e1 > nent || (cap & (cap - 1)) != 0 ? 0 : cap;
}

// The hash of partitioned probing row `pos` (word c at words[c * m + pos]).
__device__ __forceinline__ u64 hp_row_hash(const u64* words, int k, u64 m, u64 pos) {
    u64 h = 0x9e3779b97f4a7c15ull;
    for (int c = 0; c < k; ++c) h = hash_word(h, words[(u64)c * m + pos]);
    return h ^ (h >> 29);
}

// The run of partitioned probing row `pos` (hash h) in the sub-table `tab` of cap slots
// (entries of 1 + k words): *ra, *rb = its start and end, 0, 0 for none. An entry with
// equal keys gives its run only where start < end <= nb.
__device__ __forceinline__ void hp_find(const u64* tab, u64 cap, int k, const u64* words, u64 m, u64 pos, u64 h,
                                        u64 nb, u64* ra, u64* rb) {
    *ra = 0;
    *rb = 0;
    if (cap == 0) return;
    u64 width = 1 + (u64)k;
    u64 mask = cap - 1;
    u64 s = h & mask;
    for (u64 step = 0; step <= mask; ++step) {
        const u64* e = tab + s * width;
        u64 head = e[0];
        u64 rend = head >> 32;
        if (rend == 0) return;
        bool eq = true;
        for (int c = 0; c < k && eq; ++c) eq = e[1 + c] == words[(u64)c * m + pos];
        if (eq) {
            u64 rstart = head & 0xffffffffull;
            if (rstart < rend && rend <= nb) {
                *ra = rstart;
                *rb = rend;
            }
            return;
        }
        s = (s + 1) & mask;
    }
}

// Chunks of the partitioned probing rows with fewer than this many rows per partition on
// average are probed row by row in global memory (hp_probe).
#define HP_FLAT_ROWS 32

// Probes the m partitioned rows of hp_scatter (positions in partition order: partition p
// holds [offs[p], offs[p + 1]), offs[parts] standing for m) against the partitioned table
// t of 2^pbits partitions over nb build rows (the launcher checked its header and
// length). Block b takes positions [b * chunk, (b + 1) * chunk). A chunk that spans
// partitions of fewer than HP_FLAT_ROWS of its rows on average is probed row by row, each
// row's sub-table in global memory; otherwise partition by partition, the sub-table copied
// to shared memory (smem_words u64 words) when it fits and the chunk has at least a
// quarter as many of its rows as it has slots, else probed in global memory.
//   mode 0: lo[base + j], hi[base + j] = the run of probing row base + j (0, 0 for none)
//   mode 1: flags[base + j] = (it has a run) != anti
extern "C" __global__ void __launch_bounds__(BLOCK)
    hp_probe(const u64* t, int k, u64 nb, int pbits, const u64* offs, const unsigned* idx, const u64* words,
             u64 base, u64 m, u64 chunk, u64 smem_words, int mode, int anti, unsigned* lo, unsigned* hi,
             unsigned char* flags) {
    extern __shared__ u64 st[];
    u64 parts = 1ull << pbits;
    const u64* dir = t + HP_HEAD;
    const u64* ents = t + HP_HEAD + parts + 1;
    u64 width = 1 + (u64)k;
    u64 nent = t[3];
    u64 c0 = (u64)blockIdx.x * chunk;
    u64 c1 = c0 + chunk < m ? c0 + chunk : m;
    if (c0 >= c1) return;
    u64 qa = hp_part_of(offs, parts, c0), qb = hp_part_of(offs, parts, c1 - 1);
    bool flat = c1 - c0 < (qb - qa + 1) * HP_FLAT_ROWS;
    u64 x = flat ? c1 : c0;
    for (u64 pos = c0 + threadIdx.x; flat && pos < c1; pos += blockDim.x) {
        u64 h = hp_row_hash(words, k, m, pos);
        u64 q = hp_part(h, pbits);
        u64 ra, rb;
        hp_find(ents + dir[q] * width, hp_cap(dir, q, nent), k, words, m, pos, h, nb, &ra, &rb);
        u64 j = idx[pos];
        if (j < m) {
            if (mode == 0) {
                lo[base + j] = (unsigned)ra;
                hi[base + j] = (unsigned)rb;
            } else {
                flags[base + j] = (unsigned char)((rb > ra) != (anti != 0));
            }
        }
    }
    // Partition by partition (x = c1 after the flat loop).
    while (x < c1) {
        u64 q = hp_part_of(offs, parts, x);
        u64 qend = q + 1 < parts ? offs[q + 1] : m;
        u64 end = qend < c1 ? qend : c1;
        u64 cap = hp_cap(dir, q, nent);
        bool shared = cap > 0 && cap * width <= smem_words && (end - x) * 4 >= cap;
        const u64* tab = ents + dir[q] * width;
        if (shared) {
            __syncthreads();
            for (u64 w = threadIdx.x; w < cap * width; w += blockDim.x) st[w] = tab[w];
            __syncthreads();
            tab = st;
        }
        for (u64 pos = x + threadIdx.x; pos < end; pos += blockDim.x) {
            u64 ra, rb;
            hp_find(tab, cap, k, words, m, pos, hp_row_hash(words, k, m, pos), nb, &ra, &rb);
            u64 j = idx[pos];
            if (j < m) {
                if (mode == 0) {
                    lo[base + j] = (unsigned)ra;
                    hi[base + j] = (unsigned)rb;
                } else {
                    flags[base + j] = (unsigned char)((rb > ra) != (anti != 0));
                }
            }
        }
        x = end;
    }
}

// Nested-loop joins over unsorted sides. Group 0 of the descriptor is the left keys (nl
// rows), group 1 the right keys (nr rows). One left row per thread; the right rows' key
// words pass through shared memory in tiles of `tile` rows (after the descriptor's 3k
// words), each compared with the thread's row, so pairs come by left row then right row.
//   mode 0: counts[i] = the right rows with equal keys (u64)
//   mode 1: flags[i] = (some right row has equal keys) != anti (u8)
//   mode 2: checks that offsets/total are the exclusive scan of the counts (error code 1
//           at the first row found that disagrees)
//   mode 3: writes lidx/ridx from offsets[i] (after mode 2 has checked them)
extern "C" __global__ void __launch_bounds__(BLOCK)
    nested_loop(const u64* desc, int k, u64 nl, u64 nr, unsigned tile, int mode, int anti, u64* counts,
                unsigned char* flags, const u64* offsets, u64 total, unsigned* lidx, unsigned* ridx, u64* err) {
    extern __shared__ u64 sd[];
    load_desc(sd, desc, 3 * k);
    u64* words = sd + 3 * k;
    u64 i = (u64)blockIdx.x * BLOCK + threadIdx.x;
    bool live = i < nl;
    u64 cnt = 0;
    u64 out = live && mode == 3 ? offsets[i] : 0;
    for (u64 t0 = 0; t0 < nr; t0 += tile) {
        u64 m = nr - t0 < tile ? nr - t0 : tile;
        __syncthreads();
        for (u64 r = threadIdx.x; r < m; r += BLOCK)
            for (int c = 0; c < k; ++c) words[r * k + c] = okey_word(sd[k + k + c], sd[c], t0 + r);
        __syncthreads();
        if (!live) continue;
        for (u64 j = 0; j < m; ++j) {
            bool eq = true;
            for (int c = 0; c < k && eq; ++c) eq = words[j * k + c] == okey_word(sd[k + c], sd[c], i);
            if (eq) {
                if (mode == 3) {
                    lidx[out] = (unsigned)i;
                    ridx[out] = (unsigned)(t0 + j);
                    ++out;
                }
                ++cnt;
            }
        }
    }
    if (!live) return;
    if (mode == 0) {
        counts[i] = cnt;
    } else if (mode == 1) {
        flags[i] = (unsigned char)((cnt > 0) != (anti != 0));
    } else if (mode == 2) {
        u64 s = offsets[i];
        u64 e = i + 1 < nl ? offsets[i + 1] : total;
        if ((i == 0 && s != 0) || e < s || e - s != cnt) set_err(err, 1, i, s);
    }
}

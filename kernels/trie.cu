// Leapfrog-triejoin levels: trie construction, load-balanced expansion (also the write
// pass of sort-merge joins), and search in sorted trie levels.
//
// Values are compared through an order-preserving u64 image (type codes: 0 u8, 1 i32,
// 2 u32, 3 i64, 4 u64, 5 f64; floats by total order with NaN last), as fox-cpu does.

#define BLOCK 256
#define EXPAND_ITEMS 4
#define EXPAND_TILE (BLOCK * EXPAND_ITEMS)

typedef unsigned long long u64;

__device__ __forceinline__ u64 okey(const void* p, int t, u64 i) {
    switch (t) {
    case 0:
        return ((const unsigned char*)p)[i];
    case 1:
        return (u64)((unsigned)((const int*)p)[i] ^ 0x80000000u);
    case 2:
        return ((const unsigned*)p)[i];
    case 3:
        return (u64)((const long long*)p)[i] ^ 0x8000000000000000ull;
    case 4:
        return ((const u64*)p)[i];
    default: {
        double x = ((const double*)p)[i];
        if (x != x) return ~0ull;
        u64 b = (u64)__double_as_longlong(x);
        return (b >> 63) ? ~b : (b | 0x8000000000000000ull);
    }
    }
}

__device__ __forceinline__ void set_err(u64* err, u64 code, u64 row, u64 detail) {
    atomicMin(err + 1, row);
    if (atomicCAS(err, 0ull, code) == 0ull) err[2] = detail;
}

// out[i] = i.
extern "C" __global__ void iota_u32(unsigned* out, u64 n) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
        out[i] = (unsigned)i;
}

// new[i] = prev[i] (when prev is given) || i == 0 || col[i] != col[i-1].
extern "C" __global__ void trie_flags(const unsigned char* prev, const void* col, int t, u64 n, unsigned char* out) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        bool f = i == 0 || (prev != 0 && prev[i] != 0) || okey(col, t, i) != okey(col, t, i - 1);
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

// Last row r in [lo, hi) with offsets[r] <= o (offsets sorted, offsets[lo] <= o).
__device__ __forceinline__ u64 owner(const u64* offsets, u64 lo, u64 hi, u64 o) {
    while (lo < hi) {
        u64 mid = lo + (hi - lo) / 2;
        if (offsets[mid] <= o) lo = mid + 1;
        else hi = mid;
    }
    return lo - 1;
}

// Thread 0 of a block finds the rows [*r0, *r1) that own the outputs [t0, t1) of a tile
// (the caller synchronises before reading them).
__device__ __forceinline__ void tile_rows(const u64* offsets, u64 n, u64 t0, u64 t1, u64* r0, u64* r1) {
    if (threadIdx.x == 0) {
        u64 a = owner(offsets, 0, n, t0);
        u64 b = owner(offsets, a, n, t1 - 1);
        *r0 = a;
        *r1 = b + 1;
    }
}

// Load-balanced expansion of the outputs o in [start, end) (a window of the whole
// expansion): parent[o - start] = the row r whose range [offsets[r], offsets[r+1]) holds o,
// and pos[o - start] = lo[r] + (o - offsets[r]). A block handles a tile of EXPAND_TILE
// outputs; thread 0 finds the rows owning the tile's first and last outputs, and each
// output then searches only between them.
extern "C" __global__ void __launch_bounds__(BLOCK)
    expand_write(const unsigned* lo, const u64* offsets, u64 n, u64 start, u64 end, unsigned* parent, unsigned* pos) {
    __shared__ u64 s_r0, s_r1;
    u64 t0 = start + (u64)blockIdx.x * EXPAND_TILE;
    if (t0 >= end) return;
    u64 t1 = min(t0 + EXPAND_TILE, end);
    tile_rows(offsets, n, t0, t1, &s_r0, &s_r1);
    __syncthreads();
    u64 r0 = s_r0, r1 = s_r1;
#pragma unroll
    for (int it = 0; it < EXPAND_ITEMS; ++it) {
        u64 o = t0 + (u64)it * BLOCK + threadIdx.x;
        if (o < t1) {
            u64 r = owner(offsets, r0, r1, o);
            parent[o - start] = (unsigned)r;
            pos[o - start] = lo[r] + (unsigned)(o - offsets[r]);
        }
    }
}

// SortedSearch: found[i] = needle[i] occurs in values[lo[i]..hi[i]], pos[i] = the first
// index of that slice whose value is not below the needle (hi[i] if none). A range outside
// the values is error code 1 (detail: lo, row: i).
extern "C" __global__ void sorted_search(const void* values, u64 nv, int t, const unsigned* lo, const unsigned* hi,
                                         const void* needle, u64 n, unsigned char* found, unsigned* pos, u64* err) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        u64 a = lo[i], b = hi[i];
        if (a > b || b > nv) {
            set_err(err, 1, i, a);
            found[i] = 0;
            pos[i] = (unsigned)a;
            continue;
        }
        u64 key = okey(needle, t, i);
        u64 end = b;
        while (a < b) {
            u64 mid = a + (b - a) / 2;
            if (okey(values, t, mid) < key) a = mid + 1;
            else b = mid;
        }
        found[i] = (unsigned char)(a < end && okey(values, t, a) == key);
        pos[i] = (unsigned)a;
    }
}

// IntersectCount. desc holds, for `ways` ways, the pointers of their values, lo and hi
// columns and the lengths of their values: desc[w], desc[ways + w], desc[2 ways + w],
// desc[3 ways + w].
#define IC_MAX_WAYS 16

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

// Counts the candidates (row r, k-th value of its lead's range) whose value lies in the
// range of every other way of row r (binary search). Candidates are load-balanced as in
// expand_write: a block takes a tile of EXPAND_TILE of them, whatever rows they belong
// to. The block's count is added to *out.
extern "C" __global__ void __launch_bounds__(BLOCK)
    ic_count(const u64* desc, int ways, int t, const u64* offsets, const unsigned char* lead, u64 n, u64 total,
             u64* out) {
    __shared__ u64 s_r0, s_r1;
    __shared__ u64 s_desc[3 * IC_MAX_WAYS];
    __shared__ u64 s_warp[BLOCK / 32];
    u64 t0 = (u64)blockIdx.x * EXPAND_TILE;
    if (t0 >= total) return;
    u64 t1 = min(t0 + EXPAND_TILE, total);
    tile_rows(offsets, n, t0, t1, &s_r0, &s_r1);
    if (threadIdx.x < 3 * ways) s_desc[threadIdx.x] = desc[threadIdx.x];
    __syncthreads();
    u64 r0 = s_r0, r1 = s_r1;
    unsigned cnt = 0;
#pragma unroll
    for (int it = 0; it < EXPAND_ITEMS; ++it) {
        u64 o = t0 + (u64)it * BLOCK + threadIdx.x;
        if (o < t1) {
            u64 r = owner(offsets, r0, r1, o);
            int l = lead[r];
            unsigned pos = ((const unsigned*)s_desc[ways + l])[r] + (unsigned)(o - offsets[r]);
            u64 key = okey((const void*)s_desc[l], t, pos);
            bool all = true;
            for (int w = 0; w < ways && all; ++w) {
                if (w == l) continue;
                const void* vals = (const void*)s_desc[w];
                u64 a = ((const unsigned*)s_desc[ways + w])[r];
                u64 end = ((const unsigned*)s_desc[2 * ways + w])[r];
                u64 b = end;
                while (a < b) {
                    u64 mid = a + (b - a) / 2;
                    if (okey(vals, t, mid) < key) a = mid + 1;
                    else b = mid;
                }
                all = a < end && okey(vals, t, a) == key;
            }
            cnt += all ? 1u : 0u;
        }
    }
    for (int d = 16; d > 0; d >>= 1) cnt += __shfl_down_sync(0xffffffffu, cnt, d);
    if ((threadIdx.x & 31) == 0) s_warp[threadIdx.x >> 5] = cnt;
    __syncthreads();
    if (threadIdx.x == 0) {
        u64 sum = 0;
        for (int w = 0; w < BLOCK / 32; ++w) sum += s_warp[w];
        if (sum) atomicAdd((unsigned long long*)out, (unsigned long long)sum);
    }
}

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
// s's range fits a table (at most `cap` values) and is not much smaller than the candidates,
// otherwise searched as in ic_work (work_b, lead_b). A range outside its values is error
// code 1 (detail: lo, row: the row).
extern "C" __global__ void ic_split(const u64* desc, int ways, int s, u64 n, unsigned cap, u64* work_h,
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
        bool hashed = !bad && best > 0 && shared <= cap && other <= 8 * shared;
        work_h[i] = hashed ? other : 0;
        lead_h[i] = (unsigned char)ow;
        work_b[i] = (hashed || bad) ? 0 : best;
        lead_b[i] = (unsigned char)bw;
    }
}

#define ICH_ITEMS 32
#define ICH_TILE (BLOCK * ICH_ITEMS)

template <typename K>
__device__ __forceinline__ unsigned ich_hash(K key, int bits) {
    if (sizeof(K) == 4) return ((unsigned)key * 2654435769u) >> (32 - bits);
    return (unsigned)(((u64)key * 0x9E3779B97F4A7C15ull) >> (64 - bits));
}

// Counts the hashed candidates of a tile of ICH_TILE of them. The tile's rows are cut into
// segments of equal way-s ranges; per segment the block fills the table with way s's values,
// then each thread looks up its own consecutive candidates (and searches the ways other than
// s and the lead). Keys equal to the empty marker are remembered apart.
template <typename K, int CAP>
__device__ __forceinline__ void ic_hash_impl(const u64* desc, int ways, int t, int s, const u64* offsets,
                                             const unsigned char* lead, u64 n, u64 total, u64* out) {
    __shared__ K table[2 * CAP];
    __shared__ u64 s_desc[3 * IC_MAX_WAYS];
    __shared__ u64 s_r0, s_r1, s_next;
    __shared__ int s_marked;
    __shared__ u64 s_warp[BLOCK / 32];
    const K EMPTY = (K)~(K)0;
    const u64 t0 = (u64)blockIdx.x * ICH_TILE;
    if (t0 >= total) return;
    const u64 t1 = min(t0 + ICH_TILE, total);
    tile_rows(offsets, n, t0, t1, &s_r0, &s_r1);
    if (threadIdx.x < 3 * ways) s_desc[threadIdx.x] = desc[threadIdx.x];
    __syncthreads();
    const u64 r1 = s_r1;
    const unsigned* lo_s = (const unsigned*)s_desc[ways + s];
    const unsigned* hi_s = (const unsigned*)s_desc[2 * ways + s];
    const void* vals_s = (const void*)s_desc[s];
    // This thread's candidates.
    const u64 a = min(t0 + (u64)threadIdx.x * ICH_ITEMS, t1);
    const u64 b = min(a + ICH_ITEMS, t1);
    unsigned cnt = 0;
    u64 row = s_r0;
    while (true) {
        const unsigned klo = lo_s[row], khi = hi_s[row];
        // The segment ends at the first row after `row` with another range (or the tile's end).
        if (threadIdx.x == 0) s_next = r1;
        __syncthreads();
        for (u64 base = row + 1; base < r1; base += BLOCK) {
            u64 r = base + threadIdx.x;
            bool diff = r < r1 && (lo_s[r] != klo || hi_s[r] != khi);
            if (diff) atomicMin((unsigned long long*)&s_next, (unsigned long long)r);
            if (__syncthreads_or(diff)) break;
        }
        const u64 next = s_next;
        const u64 cs = max(t0, offsets[row]);
        const u64 ce = next < r1 ? offsets[next] : t1;
        if (cs < ce) {
            const unsigned m = khi - klo;
            int bits = 5;
            while ((1u << bits) < 2 * m) ++bits;
            const unsigned mask = (1u << bits) - 1;
            for (unsigned i = threadIdx.x; i <= mask; i += BLOCK) table[i] = EMPTY;
            if (threadIdx.x == 0) s_marked = 0;
            __syncthreads();
            for (unsigned i = threadIdx.x; i < m; i += BLOCK) {
                K key = (K)okey(vals_s, t, (u64)klo + i);
                if (key == EMPTY) {
                    s_marked = 1;
                    continue;
                }
                unsigned h = ich_hash<K>(key, bits);
                while (atomicCAS(&table[h], EMPTY, key) != EMPTY) h = (h + 1) & mask;
            }
            __syncthreads();
            const u64 o0 = max(a, cs), o1 = min(b, ce);
            if (o0 < o1) {
                u64 r = owner(offsets, row, next, o0);
                u64 rend = r + 1 < n ? offsets[r + 1] : total;
                int l = lead[r];
                const void* vals_l = (const void*)s_desc[l];
                u64 base = (u64)((const unsigned*)s_desc[ways + l])[r] - offsets[r];
                for (u64 o = o0; o < o1; ++o) {
                    while (o >= rend) {
                        ++r;
                        rend = r + 1 < n ? offsets[r + 1] : total;
                        l = lead[r];
                        vals_l = (const void*)s_desc[l];
                        base = (u64)((const unsigned*)s_desc[ways + l])[r] - offsets[r];
                    }
                    const u64 key = okey(vals_l, t, base + o);
                    bool hit;
                    if ((K)key == EMPTY) {
                        hit = s_marked != 0;
                    } else {
                        unsigned h = ich_hash<K>((K)key, bits);
                        while (true) {
                            K v = table[h];
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
                    for (int w = 0; w < ways && hit; ++w) {
                        if (w == s || w == l) continue;
                        const void* vals = (const void*)s_desc[w];
                        u64 lo = ((const unsigned*)s_desc[ways + w])[r];
                        u64 end = ((const unsigned*)s_desc[2 * ways + w])[r];
                        u64 hi = end;
                        while (lo < hi) {
                            u64 mid = lo + (hi - lo) / 2;
                            if (okey(vals, t, mid) < key) lo = mid + 1;
                            else hi = mid;
                        }
                        hit = lo < end && okey(vals, t, lo) == key;
                    }
                    cnt += hit ? 1u : 0u;
                }
            }
        }
        __syncthreads();
        if (next >= r1) break;
        row = next;
    }
    for (int d = 16; d > 0; d >>= 1) cnt += __shfl_down_sync(0xffffffffu, cnt, d);
    if ((threadIdx.x & 31) == 0) s_warp[threadIdx.x >> 5] = cnt;
    __syncthreads();
    if (threadIdx.x == 0) {
        u64 sum = 0;
        for (int w = 0; w < BLOCK / 32; ++w) sum += s_warp[w];
        if (sum) atomicAdd((unsigned long long*)out, (unsigned long long)sum);
    }
}

// Values of at most 32 bits (type codes 0 to 2), ranges of way s of at most 4096 values.
extern "C" __global__ void __launch_bounds__(BLOCK)
    ic_hash32(const u64* desc, int ways, int t, int s, const u64* offsets, const unsigned char* lead, u64 n,
              u64 total, u64* out) {
    ic_hash_impl<unsigned, 4096>(desc, ways, t, s, offsets, lead, n, total, out);
}

// 64-bit values, ranges of way s of at most 2048 values.
extern "C" __global__ void __launch_bounds__(BLOCK)
    ic_hash64(const u64* desc, int ways, int t, int s, const u64* offsets, const unsigned char* lead, u64 n,
              u64 total, u64* out) {
    ic_hash_impl<u64, 2048>(desc, ways, t, s, offsets, lead, n, total, out);
}

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

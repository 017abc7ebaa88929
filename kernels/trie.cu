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

// Load-balanced expansion: for every output o < total, parent[o] = the row r whose range
// [offsets[r], offsets[r+1]) holds o, and pos[o] = lo[r] + (o - offsets[r]). A block
// handles a tile of EXPAND_TILE outputs; thread 0 finds the rows owning the tile's first
// and last outputs, and each output then searches only between them.
extern "C" __global__ void __launch_bounds__(BLOCK)
    expand_write(const unsigned* lo, const u64* offsets, u64 n, u64 total, unsigned* parent, unsigned* pos) {
    __shared__ u64 s_r0, s_r1;
    u64 t0 = (u64)blockIdx.x * EXPAND_TILE;
    if (t0 >= total) return;
    u64 t1 = min(t0 + EXPAND_TILE, total);
    tile_rows(offsets, n, t0, t1, &s_r0, &s_r1);
    __syncthreads();
    u64 r0 = s_r0, r1 = s_r1;
#pragma unroll
    for (int it = 0; it < EXPAND_ITEMS; ++it) {
        u64 o = t0 + (u64)it * BLOCK + threadIdx.x;
        if (o < t1) {
            u64 r = owner(offsets, r0, r1, o);
            parent[o] = (unsigned)r;
            pos[o] = lo[r] + (unsigned)(o - offsets[r]);
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

// ReduceByKey: segment flags, then per segment count, exact integer/decimal sum and
// average (128-bit), float sum and average (sequential per segment, the order fox-cpu
// adds in), min and max (first best row, strings by rank).
//
// Large segments are cut into pieces of PIECE rows; one warp reduces a piece into a
// partial (exact 128-bit sum, or best key and row), and one warp per segment then
// combines its pieces (exact sums and first-best rows do not depend on the order).
//
// Sums of i128 values (38-digit decimals) must fail exactly where fox-cpu's checked
// running sum does, which depends on the row order: each piece also sums the magnitudes
// (saturating), and a segment whose magnitudes add up beyond i128 (so that some running
// sum might leave it) is summed once more by one thread in row order with checked
// additions. Otherwise no running sum can overflow and the wrapped 128-bit sum is exact.
//
// Type codes: those of common.cuh (in key descriptors an i128 is two words, T_I128 and
// T_I128_LO). Error codes: 1 the result does not fit the output type, 2 a string code
// outside the rank table.

#include "common.cuh"

#define PIECE 1024

// out[start + t] = v_t for t < n (n <= 16).
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

// flags[i] = 1 where row i differs from row i-1 in any of the k key columns (row 0: 1).
// desc: k type codes, then k column pointers.
extern "C" __global__ void seg_flags(const u64* desc, int k, u64 n, unsigned char* flags) {
    extern __shared__ u64 sd[];
    for (int t = threadIdx.x; t < 2 * k; t += blockDim.x) sd[t] = desc[t];
    __syncthreads();
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        bool f = i == 0;
        for (int c = 0; c < k && !f; ++c) {
            const void* p = (const void*)sd[k + c];
            int t = (int)sd[c];
            f = okey(p, t, i) != okey(p, t, i - 1);
        }
        flags[i] = (unsigned char)f;
    }
}

__device__ __forceinline__ u64 seg_end(const unsigned* starts, u64 g, u64 ng, u64 n) {
    return g + 1 < ng ? (u64)starts[g + 1] : n;
}

// pieces[g] = ceil(len_g / PIECE).
extern "C" __global__ void seg_pieces(const unsigned* starts, u64 ng, u64 n, u64* pieces) {
    for (u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x; g < ng; g += (u64)gridDim.x * blockDim.x) {
        u64 len = seg_end(starts, g, ng, n) - starts[g];
        pieces[g] = (len + PIECE - 1) / PIECE;
    }
}

// The segment owning piece p: the last g with poff[g] <= p (p itself when every segment
// is one piece).
__device__ __forceinline__ u64 piece_owner(const u64* poff, u64 ng, u64 np, u64 p) {
    return np == ng ? p : owner(poff, 0, ng, p);
}

// The rows [*a, *b) of piece p.
__device__ __forceinline__ void piece_rows(const unsigned* starts, const u64* poff, u64 ng, u64 np, u64 n, u64 p,
                                           u64* a, u64* b) {
    u64 g = piece_owner(poff, ng, np, p);
    u64 s = (u64)starts[g] + (p - poff[g]) * PIECE;
    *a = s;
    *b = min(s + PIECE, seg_end(starts, g, ng, n));
}

__device__ __forceinline__ i128 shfl_down_i128(i128 v, int d) {
    u64 lo = (u64)v, hi = (u64)((u128)v >> 64);
    lo = __shfl_down_sync(0xffffffffu, lo, d);
    hi = __shfl_down_sync(0xffffffffu, hi, d);
    return (i128)(((u128)hi << 64) | lo);
}

// One warp per piece: the exact sum of an i32 (T_I32) or i64 (T_I64) column over the
// piece, as two u64 words (low, high) in partial[2p], partial[2p+1].
extern "C" __global__ void __launch_bounds__(BLOCK)
    piece_sum(const void* col, int t, const unsigned* starts, const u64* poff, u64 ng, u64 n, u64 np,
              u64* partial) {
    u64 p = ((u64)blockIdx.x * BLOCK + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (p >= np) return;
    u64 a, b;
    piece_rows(starts, poff, ng, np, n, p, &a, &b);
    i128 s = 0;
    if (t == T_I32) {
        const int* v = (const int*)col;
        for (u64 i = a + lane; i < b; i += 32) s += (i128)v[i];
    } else {
        const long long* v = (const long long*)col;
        for (u64 i = a + lane; i < b; i += 32) s += (i128)v[i];
    }
    for (int d = 16; d > 0; d >>= 1) s += shfl_down_i128(s, d);
    if (lane == 0) {
        partial[2 * p] = (u64)s;
        partial[2 * p + 1] = (u64)((u128)s >> 64);
    }
}

// The order-preserving image of i128 value i (sign bit flipped).
__device__ __forceinline__ u128 okey128(const void* p, u64 i) {
    const u64* w = (const u64*)p;
    return ((u128)(w[2 * i + 1] ^ 0x8000000000000000ull) << 64) | (u128)w[2 * i];
}

// The comparison key of row i of an i128 column.
__device__ __forceinline__ bool mm_key(const void* col, int t, const unsigned* rank, u64 nrank, u64 i, u128* key,
                                       u64* err) {
    *key = okey128(col, i);
    return true;
}

// The comparison key of row i: the order-preserving image of the value, or for strings
// (rank != 0) the rank of its code.
__device__ __forceinline__ bool mm_key(const void* col, int t, const unsigned* rank, u64 nrank, u64 i, u64* key,
                                       u64* err) {
    if (rank != 0) {
        unsigned code = ((const unsigned*)col)[i];
        if ((u64)code >= nrank) {
            set_err(err, 2, i, code);
            return false;
        }
        *key = rank[code];
        return true;
    }
    *key = okey(col, t, i);
    return true;
}

// (k1, i1) replaces (k0, i0) when its key is strictly better, or equal at an earlier row.
template <typename K>
__device__ __forceinline__ bool mm_better(int is_max, K k1, u64 i1, K k0, u64 i0) {
    if (k1 != k0) return is_max ? k1 > k0 : k1 < k0;
    return i1 < i0;
}

__device__ __forceinline__ u64 shfl_down_key(u64 v, int d) { return __shfl_down_sync(0xffffffffu, v, d); }

__device__ __forceinline__ u128 shfl_down_key(u128 v, int d) {
    const u64 lo = __shfl_down_sync(0xffffffffu, (u64)v, d);
    const u64 hi = __shfl_down_sync(0xffffffffu, (u64)(v >> 64), d);
    return ((u128)hi << 64) | lo;
}

// The warp's best (key, row) in lane 0; a row of ~0 means none.
template <typename K>
__device__ __forceinline__ void warp_best(int is_max, int lane, K* bk, u64* bi) {
    for (int d = 16; d > 0; d >>= 1) {
        K ok = shfl_down_key(*bk, d);
        u64 oi = __shfl_down_sync(0xffffffffu, *bi, d);
        if (lane + d < 32 && oi != ~0ull && (*bi == ~0ull || mm_better<K>(is_max, ok, oi, *bk, *bi))) {
            *bk = ok;
            *bi = oi;
        }
    }
}

// A piece's partial of min/max: its best key and row, in 2 words (u64 key, row) or 3
// (i128 key: low word, high word, row).
__device__ __forceinline__ void put_best(u64* partial, u64 p, u64 k, u64 i) {
    partial[2 * p] = k;
    partial[2 * p + 1] = i;
}

__device__ __forceinline__ void put_best(u64* partial, u64 p, u128 k, u64 i) {
    partial[3 * p] = (u64)k;
    partial[3 * p + 1] = (u64)(k >> 64);
    partial[3 * p + 2] = i;
}

__device__ __forceinline__ void get_best(const u64* partial, u64 p, u64* k, u64* i) {
    *k = partial[2 * p];
    *i = partial[2 * p + 1];
}

__device__ __forceinline__ void get_best(const u64* partial, u64 p, u128* k, u64* i) {
    *k = ((u128)partial[3 * p + 1] << 64) | partial[3 * p];
    *i = partial[3 * p + 2];
}

// One warp per piece: the best key of the piece and the first row holding it, in the
// piece's partial (see put_best). K is u128 for i128 columns, else u64.
template <typename K>
__device__ __forceinline__ void piece_minmax_impl(const void* col, int t, const unsigned* rank, u64 nrank, int is_max,
                                                  const unsigned* starts, const u64* poff, u64 ng, u64 n, u64 np,
                                                  u64* partial, u64* err) {
    u64 p = ((u64)blockIdx.x * BLOCK + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (p >= np) return;
    u64 a, b;
    piece_rows(starts, poff, ng, np, n, p, &a, &b);
    K bk = 0;
    u64 bi = ~0ull;
    for (u64 i = a + lane; i < b; i += 32) {
        K k;
        if (!mm_key(col, t, rank, nrank, i, &k, err)) continue;
        if (bi == ~0ull || mm_better<K>(is_max, k, i, bk, bi)) {
            bk = k;
            bi = i;
        }
    }
    warp_best<K>(is_max, lane, &bk, &bi);
    if (lane == 0) put_best(partial, p, bk, bi);
}

extern "C" __global__ void __launch_bounds__(BLOCK)
    piece_minmax(const void* col, int t, const unsigned* rank, u64 nrank, int is_max, const unsigned* starts,
                 const u64* poff, u64 ng, u64 n, u64 np, u64* partial, u64* err) {
    piece_minmax_impl<u64>(col, t, rank, nrank, is_max, starts, poff, ng, n, np, partial, err);
}

// As piece_minmax for an i128 column (no rank table).
extern "C" __global__ void __launch_bounds__(BLOCK)
    piece_minmax_wide(const void* col, int is_max, const unsigned* starts, const u64* poff, u64 ng, u64 n, u64 np,
                      u64* partial) {
    piece_minmax_impl<u128>(col, 6, 0, 0, is_max, starts, poff, ng, n, np, partial, 0);
}

// One warp per segment: the first best row over the segment's pieces.
template <typename K>
__device__ __forceinline__ void seg_minmax_impl(const u64* partial, const u64* poff, u64 ng, u64 np, int is_max,
                                                unsigned* best) {
    const int lane = threadIdx.x & 31;
    const u64 nwarps = ((u64)gridDim.x * blockDim.x) >> 5;
    for (u64 g = ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; g < ng; g += nwarps) {
        u64 p0 = poff[g], p1 = g + 1 < ng ? poff[g + 1] : np;
        K bk = 0;
        u64 bi = ~0ull;
        for (u64 p = p0 + lane; p < p1; p += 32) {
            K k;
            u64 i;
            get_best(partial, p, &k, &i);
            if (i != ~0ull && (bi == ~0ull || mm_better<K>(is_max, k, i, bk, bi))) {
                bk = k;
                bi = i;
            }
        }
        warp_best<K>(is_max, lane, &bk, &bi);
        if (lane == 0) best[g] = (unsigned)bi;
    }
}

extern "C" __global__ void seg_minmax(const u64* partial, const u64* poff, u64 ng, u64 np, int is_max,
                                      unsigned* best) {
    seg_minmax_impl<u64>(partial, poff, ng, np, is_max, best);
}

extern "C" __global__ void seg_minmax_wide(const u64* partial, const u64* poff, u64 ng, u64 np, int is_max,
                                           unsigned* best) {
    seg_minmax_impl<u128>(partial, poff, ng, np, is_max, best);
}

// One thread per segment, for segments of at most PIECE rows: the first best row of the
// segment (a u64 key: numbers, or strings by rank), as seg_minmax gives it from pieces.
extern "C" __global__ void seg_minmax_rows(const void* col, int t, const unsigned* rank, u64 nrank, int is_max,
                                           const unsigned* starts, u64 ng, u64 n, unsigned* best, u64* err) {
    for (u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x; g < ng; g += (u64)gridDim.x * blockDim.x) {
        u64 a = starts[g], b = seg_end(starts, g, ng, n);
        u64 bk = 0, bi = ~0ull;
        for (u64 i = a; i < b; ++i) {
            u64 k;
            if (!mm_key(col, t, rank, nrank, i, &k, err)) continue;
            if (bi == ~0ull || mm_better<u64>(is_max, k, i, bk, bi)) {
                bk = k;
                bi = i;
            }
        }
        best[g] = (unsigned)bi;
    }
}

__device__ __forceinline__ u128 uabs(i128 x) { return x < 0 ? (u128)0 - (u128)x : (u128)x; }

// The largest magnitude of a 38-digit decimal, 10^38 - 1.
#define MAX_WIDE ((((u128)0x4b3b4ca85a86c47aull) << 64) | (u128)0x098a223fffffffffull)
// The largest magnitude of an 18-digit decimal, 10^18 - 1.
#define MAX_DEC ((i128)999999999999999999ll)

// Stores x into out[g] as output kind ok (0 u8, 1 i32, 2 u32, 3 i64, 4 u64, 5 i128 of at
// most 38 digits, 6 i64 of at most 18 digits); false when it does not fit.
__device__ __forceinline__ bool store_int(void* out, int ok, u64 g, i128 x) {
    switch (ok) {
    case 0:
        if (x < 0 || x > 255) return false;
        ((unsigned char*)out)[g] = (unsigned char)x;
        return true;
    case 1:
        if (x < -(i128)2147483648ll || x > (i128)2147483647ll) return false;
        ((int*)out)[g] = (int)x;
        return true;
    case 2:
        if (x < 0 || x > (i128)0xffffffffull) return false;
        ((unsigned*)out)[g] = (unsigned)x;
        return true;
    case 3:
        if (x < -(i128)0x7fffffffffffffffll - 1 || x > (i128)0x7fffffffffffffffll) return false;
        ((long long*)out)[g] = (long long)x;
        return true;
    case 4:
        if (x < 0 || x > (i128)0xffffffffffffffffull) return false;
        ((u64*)out)[g] = (u64)x;
        return true;
    case 6:
        if (x < -MAX_DEC || x > MAX_DEC) return false;
        ((long long*)out)[g] = (long long)x;
        return true;
    default:
        if (uabs(x) > MAX_WIDE) return false;
        ((i128*)out)[g] = x;
        return true;
    }
}

// One thread per segment: the number of rows, stored as output kind ok (error code 1).
extern "C" __global__ void seg_count(const unsigned* starts, u64 ng, u64 n, int ok, void* out, u64* err) {
    for (u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x; g < ng; g += (u64)gridDim.x * blockDim.x) {
        u64 len = seg_end(starts, g, ng, n) - starts[g];
        if (!store_int(out, ok, g, (i128)len)) set_err(err, 1, starts[g], g);
    }
}

// Checked 128-bit multiplication.
__device__ __forceinline__ bool mul_i128(i128 a, i128 b, i128* r) {
    if (a == 0 || b == 0) {
        *r = 0;
        return true;
    }
    u128 ua = uabs(a), ub = uabs(b);
    bool neg = (a < 0) != (b < 0);
    u128 lim = neg ? ((u128)1 << 127) : (((u128)1 << 127) - 1);
    if (ua > lim / ub) return false;
    u128 prod = ua * ub;
    if (prod > lim) return false;
    *r = neg ? (i128)((u128)0 - prod) : (i128)prod;
    return true;
}

// n / d rounded half away from zero (d > 0 here).
__device__ __forceinline__ i128 div_round_half_away(i128 n, i128 d) {
    i128 q = n / d;
    i128 r = n % d;
    if (r != 0 && uabs(r) >= uabs(d) - uabs(r)) return ((n < 0) != (d < 0)) ? q - 1 : q + 1;
    return q;
}

// Stores the exact sum s of segment g (is_avg == 0) or its average,
// `round_half_away(s * mul / (count? * div))` with mul = 10^(out_scale - in_scale) or
// div = 10^(in_scale - out_scale) (one of them is 1), as output kind ok. Error code 1 at
// the segment's first row when it does not fit.
__device__ __forceinline__ void finish_sum(i128 s, const unsigned* starts, u64 g, u64 ng, u64 n, int is_avg,
                                           i128 mul, i128 div, int ok, void* out, u64* err) {
    i128 count = (i128)(seg_end(starts, g, ng, n) - starts[g]);
    i128 num, den;
    bool okm = mul_i128(s, mul, &num);
    if (is_avg) okm = okm && mul_i128(count, div, &den);
    else den = div;
    if (!okm || !store_int(out, ok, g, div_round_half_away(num, den))) set_err(err, 1, starts[g], g);
}

// One warp per segment: the exact sum (is_avg == 0) or average of its pieces' partial
// sums (see finish_sum).
extern "C" __global__ void seg_sum(const u64* partial, const u64* poff, const unsigned* starts, u64 ng, u64 n,
                                   u64 np, int is_avg, u64 mul_lo, u64 mul_hi, u64 div_lo, u64 div_hi, int ok,
                                   void* out, u64* err) {
    i128 mul = (i128)(((u128)mul_hi << 64) | mul_lo);
    i128 div = (i128)(((u128)div_hi << 64) | div_lo);
    const int lane = threadIdx.x & 31;
    const u64 nwarps = ((u64)gridDim.x * blockDim.x) >> 5;
    for (u64 g = ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; g < ng; g += nwarps) {
        u64 p0 = poff[g], p1 = g + 1 < ng ? poff[g + 1] : np;
        i128 s = 0;
        for (u64 p = p0 + lane; p < p1; p += 32) s += (i128)(((u128)partial[2 * p + 1] << 64) | partial[2 * p]);
        for (int d = 16; d > 0; d >>= 1) s += shfl_down_i128(s, d);
        if (lane != 0) continue;
        finish_sum(s, starts, g, ng, n, is_avg, mul, div, ok, out, err);
    }
}

// One thread per segment, for segments of at most PIECE rows (every segment one piece):
// the exact sum of an i32 (T_I32) or i64 (T_I64) column over the segment's rows, finished
// as seg_sum finishes the sum of its pieces. With many short segments (many groups) this
// reads each row once without a warp per piece and per segment.
extern "C" __global__ void seg_sum_rows(const void* col, int t, const unsigned* starts, u64 ng, u64 n, int is_avg,
                                        u64 mul_lo, u64 mul_hi, u64 div_lo, u64 div_hi, int ok, void* out,
                                        u64* err) {
    i128 mul = (i128)(((u128)mul_hi << 64) | mul_lo);
    i128 div = (i128)(((u128)div_hi << 64) | div_lo);
    for (u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x; g < ng; g += (u64)gridDim.x * blockDim.x) {
        u64 a = starts[g], b = seg_end(starts, g, ng, n);
        i128 s = 0;
        if (t == T_I32) {
            const int* v = (const int*)col;
            for (u64 i = a; i < b; ++i) s += (i128)v[i];
        } else {
            const long long* v = (const long long*)col;
            for (u64 i = a; i < b; ++i) s += (i128)v[i];
        }
        finish_sum(s, starts, g, ng, n, is_avg, mul, div, ok, out, err);
    }
}

// a + b, saturating at the largest u128.
__device__ __forceinline__ u128 sat_add(u128 a, u128 b) {
    const u128 s = a + b;
    return s < a ? ~(u128)0 : s;
}

__device__ __forceinline__ u128 shfl_down_u128(u128 v, int d) {
    u64 lo = (u64)v, hi = (u64)(v >> 64);
    lo = __shfl_down_sync(0xffffffffu, lo, d);
    hi = __shfl_down_sync(0xffffffffu, hi, d);
    return ((u128)hi << 64) | lo;
}

// One warp per piece of an i128 column: the wrapped 128-bit sum of the piece's values and
// the saturating sum of their magnitudes, as four u64 words (sum low, high, magnitudes
// low, high) in partial[4p ..].
extern "C" __global__ void __launch_bounds__(BLOCK)
    piece_sum_wide(const u64* col, const unsigned* starts, const u64* poff, u64 ng, u64 n, u64 np, u64* partial) {
    u64 p = ((u64)blockIdx.x * BLOCK + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (p >= np) return;
    u64 a, b;
    piece_rows(starts, poff, ng, np, n, p, &a, &b);
    u128 s = 0, m = 0;
    for (u64 i = a + lane; i < b; i += 32) {
        const u128 v = ((u128)col[2 * i + 1] << 64) | col[2 * i];
        s += v;
        m = sat_add(m, uabs((i128)v));
    }
    for (int d = 16; d > 0; d >>= 1) {
        s += shfl_down_u128(s, d);
        m = sat_add(m, shfl_down_u128(m, d));
    }
    if (lane == 0) {
        partial[4 * p] = (u64)s;
        partial[4 * p + 1] = (u64)(s >> 64);
        partial[4 * p + 2] = (u64)m;
        partial[4 * p + 3] = (u64)(m >> 64);
    }
}

// As seg_sum over the partials of piece_sum_wide. When the magnitudes of a segment add up
// to more than the largest i128, lane 0 sums the segment again in row order, failing
// (error code 1) at the first running sum outside i128, as fox-cpu's checked sum does.
extern "C" __global__ void seg_sum_wide(const u64* col, const u64* partial, const u64* poff, const unsigned* starts,
                                        u64 ng, u64 n, u64 np, int is_avg, u64 mul_lo, u64 mul_hi, u64 div_lo,
                                        u64 div_hi, int ok, void* out, u64* err) {
    i128 mul = (i128)(((u128)mul_hi << 64) | mul_lo);
    i128 div = (i128)(((u128)div_hi << 64) | div_lo);
    const u128 i128_max = ((u128)1 << 127) - 1;
    const int lane = threadIdx.x & 31;
    const u64 nwarps = ((u64)gridDim.x * blockDim.x) >> 5;
    for (u64 g = ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; g < ng; g += nwarps) {
        u64 p0 = poff[g], p1 = g + 1 < ng ? poff[g + 1] : np;
        u128 s = 0, m = 0;
        for (u64 p = p0 + lane; p < p1; p += 32) {
            s += ((u128)partial[4 * p + 1] << 64) | partial[4 * p];
            m = sat_add(m, ((u128)partial[4 * p + 3] << 64) | partial[4 * p + 2]);
        }
        for (int d = 16; d > 0; d >>= 1) {
            s += shfl_down_u128(s, d);
            m = sat_add(m, shfl_down_u128(m, d));
        }
        if (lane != 0) continue;
        if (m > i128_max) {
            // Some running sum may leave i128: check them all, in row order.
            const u64 e = seg_end(starts, g, ng, n);
            i128 acc = 0;
            bool over = false;
            for (u64 i = starts[g]; i < e && !over; ++i) {
                const i128 v = (i128)(((u128)col[2 * i + 1] << 64) | col[2 * i]);
                const i128 r = (i128)((u128)acc + (u128)v);
                over = ((acc ^ r) & (v ^ r)) < 0;
                acc = r;
            }
            if (over) {
                set_err(err, 1, starts[g], g);
                continue;
            }
            s = (u128)acc;
        }
        finish_sum((i128)s, starts, g, ng, n, is_avg, mul, div, ok, out, err);
    }
}

// One thread per segment: the float sum in row order (the order fox-cpu adds in), divided
// by the row count for an average.
extern "C" __global__ void seg_fsum(const double* v, const unsigned* starts, u64 ng, u64 n, int is_avg, double* out) {
    for (u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x; g < ng; g += (u64)gridDim.x * blockDim.x) {
        u64 a = starts[g], b = seg_end(starts, g, ng, n);
        double s = -0.0;
        for (u64 i = a; i < b; ++i) s = __dadd_rn(s, v[i]);
        out[g] = is_avg ? __ddiv_rn(s, (double)(b - a)) : s;
    }
}

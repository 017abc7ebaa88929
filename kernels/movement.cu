// Data movement: gather (with a shift and a bounds check), range counts of the leapfrog
// triejoin levels, the routing of rows over devices, and packed columns widened as they
// are uploaded. Concat and Slice are device-to-device copies issued by the host.
//
// Errors go to the error word of common.cuh (`report_err`), keyed by the failing key;
// their codes, ERR_INDEX and ERR_RANGE, come with the prelude (k_move.rs).

#include "common.cuh"

// out[i] = col[idx[i] + shift] for i < n. An index at or beyond col_len records
// (column << 40 | row) in the error word and writes 0. Four indices per step (one 16-byte
// load of idx), grid-stride. T is a 1-, 4-, 8- or 16-byte element (uint4 for i128).
template <typename T>
__device__ __forceinline__ void gather_impl(T* __restrict__ out, const T* __restrict__ col,
                                            const u32* __restrict__ idx, u64 n, u32 shift, u64 col_len,
                                            u64 column, u64* err) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    const u64 nvec = n / 4;
    const uint4* idx4 = reinterpret_cast<const uint4*>(idx);
    for (u64 v = (u64)blockIdx.x * blockDim.x + threadIdx.x; v < nvec; v += stride) {
        uint4 k = __ldg(&idx4[v]);
        u64 p[4] = {(u64)k.x + shift, (u64)k.y + shift, (u64)k.z + shift, (u64)k.w + shift};
        T r[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            if (p[j] < col_len) {
                r[j] = col[p[j]];
            } else {
                r[j] = T();
                report_err(err, ERR_INDEX, (column << 40) | (v * 4 + j));
            }
        }
#pragma unroll
        for (int j = 0; j < 4; j++) out[v * 4 + j] = r[j];
    }
    for (u64 i = nvec * 4 + (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        u64 p = (u64)__ldg(&idx[i]) + shift;
        if (p < col_len) {
            out[i] = col[p];
        } else {
            out[i] = T();
            report_err(err, ERR_INDEX, (column << 40) | i);
        }
    }
}

extern "C" __global__ void gather_u8(unsigned char* out, const unsigned char* col, const u32* idx, u64 n,
                                     u32 shift, u64 col_len, u64 column, u64* err) {
    gather_impl<unsigned char>(out, col, idx, n, shift, col_len, column, err);
}

extern "C" __global__ void gather_u32(u32* out, const u32* col, const u32* idx, u64 n, u32 shift, u64 col_len,
                                      u64 column, u64* err) {
    gather_impl<u32>(out, col, idx, n, shift, col_len, column, err);
}

extern "C" __global__ void gather_u64(u64* out, const u64* col, const u32* idx, u64 n, u32 shift, u64 col_len,
                                      u64 column, u64* err) {
    gather_impl<u64>(out, col, idx, n, shift, col_len, column, err);
}

// 16-byte elements (i128).
extern "C" __global__ void gather_u128(uint4* out, const uint4* col, const u32* idx, u64 n, u32 shift, u64 col_len,
                                       u64 column, u64* err) {
    gather_impl<uint4>(out, col, idx, n, shift, col_len, column, err);
}

// out[i] = hi[i] - lo[i] as u64. A row with hi < lo records its index in the error word
// (code ERR_RANGE) and writes 0.
extern "C" __global__ void range_count(u64* __restrict__ out, const u32* __restrict__ lo,
                                       const u32* __restrict__ hi, u64 n, u64* err) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        u32 a = __ldg(&lo[i]);
        u32 b = __ldg(&hi[i]);
        if (b >= a) {
            out[i] = (u64)(b - a);
        } else {
            out[i] = 0;
            report_err(err, ERR_RANGE, i);
        }
    }
}

// Routing of an exchange (fox_kernel::row_hash, device_of): h[i] folds one key column's
// value bits, h = mix64(h ^ mix64(bits)), starting from ROW_HASH_SEED where `first`.
__device__ __forceinline__ u64 route_mix64(u64 z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#define ROW_HASH_SEED 0x243F6A8885A308D3ull

template <typename T, typename Bits>
__device__ __forceinline__ void route_hash_impl(u64* __restrict__ h, const T* __restrict__ col, u64 n, u32 first,
                                                Bits bits) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        u64 prev = first ? ROW_HASH_SEED : h[i];
        h[i] = route_mix64(prev ^ route_mix64(bits(col[i])));
    }
}

struct BitsU8 { __device__ u64 operator()(unsigned char v) const { return (u64)v; } };
struct BitsI32 { __device__ u64 operator()(int v) const { return (u64)(long long)v; } };
struct BitsU32 { __device__ u64 operator()(u32 v) const { return (u64)v; } };
struct BitsU64 { __device__ u64 operator()(u64 v) const { return v; } };
// -0.0 hashes as 0.0 (they compare equal).
struct BitsF64 {
    __device__ u64 operator()(double v) const { return v == 0.0 ? 0ull : (u64)__double_as_longlong(v); }
};
// An i128's low half xor the mixed high half.
struct BitsI128 {
    __device__ u64 operator()(uint4 v) const {
        u64 lo = (u64)v.x | ((u64)v.y << 32);
        u64 hi = (u64)v.z | ((u64)v.w << 32);
        return lo ^ route_mix64(hi);
    }
};

extern "C" __global__ void route_hash_u8(u64* h, const unsigned char* col, u64 n, u32 first) {
    route_hash_impl(h, col, n, first, BitsU8());
}
extern "C" __global__ void route_hash_i32(u64* h, const int* col, u64 n, u32 first) {
    route_hash_impl(h, col, n, first, BitsI32());
}
extern "C" __global__ void route_hash_u32(u64* h, const u32* col, u64 n, u32 first) {
    route_hash_impl(h, col, n, first, BitsU32());
}
extern "C" __global__ void route_hash_u64(u64* h, const u64* col, u64 n, u32 first) {
    route_hash_impl(h, col, n, first, BitsU64());
}
extern "C" __global__ void route_hash_f64(u64* h, const double* col, u64 n, u32 first) {
    route_hash_impl(h, col, n, first, BitsF64());
}
extern "C" __global__ void route_hash_i128(u64* h, const uint4* col, u64 n, u32 first) {
    route_hash_impl(h, col, n, first, BitsI128());
}

// flags[i] = 1 when row i goes to device `d` of `devices` (the high word of h * devices).
extern "C" __global__ void route_flags(unsigned char* __restrict__ flags, const u64* __restrict__ h, u64 n,
                                       u32 devices, u32 d) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        flags[i] = (unsigned char)(__umul64hi(h[i], (u64)devices) == (u64)d);
    }
}

// Rows of a packed database column (fox_runtime::stored::StoredCol), widened on the device:
// `at` holds n offsets of `width` bytes (1, 2 or 4) each.
__device__ __forceinline__ u32 packed_at(const unsigned char* __restrict__ at, u64 i, u32 width) {
    if (width == 1) return at[i];
    if (width == 2) return reinterpret_cast<const unsigned short*>(at)[i];
    return reinterpret_cast<const u32*>(at)[i];
}

// out[i] = base + at[i], an int32 column (wrapping arithmetic: base is the column's least
// value as 64 bits, so the sum is the value).
extern "C" __global__ void widen_i32(int* __restrict__ out, const unsigned char* __restrict__ at, u64 n,
                                     u32 width, u64 base) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = (int)(u32)(base + (u64)packed_at(at, i, width));
    }
}

// out[i] = base + at[i], an int64 column.
extern "C" __global__ void widen_i64(u64* __restrict__ out, const unsigned char* __restrict__ at, u64 n,
                                     u32 width, u64 base) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = base + (u64)packed_at(at, i, width);
    }
}

// out[i] = codes[at[i]], a string column: each row's position among the column's distinct
// dictionary codes (every position is below the number of codes).
extern "C" __global__ void widen_codes(u32* __restrict__ out, const unsigned char* __restrict__ at, u64 n,
                                       u32 width, const u32* __restrict__ codes) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = __ldg(&codes[packed_at(at, i, width)]);
    }
}

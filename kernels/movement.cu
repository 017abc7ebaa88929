// Data movement: gather (with a shift and a bounds check), range counts of the leapfrog
// triejoin levels. Concat and Slice are device-to-device copies issued by the host.
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

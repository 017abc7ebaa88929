// Tile-size sweep of the scan and compaction kernels of kernels/scan.cu, built with nvcc and
// -DSCAN_THREADS/-DSCAN_ITEMS/-DCPT_THREADS/-DCPT_ITEMS (bench/scan_sweep.sh). Times, on
// 2^28 rows: a device copy (the ceiling), the u64 exclusive scan (with its status reset),
// the three-kernel compaction of u32 values by 50% flags as k_scan.rs runs it (count,
// scan of the counts, read of the total, scatter), and a one-pass compaction (counting,
// look-back and scatter in one kernel); every result is checked on the host.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
// The error code fox-cuda puts in the prelude of kernels/scan.cu (k_scan.rs); the tile
// sizes come from the command line.
#define ERR_OVERFLOW 3ULL
#include "kernels/scan.cu"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)

__global__ void fill(u64* c, u32* v, u8* f, u64 n) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        u64 h = (i * 0x9E3779B97F4A7C15ULL) >> 30;
        c[i] = h & 3;
        v[i] = (u32)i;
        f[i] = (h >> 7) & 1;
    }
}

extern "C" __global__ void __launch_bounds__(CPT_THREADS)
    compact_onepass_u32(const u8* __restrict__ flags, const u32* __restrict__ col, u64 n, u32* counter,
                        ulonglong2* status, u32 ntiles, u64* total, u32* __restrict__ out) {
    typedef cub::BlockScan<u64, CPT_THREADS, cub::BLOCK_SCAN_WARP_SCANS> Scan;
    typedef cub::BlockLoad<u32, CPT_THREADS, CPT_ITEMS, cub::BLOCK_LOAD_WARP_TRANSPOSE> Load;
    __shared__ typename Scan::TempStorage scan_storage;
    __shared__ union {
        typename Load::TempStorage load;
        u32 stage[CPT_TILE];
    } smem;
    __shared__ u32 s_tile;
    __shared__ u64 s_prefix;
    __shared__ u32 s_count;
    if (threadIdx.x == 0) s_tile = atomicAdd(counter, 1u);
    __syncthreads();
    const u32 tile = s_tile;
    const u64 base = (u64)tile * CPT_TILE;
    const int valid = (int)min((u64)CPT_TILE, n - base);
    u8 f[CPT_ITEMS];
    load_flags16(flags, base, valid, f);
    u32 c = 0;
#pragma unroll
    for (int j = 0; j < CPT_ITEMS; j++) c += f[j] != 0;
    u32 v[CPT_ITEMS];
    if (valid == CPT_TILE) {
        Load(smem.load).Load(col + base, v);
    } else {
        Load(smem.load).Load(col + base, v, valid, 0u);
    }
    LookBack lb;
    lb.status = status;
    lb.tile = tile;
    lb.ntiles = ntiles;
    lb.total = total;
    u64 pos;
    Scan(scan_storage).ExclusiveScan((u64)c, pos, U64Add(), lb);
    if (threadIdx.x == 0) s_prefix = pos;
    __syncthreads();
    const u64 prefix = s_prefix;
    u32 lp = (u32)(pos - prefix);
#pragma unroll
    for (int j = 0; j < CPT_ITEMS; j++) {
        if (f[j]) smem.stage[lp++] = v[j];
    }
    if (threadIdx.x == CPT_THREADS - 1) s_count = lp;
    __syncthreads();
    const u32 cnt = s_count;
    for (u32 i = threadIdx.x; i < cnt; i += CPT_THREADS) out[prefix + i] = smem.stage[i];
}

template <class F>
float median_ms(int rep, F f) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    f();
    CK(cudaDeviceSynchronize());
    std::vector<float> t;
    for (int r = 0; r < rep; r++) {
        CK(cudaEventRecord(a));
        f();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

int main() {
    const u64 n = 1ull << 28;
    const int rep = 15;
    u64 *counts, *offsets, *total, *err, *status, *ccounts, *coffsets, *ctotal;
    u32 *vals, *out;
    u8* flags;
    const u64 ntiles = (n + SCAN_TILE - 1) / SCAN_TILE;
    const u64 ctiles = (n + CPT_TILE - 1) / CPT_TILE;
    const u64 stiles = (ctiles + SCAN_TILE - 1) / SCAN_TILE;
    const u64 maxt = std::max(ntiles, ctiles);
    CK(cudaMalloc(&counts, n * 8));
    CK(cudaMalloc(&offsets, n * 8));
    CK(cudaMalloc(&total, 64));
    CK(cudaMalloc(&err, 64));
    CK(cudaMalloc(&status, (2 + 2 * maxt) * 8));
    CK(cudaMalloc(&ccounts, ctiles * 8));
    CK(cudaMalloc(&coffsets, ctiles * 8));
    CK(cudaMalloc(&ctotal, 64));
    CK(cudaMalloc(&vals, n * 4));
    CK(cudaMalloc(&out, n * 4));
    CK(cudaMalloc(&flags, n));
    CK(cudaMemset(err, 0, 64));
    fill<<<2048, 256>>>(counts, vals, flags, n);
    CK(cudaDeviceSynchronize());
    float copy = median_ms(rep, [&] { CK(cudaMemcpyAsync(out, vals, n * 4, cudaMemcpyDeviceToDevice)); });
    const double bw = 2.0 * n * 4 / (copy * 1e6);
    auto scan = [&] {
        CK(cudaMemsetAsync(status, 0, (2 + 2 * ntiles) * 8));
        exclusive_scan_u64<<<ntiles, SCAN_THREADS>>>(counts, offsets, total, n, (u32*)status, (ulonglong2*)(status + 2),
                                                     (u32)ntiles, err);
    };
    float s = median_ms(rep, scan);
    float s_only = median_ms(rep, [&] { CK(cudaMemsetAsync(status, 0, (2 + 2 * ntiles) * 8)); });
    s_only = s - s_only;
    scan();
    CK(cudaDeviceSynchronize());
    {
        std::vector<u64> c(n), o(n);
        CK(cudaMemcpy(c.data(), counts, n * 8, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(o.data(), offsets, n * 8, cudaMemcpyDeviceToHost));
        u64 acc = 0;
        for (u64 i = 0; i < n; i++) {
            if (o[i] != acc) { printf("SCAN WRONG at %llu\n", i); exit(1); }
            acc += c[i];
        }
    }
    u64 m = 0;
    auto compact3 = [&] {
        compact_count<<<ctiles, CPT_THREADS>>>(flags, n, ccounts);
        CK(cudaMemsetAsync(status, 0, (2 + 2 * stiles) * 8));
        exclusive_scan_u64<<<stiles, SCAN_THREADS>>>(ccounts, coffsets, ctotal, ctiles, (u32*)status,
                                                     (ulonglong2*)(status + 2), (u32)stiles, err);
        CK(cudaMemcpy(&m, ctotal, 8, cudaMemcpyDeviceToHost));
        compact_scatter_u32<<<ctiles, CPT_THREADS>>>(flags, vals, n, coffsets, out);
    };
    float c3 = median_ms(rep, compact3);
    float cc = median_ms(rep, [&] { compact_count<<<ctiles, CPT_THREADS>>>(flags, n, ccounts); });
    float cs = median_ms(rep, [&] { compact_scatter_u32<<<ctiles, CPT_THREADS>>>(flags, vals, n, coffsets, out); });
    std::vector<u32> want;
    {
        std::vector<u32> o(m);
        CK(cudaMemcpy(o.data(), out, m * 4, cudaMemcpyDeviceToHost));
        std::vector<u8> f(n);
        CK(cudaMemcpy(f.data(), flags, n, cudaMemcpyDeviceToHost));
        for (u64 i = 0; i < n; i++)
            if (f[i]) want.push_back((u32)i);
        if (want.size() != m) { printf("COMPACT COUNT WRONG\n"); exit(1); }
        for (u64 i = 0; i < m; i++) if (o[i] != want[i]) { printf("COMPACT WRONG at %llu\n", i); exit(1); }
    }
    auto onepass = [&] {
        CK(cudaMemsetAsync(status, 0, (2 + 2 * ctiles) * 8));
        compact_onepass_u32<<<ctiles, CPT_THREADS>>>(flags, vals, n, (u32*)status, (ulonglong2*)(status + 2), (u32)ctiles,
                                                     ctotal, out);
        CK(cudaMemcpy(&m, ctotal, 8, cudaMemcpyDeviceToHost));
    };
    CK(cudaMemset(out, 0, n * 4));
    float c1 = median_ms(rep, onepass);
    {
        std::vector<u32> o(m);
        CK(cudaMemcpy(o.data(), out, m * 4, cudaMemcpyDeviceToHost));
        if (want.size() != m) { printf("ONEPASS COUNT WRONG\n"); exit(1); }
        for (u64 i = 0; i < m; i++) if (o[i] != want[i]) { printf("ONEPASS WRONG at %llu\n", i); exit(1); }
    }
    const double cbytes = (double)n * 5 + (double)m * 4;
    printf("ST=%d SI=%d CT=%d CI=%d | copy %.3f ms %.0f GB/s | scan %.3f ms %.1f%% (kernel %.3f %.1f%%) | compact %.3f ms %.1f%% (count %.3f scatter %.3f) | onepass %.3f ms %.1f%%\n",
           SCAN_THREADS, SCAN_ITEMS, CPT_THREADS, CPT_ITEMS, copy, bw, s, 100.0 * (16.0 * n / (s * 1e6)) / bw, s_only,
           100.0 * (16.0 * n / (s_only * 1e6)) / bw, c3, 100.0 * (cbytes / (c3 * 1e6)) / bw, cc, cs, c1,
           100.0 * (cbytes / (c1 * 1e6)) / bw);
    return 0;
}

// Host-to-device copy rates on the GPU machine, for the host tier's choices: a 2.08 GB
// column (one int32 column of the edges of R-MAT 24) copied from pageable memory with
// cudaMemcpy, then page-locked in place (cudaHostRegister, timed) and copied again,
// whole and in 64 MiB pieces; medians of three copies; then unlocked (timed).
//
//   /usr/local/cuda/bin/nvcc -O2 -o host_copy bench/host_copy.cu && ./host_copy
//
// fox-cuda's own uploads of pageable memory go through its page-locked staging buffer
// (the host copies into one half while the DMA engine moves the other), which
// `foxbench tpch --memory-limit` measures and prints as its bandwidth.
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)

static double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static double median_copy(void* d, const char* h, size_t bytes, size_t piece) {
    std::vector<double> t;
    for (int r = 0; r < 3; r++) {
        double t0 = now_ms();
        for (size_t o = 0; o < bytes; o += piece) {
            CK(cudaMemcpy((char*)d + o, h + o, std::min(piece, bytes - o), cudaMemcpyHostToDevice));
        }
        CK(cudaDeviceSynchronize());
        t.push_back(now_ms() - t0);
    }
    std::sort(t.begin(), t.end());
    return t[1];
}

int main() {
    const size_t bytes = (size_t)2080 << 20;
    char* h = (char*)malloc(bytes);
    if (!h) { fprintf(stderr, "no host memory\n"); return 1; }
    memset(h, 1, bytes);
    void* d;
    CK(cudaMalloc(&d, bytes));
    CK(cudaMemcpy(d, h, 1 << 20, cudaMemcpyHostToDevice));
    double pageable = median_copy(d, h, bytes, bytes);
    double t0 = now_ms();
    CK(cudaHostRegister(h, bytes, cudaHostRegisterDefault));
    double lock = now_ms() - t0;
    double locked = median_copy(d, h, bytes, bytes);
    double pieces = median_copy(d, h, bytes, (size_t)64 << 20);
    t0 = now_ms();
    CK(cudaHostUnregister(h));
    double unlock = now_ms() - t0;
    auto rate = [&](double ms) { return bytes / ms / 1e6; };
    printf("%zu bytes: pageable %.1f ms (%.1f GB/s); lock %.1f ms (%.1f GB/s), unlock %.1f ms; "
           "locked %.1f ms (%.1f GB/s), in 64 MiB pieces %.1f ms (%.1f GB/s)\n",
           bytes, pageable, rate(pageable), lock, rate(lock), unlock, locked, rate(locked), pieces, rate(pieces));
    CK(cudaFree(d));
    free(h);
    return 0;
}

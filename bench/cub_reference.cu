// The CUB reference for `foxbench kernels`: CUB's device-wide primitives on the same
// sizes and kinds of data, timed the same way (CUDA events, one warm-up run, the median
// of N runs). Written from CUB's public API; built and run by bench/kernels.sh:
//
//   nvcc -O3 -arch=sm_90 -o /tmp/cub_reference bench/cub_reference.cu
//   /tmp/cub_reference [--log2n 28] [--repeat 10] [--out FILE]
//
// One line per primitive, `cub <name> <n> <median ms>`, to FILE (and standard output):
//   sort_keys      cub::DeviceRadixSort::SortKeys, n random u32 keys (all 32 bits)
//   sort_pairs     cub::DeviceRadixSort::SortPairs, n random u32 keys with u32 values
//   scan_u64       cub::DeviceScan::ExclusiveSum, n u64 counts in [0, 3]
//   select_flagged cub::DeviceSelect::Flagged, n u32 values, u8 flags (about half set)
//   memcpy_dtod    cudaMemcpyAsync device to device of n u32 (4n bytes read, 4n written)
// Every CUDA call is checked; a failure prints the call and exits with status 1. The
// results are checked too (sorted output, selected count, scan total).

#include <cub/cub.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CK(call)                                                                          \
    do {                                                                                  \
        cudaError_t err_ = (call);                                                        \
        if (err_ != cudaSuccess) {                                                        \
            std::fprintf(stderr, "cub_reference: %s:%d: %s failed: %s\n", __FILE__,      \
                         __LINE__, #call, cudaGetErrorString(err_));                      \
            std::exit(1);                                                                 \
        }                                                                                 \
    } while (0)

// A launch's configuration error now, and its execution error at the next sync.
#define CK_LAUNCH()                         \
    do {                                    \
        CK(cudaGetLastError());             \
        CK(cudaDeviceSynchronize());        \
    } while (0)

__device__ __forceinline__ uint64_t mix64(uint64_t x) {
    // splitmix64's finaliser
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

__global__ void fill_u32(uint32_t *out, size_t n, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = (uint32_t)mix64(seed ^ (i * 0x2545f4914f6cdd1dull));
}

__global__ void fill_counts(unsigned long long *out, size_t n, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = mix64(seed ^ (i * 0x2545f4914f6cdd1dull)) & 3;
}

__global__ void fill_flags(uint8_t *out, size_t n, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = (uint8_t)(mix64(seed ^ (i * 0x2545f4914f6cdd1dull)) & 1);
}

// Counts the i with a[i] > a[i + 1].
__global__ void count_inversions(const uint32_t *a, size_t n, unsigned long long *bad) {
    unsigned long long local = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i + 1 < n; i += (size_t)gridDim.x * blockDim.x)
        local += a[i] > a[i + 1];
    if (local) atomicAdd(bad, local);
}

static const int GRID = 132 * 8, BLOCK = 256;

template <class F>
static float median_ms(int repeat, F run) {
    cudaEvent_t start, stop;
    CK(cudaEventCreate(&start));
    CK(cudaEventCreate(&stop));
    run();  // warm-up
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<float> times;
    for (int r = 0; r < repeat; r++) {
        CK(cudaEventRecord(start));
        run();
        CK(cudaEventRecord(stop));
        CK(cudaEventSynchronize(stop));
        CK(cudaGetLastError());
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, start, stop));
        times.push_back(ms);
    }
    CK(cudaEventDestroy(start));
    CK(cudaEventDestroy(stop));
    std::sort(times.begin(), times.end());
    size_t m = times.size();
    return m % 2 ? times[m / 2] : 0.5f * (times[m / 2 - 1] + times[m / 2]);
}

static void check_sorted(const uint32_t *d, size_t n, const char *what) {
    unsigned long long *bad;
    CK(cudaMalloc(&bad, sizeof *bad));
    CK(cudaMemset(bad, 0, sizeof *bad));
    count_inversions<<<GRID, BLOCK>>>(d, n, bad);
    CK_LAUNCH();
    unsigned long long h = 0;
    CK(cudaMemcpy(&h, bad, sizeof h, cudaMemcpyDeviceToHost));
    CK(cudaFree(bad));
    if (h) {
        std::fprintf(stderr, "cub_reference: %s: output not sorted (%llu inversions)\n", what, h);
        std::exit(1);
    }
}

int main(int argc, char **argv) {
    int log2n = 28, repeat = 10;
    std::string out_path;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if ((a == "--log2n" || a == "--repeat" || a == "--out") && i + 1 < argc) {
            std::string v = argv[++i];
            if (a == "--log2n") log2n = std::atoi(v.c_str());
            else if (a == "--repeat") repeat = std::atoi(v.c_str());
            else out_path = v;
        } else {
            std::fprintf(stderr, "usage: cub_reference [--log2n N (10..30)] [--repeat R] [--out FILE]\n");
            return 2;
        }
    }
    if (log2n < 10 || log2n > 30 || repeat < 1) {
        std::fprintf(stderr, "cub_reference: --log2n must be in 10..30 and --repeat at least 1\n");
        return 2;
    }
    const int n = 1 << log2n;
    int dev = 0;
    CK(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));
    std::fprintf(stderr, "cub_reference: %s, CUB %d.%d.%d, n = 2^%d, %d repeats\n", prop.name,
                 CUB_MAJOR_VERSION, CUB_MINOR_VERSION, CUB_SUBMINOR_VERSION, log2n, repeat);

    uint32_t *keys, *keys_out, *vals, *vals_out;
    CK(cudaMalloc(&keys, n * sizeof(uint32_t)));
    CK(cudaMalloc(&keys_out, n * sizeof(uint32_t)));
    CK(cudaMalloc(&vals, n * sizeof(uint32_t)));
    CK(cudaMalloc(&vals_out, n * sizeof(uint32_t)));
    fill_u32<<<GRID, BLOCK>>>(keys, n, 1);
    CK_LAUNCH();
    fill_u32<<<GRID, BLOCK>>>(vals, n, 2);
    CK_LAUNCH();

    std::vector<std::pair<std::string, float>> rows;

    // Radix sort, keys only.
    {
        size_t temp_bytes = 0;
        CK(cub::DeviceRadixSort::SortKeys(nullptr, temp_bytes, keys, keys_out, n));
        void *temp;
        CK(cudaMalloc(&temp, temp_bytes));
        float ms = median_ms(repeat, [&] { CK(cub::DeviceRadixSort::SortKeys(temp, temp_bytes, keys, keys_out, n)); });
        check_sorted(keys_out, n, "sort_keys");
        CK(cudaFree(temp));
        rows.push_back({"sort_keys", ms});
    }
    // Radix sort, key/value pairs.
    {
        size_t temp_bytes = 0;
        CK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys, keys_out, vals, vals_out, n));
        void *temp;
        CK(cudaMalloc(&temp, temp_bytes));
        float ms = median_ms(repeat, [&] {
            CK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, keys_out, vals, vals_out, n));
        });
        check_sorted(keys_out, n, "sort_pairs");
        CK(cudaFree(temp));
        rows.push_back({"sort_pairs", ms});
    }
    CK(cudaFree(vals));
    CK(cudaFree(vals_out));
    // Exclusive scan of u64 counts.
    {
        unsigned long long *counts, *offsets;
        CK(cudaMalloc(&counts, n * sizeof(unsigned long long)));
        CK(cudaMalloc(&offsets, n * sizeof(unsigned long long)));
        fill_counts<<<GRID, BLOCK>>>(counts, n, 3);
        CK_LAUNCH();
        size_t temp_bytes = 0;
        CK(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, counts, offsets, n));
        void *temp;
        CK(cudaMalloc(&temp, temp_bytes));
        float ms = median_ms(repeat, [&] { CK(cub::DeviceScan::ExclusiveSum(temp, temp_bytes, counts, offsets, n)); });
        unsigned long long last[2];
        CK(cudaMemcpy(&last[0], offsets + n - 1, sizeof last[0], cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&last[1], counts + n - 1, sizeof last[1], cudaMemcpyDeviceToHost));
        // The counts are 0..3 at random: the total is about 1.5 n.
        unsigned long long total = last[0] + last[1];
        if (total < (unsigned long long)n || total > 2ull * n) {
            std::fprintf(stderr, "cub_reference: scan_u64: implausible total %llu for n = %d\n", total, n);
            return 1;
        }
        CK(cudaFree(temp));
        CK(cudaFree(counts));
        CK(cudaFree(offsets));
        rows.push_back({"scan_u64", ms});
    }
    // Stream compaction of u32 values by u8 flags.
    {
        uint8_t *flags;
        int *num_selected;
        CK(cudaMalloc(&flags, n));
        CK(cudaMalloc(&num_selected, sizeof(int)));
        fill_flags<<<GRID, BLOCK>>>(flags, n, 4);
        CK_LAUNCH();
        size_t temp_bytes = 0;
        CK(cub::DeviceSelect::Flagged(nullptr, temp_bytes, keys, flags, keys_out, num_selected, n));
        void *temp;
        CK(cudaMalloc(&temp, temp_bytes));
        float ms = median_ms(repeat, [&] {
            CK(cub::DeviceSelect::Flagged(temp, temp_bytes, keys, flags, keys_out, num_selected, n));
        });
        int h = 0;
        CK(cudaMemcpy(&h, num_selected, sizeof h, cudaMemcpyDeviceToHost));
        if (h < n / 2 - n / 64 || h > n / 2 + n / 64) {
            std::fprintf(stderr, "cub_reference: select_flagged: %d of %d selected, expected about half\n", h, n);
            return 1;
        }
        CK(cudaFree(temp));
        CK(cudaFree(flags));
        CK(cudaFree(num_selected));
        rows.push_back({"select_flagged", ms});
    }
    // Device-to-device copy bandwidth.
    {
        float ms = median_ms(repeat, [&] {
            CK(cudaMemcpyAsync(keys_out, keys, n * sizeof(uint32_t), cudaMemcpyDeviceToDevice));
        });
        rows.push_back({"memcpy_dtod", ms});
        double gbs = 2.0 * n * sizeof(uint32_t) / (ms * 1e-3) / 1e9;
        std::fprintf(stderr, "cub_reference: copy bandwidth %.1f GB/s (read + write)\n", gbs);
    }
    CK(cudaFree(keys));
    CK(cudaFree(keys_out));

    FILE *f = nullptr;
    if (!out_path.empty()) {
        f = std::fopen(out_path.c_str(), "w");
        if (!f) {
            std::fprintf(stderr, "cub_reference: cannot write %s\n", out_path.c_str());
            return 1;
        }
    }
    for (auto &r : rows) {
        std::printf("cub %s %d %.4f\n", r.first.c_str(), n, r.second);
        if (f) std::fprintf(f, "cub %s %d %.4f\n", r.first.c_str(), n, r.second);
    }
    if (f && std::fclose(f) != 0) {
        std::fprintf(stderr, "cub_reference: cannot write %s\n", out_path.c_str());
        return 1;
    }
    return 0;
}

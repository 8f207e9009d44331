// Tests of the SIMT harness itself (tests/simt/simt.h): per-thread indices, block barriers,
// one shared copy per block, warp shuffles and votes, atomics, poisoned dynamic shared memory,
// that a missing barrier is exposed by the interleavings, and that misuse is reported.
#include <doctest/doctest.h>

#include <numeric>
#include <vector>

#include "simt.h"
// After simt.h: the kernel-side helpers (launch, reductions) the harness must support.
#include "common.cuh"
#include "kernel_scan.h"

namespace {

__global__ void index_kernel(int* out) {
    int64_t flat =
        (static_cast<int64_t>(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    out[flat * blockDim.x + threadIdx.x] = static_cast<int>(
        blockIdx.x * 1000000 + blockIdx.y * 10000 + blockIdx.z * 1000 + threadIdx.x);
}

// Reverses each block's slice through shared memory: needs the barrier.
__global__ void reverse_kernel(const int* in, int* out) {
    __shared__ int s[256];
    int base = blockIdx.x * blockDim.x;
    s[threadIdx.x] = in[base + threadIdx.x];
    __syncthreads();
    out[base + threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}

// The same without the barrier: a race the interleavings must expose.
__global__ void racy_reverse_kernel(const int* in, int* out) {
    __shared__ int s[256];
    int base = blockIdx.x * blockDim.x;
    s[threadIdx.x] = in[base + threadIdx.x];
    out[base + threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}

__global__ void shuffle_kernel(int* out) {
    int lane = static_cast<int>(threadIdx.x & 31);
    int base = static_cast<int>(threadIdx.x) * 8;
    out[base + 0] = __shfl_sync(0xffffffffu, lane * 10, 3);
    out[base + 1] = __shfl_xor_sync(0xffffffffu, lane, 5);
    out[base + 2] = __shfl_down_sync(0xffffffffu, lane, 4);
    out[base + 3] = __shfl_up_sync(0xffffffffu, lane, 2);
    out[base + 4] = static_cast<int>(__ballot_sync(0xffffffffu, lane % 3 == 0));
    out[base + 5] = __any_sync(0xffffffffu, lane == 31);
    out[base + 6] = __all_sync(0xffffffffu, lane < 31);
    out[base + 7] = __shfl_xor_sync(0xffffffffu, lane, 1, 8);  // width 8 segments
}

__global__ void reduce_kernel(const float* in, float* sums, float* maxes) {
    float v = in[blockIdx.x * blockDim.x + threadIdx.x];
    float s = mtk::block_sum(v);
    float m = mtk::block_max(v);
    float s2 = mtk::block_sum(2.0f * v);  // back-to-back reuse of the shared slots
    if (threadIdx.x == 0) {
        sums[2 * blockIdx.x] = s;
        sums[2 * blockIdx.x + 1] = s2;
        maxes[blockIdx.x] = m;
    }
}

__global__ void atomic_kernel(int* counter, float* fsum) {
    atomicAdd(counter, 1);
    atomicAdd(fsum, 0.5f);
}

__global__ void dyn_smem_kernel(float* out, int write) {
    float* s = mt_dynamic_shared<float>();
    if (write) s[threadIdx.x] = 1.0f;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = s[threadIdx.x];
}

__global__ void early_return_kernel(int* out) {
    if (threadIdx.x == 0) return;
    __syncthreads();
    out[threadIdx.x] = 1;
}

__global__ void divergent_barrier_kernel(int* out) {
    if (threadIdx.x % 2) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    out[threadIdx.x] = 1;
}

__global__ void lane_exit_kernel(int* out) {
    if ((threadIdx.x & 31) == 7) return;
    out[threadIdx.x] = __shfl_sync(0xffffffffu, 1, 0);
}

__global__ void outside_mask_kernel(int* out) {
    if (threadIdx.x < 16) out[threadIdx.x] = __shfl_sync(0x0000ffffu, 1, 20);
}

__global__ void nothing_kernel(int*) {}

}  // namespace

TEST_CASE("simt: per-thread and per-block indices") {
    mtk::Geom g{3, 2, 2, 64, 0};
    std::vector<int> out(3 * 2 * 2 * 64, -1);
    MT_LAUNCH(index_kernel, g, nullptr, out.data());
    int i = 0;
    for (unsigned z = 0; z < 2; ++z)
        for (unsigned y = 0; y < 2; ++y)
            for (unsigned x = 0; x < 3; ++x)
                for (unsigned t = 0; t < 64; ++t, ++i)
                    REQUIRE(out[i] == static_cast<int>(x * 1000000 + y * 10000 + z * 1000 + t));
    CHECK(simt::launched_kernels().count("index_kernel") == 1);
}

TEST_CASE("simt: barrier and per-block shared memory under every schedule") {
    std::vector<int> in(4 * 256);
    std::iota(in.begin(), in.end(), 0);
    for (uint64_t seed : {0ull, 1ull, 2ull, 3ull}) {
        simt::set_seed(seed);
        std::vector<int> out(in.size(), -1);
        MT_LAUNCH(reverse_kernel, (mtk::Geom{4, 1, 1, 256, 0}), nullptr, in.data(), out.data());
        for (int b = 0; b < 4; ++b)
            for (int t = 0; t < 256; ++t) REQUIRE(out[b * 256 + t] == b * 256 + 255 - t);
    }
    simt::set_seed(0);
}

TEST_CASE("simt: a missing barrier gives wrong or varying results") {
    std::vector<int> in(2 * 256);
    std::iota(in.begin(), in.end(), 0);
    int wrong_runs = 0;
    for (uint64_t seed : {0ull, 1ull, 2ull}) {
        simt::set_seed(seed);
        std::vector<int> out(in.size(), -1);
        MT_LAUNCH(racy_reverse_kernel, (mtk::Geom{2, 1, 1, 256, 0}), nullptr, in.data(),
                  out.data());
        bool right = true;
        for (int b = 0; b < 2; ++b)
            for (int t = 0; t < 256; ++t) right = right && out[b * 256 + t] == b * 256 + 255 - t;
        wrong_runs += !right;
    }
    simt::set_seed(0);
    CHECK(wrong_runs >= 2);
}

TEST_CASE("simt: warp shuffles and votes") {
    std::vector<int> out(64 * 8, -1);
    simt::set_seed(7);
    MT_LAUNCH(shuffle_kernel, (mtk::Geom{1, 1, 1, 64, 0}), nullptr, out.data());
    simt::set_seed(0);
    unsigned ballot = 0;
    for (int l = 0; l < 32; ++l)
        if (l % 3 == 0) ballot |= 1u << l;
    for (int t = 0; t < 64; ++t) {
        int lane = t & 31;
        const int* o = out.data() + t * 8;
        CHECK(o[0] == 30);
        CHECK(o[1] == (lane ^ 5));
        CHECK(o[2] == (lane + 4 < 32 ? lane + 4 : lane));
        CHECK(o[3] == (lane >= 2 ? lane - 2 : lane));
        CHECK(static_cast<unsigned>(o[4]) == ballot);
        CHECK(o[5] == 1);
        CHECK(o[6] == 0);
        CHECK(o[7] == (lane ^ 1));
    }
}

TEST_CASE("simt: block reductions and atomics") {
    const int blocks = 3, threads = 96;
    std::vector<float> in(blocks * threads);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((i * 37) % 101) - 50.0f;
    std::vector<float> sums(2 * blocks), maxes(blocks);
    MT_LAUNCH(reduce_kernel, (mtk::Geom{blocks, 1, 1, threads, 0}), nullptr, in.data(), sums.data(),
              maxes.data());
    for (int b = 0; b < blocks; ++b) {
        float s = 0, m = -1e30f;
        for (int t = 0; t < threads; ++t) {
            s += in[b * threads + t];
            m = std::max(m, in[b * threads + t]);
        }
        CHECK(sums[2 * b] == doctest::Approx(s));
        CHECK(sums[2 * b + 1] == doctest::Approx(2 * s));
        CHECK(maxes[b] == m);
    }
    int counter = 0;
    float fsum = 0;
    MT_LAUNCH(atomic_kernel, (mtk::Geom{5, 1, 1, 128, 0}), nullptr, &counter, &fsum);
    CHECK(counter == 5 * 128);
    CHECK(fsum == 5 * 128 * 0.5f);
}

TEST_CASE("simt: dynamic shared memory is poisoned before each block") {
    std::vector<float> out(2 * 64);
    MT_LAUNCH(dyn_smem_kernel, (mtk::Geom{2, 1, 1, 64, 64 * sizeof(float)}), nullptr, out.data(),
              1);
    for (float v : out) CHECK(v == 1.0f);
    MT_LAUNCH(dyn_smem_kernel, (mtk::Geom{2, 1, 1, 64, 64 * sizeof(float)}), nullptr, out.data(),
              0);
    for (float v : out) CHECK(std::isnan(v));
}

TEST_CASE("simt: misuse is reported") {
    // Each misuse: the kernel (all take an int*), its launch geometry, and a part of the error.
    struct Misuse {
        const char* name;
        void (*kernel)(int*);
        mtk::Geom geom;
        const char* error;
    };
    const Misuse misuses[] = {
        {"early_return_kernel", early_return_kernel, {1, 1, 1, 64, 0}, "returned"},
        {"divergent_barrier_kernel",
         divergent_barrier_kernel,
         {1, 1, 1, 64, 0},
         "different __syncthreads"},
        {"lane_exit_kernel", lane_exit_kernel, {1, 1, 1, 32, 0}, "returned while its warp waits"},
        {"outside_mask_kernel", outside_mask_kernel, {1, 1, 1, 32, 0}, "not in the mask"},
        {"nothing_kernel", nothing_kernel, {1, 1, 1, 2048, 0}, "1..1024"},
        {"nothing_kernel", nothing_kernel, {1, 1, 1, 32, 100 * 1024}, "99 KiB"},  // past the opt-in
        {"nothing_kernel", nothing_kernel, {1, 70000, 1, 32, 0}, "grid dimension"},
    };
    std::vector<int> out(1024, 0);
    for (const Misuse& m : misuses) {
        CAPTURE(m.error);
        CHECK_THROWS_WITH_AS(mtk::launch(m.name, m.kernel, m.geom, nullptr, out.data()),
                             doctest::Contains(m.error), simt::Error);
    }
    // After a fault the harness is usable again.
    std::vector<int> in(256, 3), res(256, 0);
    MT_LAUNCH(reverse_kernel, (mtk::Geom{1, 1, 1, 256, 0}), nullptr, in.data(), res.data());
    CHECK(res[0] == 3);
}

TEST_CASE("simt: the kernel scan finds the kernels of kernels_cuda/") {
    auto kernels = simt_test::scan_kernels(MOETRAIN_KERNELS_CUDA_DIR);
    std::set<std::string> names;
    for (auto& [file, name] : kernels) names.insert(name);
    CHECK(names.count("add_kernel") == 1);
    CHECK(names.count("fill_kernel") == 1);
    CHECK(kernels.size() >= 4);
    std::set<std::string> none;
    CHECK(simt_test::untested_kernels(MOETRAIN_KERNELS_CUDA_DIR, none).size() == kernels.size());
}

TEST_CASE("simt: kernel sources use only what the harness provides") {
    // Everything kernels_cuda/ needs must compile under simt.h; these would compile there (or be
    // skipped by the preprocessor) yet mean something the harness does not model.
    const char* forbidden[] = {"asm(",          "asm volatile",       "cub::",
                               "thrust::",      "cooperative_groups", "__ldg",
                               "__threadfence", "extern __shared__",  "__syncthreads_"};
    std::vector<std::filesystem::path> files;
    for (auto& e : std::filesystem::directory_iterator(MOETRAIN_KERNELS_CUDA_DIR))
        if (e.path().extension() == ".cuh" || e.path().extension() == ".cu" ||
            e.path().extension() == ".h")
            files.push_back(e.path());
    CHECK(files.size() >= 20);
    std::string violations;
    for (auto& f : files) {
        std::ifstream in(f);
        std::string line;
        for (int n = 1; std::getline(in, line); ++n) {
            auto code = line.substr(0, line.find("//"));
            for (const char* bad : forbidden) {
                // The one dynamic shared memory declaration lives in mt_dynamic_shared<T>().
                bool allowed =
                    std::string(bad) == "extern __shared__" && f.filename() == "common.cuh";
                if (!allowed && code.find(bad) != std::string::npos)
                    violations +=
                        f.filename().string() + ":" + std::to_string(n) + " uses " + bad + "; ";
            }
        }
    }
    INFO(violations);
    CHECK(violations.empty());
}

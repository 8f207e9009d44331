// Host-side unit tests of the CUDA backend's plain C++: the caching allocator's size classes,
// reuse, out-of-memory retry and bookkeeping (with a malloc-backed fake device); and, when the
// module is built, the error mapping against the real runtime and the registry's view of cuda
// on a machine without a usable GPU (unavailable with the runtime's reason, one-line error).
#include <doctest/doctest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <vector>

#include "cuda/caching_allocator.h"
#include "moetrain/backend.h"

#if defined(MOETRAIN_SIMT_CUDA_MODULE)
#include <cuda_runtime_api.h>

#include "cuda/cublas_calls.h"
#include "cuda/cuda_errors.h"
#include "reference_ops.h"
#endif

using moetrain::cuda::CachingAllocator;
using moetrain::cuda::RawAllocator;

namespace {

// malloc-backed "device" with an optional capacity, counting calls.
class FakeDevice final : public RawAllocator {
  public:
    struct Log {
        size_t capacity = SIZE_MAX, used = 0;
        int allocs = 0, releases = 0;
        std::set<void*> live;
    };
    explicit FakeDevice(Log& log) : log_(log) {}
    void* allocate(size_t bytes) override {
        if (log_.used + bytes > log_.capacity) return nullptr;
        void* p = std::malloc(bytes);
        log_.used += bytes;
        log_.allocs++;
        log_.live.insert(p);
        sizes_[p] = bytes;
        return p;
    }
    void release(void* p) override {
        log_.used -= sizes_.at(p);
        log_.releases++;
        log_.live.erase(p);
        std::free(p);
    }

  private:
    Log& log_;
    std::map<void*, size_t> sizes_;
};

}  // namespace

TEST_CASE("cuda host: size classes round up by at most a quarter") {
    CHECK(CachingAllocator::size_class(1) == 512);
    CHECK(CachingAllocator::size_class(512) == 512);
    CHECK(CachingAllocator::size_class(513) == 640);
    CHECK(CachingAllocator::size_class(1024) == 1024);
    CHECK(CachingAllocator::size_class(1025) == 1280);
    CHECK(CachingAllocator::size_class(size_t(64) << 20) == size_t(64) << 20);
    CHECK(CachingAllocator::size_class((size_t(64) << 20) + 1) == size_t(72) << 20);
    for (size_t b = 1; b < (size_t(300) << 20); b = b * 3 + 7) {
        size_t c = CachingAllocator::size_class(b);
        CHECK(c >= b);
        CHECK(c <= std::max<size_t>(512, b + b / 4 + (size_t(8) << 20) * (b > (size_t(64) << 20))));
        CHECK(CachingAllocator::size_class(c) == c);  // a class is its own class
    }
}

TEST_CASE("cuda host: freed blocks are reused without reaching the device") {
    FakeDevice::Log log;
    {
        CachingAllocator a(std::make_unique<FakeDevice>(log));
        CHECK(a.allocate(0) == nullptr);
        // A "training step": the same sequence of allocations three times.
        std::vector<size_t> step = {4096, 100, 70000, 4096, 1 << 20, 333};
        for (int s = 0; s < 3; ++s) {
            std::vector<void*> ptrs;
            ptrs.reserve(step.size());
            for (size_t b : step) ptrs.push_back(a.allocate(b));
            CHECK(std::set<void*>(ptrs.begin(), ptrs.end()).size() == ptrs.size());
            for (void* p : ptrs) a.free(p);
            CHECK(log.allocs == static_cast<int>(step.size()));  // only the first step allocates
        }
        auto st = a.stats();
        CHECK(st.raw_allocations == step.size());
        CHECK(st.cache_hits == 2 * step.size());
        CHECK(st.bytes_in_use == 0);
        CHECK(st.bytes_cached > 0);
        CHECK(st.peak_in_use >= 4096 + 512 + 70000 + 4096 + (1 << 20) + 512);
        CHECK_THROWS_WITH_AS(a.free(&log), "caching allocator: free of a block it did not hand out",
                             moetrain::Error);
    }
    CHECK(log.live.empty());  // the destructor returned the cache
    CHECK(log.releases == log.allocs);
}

TEST_CASE("cuda host: out of memory returns the cache, retries, then throws one line") {
    FakeDevice::Log log;
    log.capacity = 3 << 20;
    CachingAllocator a(std::make_unique<FakeDevice>(log));
    void* p1 = a.allocate(1 << 20);
    void* p2 = a.allocate(1 << 20);
    a.free(p1);
    a.free(p2);                       // 2 MiB cached in the 1 MiB class
    void* big = a.allocate(2 << 20);  // does not fit next to the cache: flush + retry succeeds
    CHECK(big != nullptr);
    CHECK(a.stats().cache_flushes == 1);
    CHECK(a.stats().bytes_cached == 0);
    try {
        a.allocate(2 << 20);
        FAIL("expected an out-of-memory error");
    } catch (const moetrain::Error& e) {
        std::string msg = e.what();
        CHECK(msg.find("device out of memory allocating 2.0 MiB") == 0);
        CHECK(msg.find("2.0 MiB in use") != std::string::npos);
        CHECK(msg.find('\n') == std::string::npos);
    }
    a.free(big);
}

#if defined(MOETRAIN_SIMT_CUDA_MODULE)
TEST_CASE("cuda host: CUDA and cuBLAS statuses map to one line naming the call") {
    using namespace moetrain::cuda;
    CHECK(format_status("cudaMalloc", "out of memory", "cudaErrorMemoryAllocation") ==
          "cudaMalloc: out of memory (cudaErrorMemoryAllocation)");
    CHECK(format_status("", nullptr, nullptr) == "unknown error (unknown status)");
    CHECK(describe(cudaErrorInsufficientDriver).find("(cudaErrorInsufficientDriver)") !=
          std::string::npos);
    CHECK(describe(CUBLAS_STATUS_NOT_INITIALIZED).find("(CUBLAS_STATUS_NOT_INITIALIZED)") !=
          std::string::npos);
    CHECK_THROWS_WITH_AS(check_cuda(cudaErrorMemoryAllocation, "cudaMalloc of 4096 bytes"),
                         doctest::Contains("CUDA cudaMalloc of 4096 bytes: "), moetrain::Error);
    CHECK_THROWS_WITH_AS(check_cublas(CUBLAS_STATUS_INVALID_VALUE, "cublasGemmStridedBatchedEx"),
                         doctest::Contains("(CUBLAS_STATUS_INVALID_VALUE)"), moetrain::Error);
    CHECK_NOTHROW(check_cuda(cudaSuccess, "nothing"));
}

namespace {
// cuBLAS's column-major strided-batched GEMM semantics, on the host.
void column_major_gemm(const moetrain::cuda::ColumnMajorGemm& g, double alpha,
                       const std::vector<double>& A, const std::vector<double>& B, double beta,
                       std::vector<double>& C) {
    for (int bt = 0; bt < g.batch; ++bt)
        for (int i = 0; i < g.m; ++i)
            for (int j = 0; j < g.n; ++j) {
                double acc = 0;
                for (int p = 0; p < g.k; ++p) {
                    double a = g.transa == CUBLAS_OP_N ? A[bt * g.stride_a + i + p * g.lda]
                                                       : A[bt * g.stride_a + p + i * g.lda];
                    double b = g.transb == CUBLAS_OP_N ? B[bt * g.stride_b + p + j * g.ldb]
                                                       : B[bt * g.stride_b + j + p * g.ldb];
                    acc += a * b;
                }
                double& c = C[bt * g.stride_c + i + j * g.ldc];
                c = alpha * acc + beta * c;
            }
}
}  // namespace

TEST_CASE("cuda host: row-major GEMM maps onto cuBLAS column-major exactly") {
    using moetrain::Trans;
    for (Trans ta : {Trans::N, Trans::T})
        for (Trans tb : {Trans::N, Trans::T}) {
            CAPTURE(static_cast<int>(ta));
            CAPTURE(static_cast<int>(tb));
            moetrain::GemmArgs g;
            g.ta = ta;
            g.tb = tb;
            g.m = 3, g.n = 5, g.k = 4;
            g.lda = (ta == Trans::N ? g.k : g.m) + 2;  // padded rows
            g.ldb = (tb == Trans::N ? g.n : g.k) + 1;
            g.ldc = g.n + 3;
            g.batch = 2;
            g.stride_a = 40, g.stride_b = 45, g.stride_c = 30;
            g.alpha = 1.5f;
            g.beta = -0.5f;
            std::vector<double> a(2 * 40), b(2 * 45), c(2 * 30);
            for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<double>((i * 7) % 11) - 5;
            for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<double>((i * 5) % 13) - 6;
            for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<double>(i % 9);
            std::vector<double> want = c, got = c;
            moetrain::ref::Gemm rg{ta,      tb,         g.m,        g.n,       g.k,
                                   g.alpha, g.beta,     g.lda,      g.ldb,     g.ldc,
                                   g.batch, g.stride_a, g.stride_b, g.stride_c};
            moetrain::ref::gemm(rg, a, b, want);
            auto cm = moetrain::cuda::to_column_major(g);
            column_major_gemm(cm, g.alpha, b, a, g.beta, got);  // B is cuBLAS's first operand
            CHECK(got == want);
        }
    moetrain::GemmArgs huge;
    huge.m = int64_t(1) << 31;
    huge.n = huge.k = huge.lda = huge.ldb = huge.ldc = 1;
    CHECK_THROWS_WITH_AS(moetrain::cuda::to_column_major(huge),
                         doctest::Contains("does not fit cuBLAS"), moetrain::Error);
}

TEST_CASE("cuda host: the registry lists cuda with the runtime's reason when no GPU is usable") {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    bool usable = e == cudaSuccess && n > 0;
    const moetrain::BackendStatus* cuda = nullptr;
    auto all = moetrain::list_backends();
    for (auto& b : all)
        if (b.name == "cuda") cuda = &b;
    REQUIRE(cuda != nullptr);
    CHECK(cuda->loaded);  // the module is built next to libmoetrain.so
    if (usable) {
        MESSAGE("a CUDA device is present: " << n << " device(s)");
        CHECK(cuda->reason.empty());
        CHECK(cuda->devices.size() == static_cast<size_t>(n));
        return;
    }
    std::string want = "no CUDA device: " + moetrain::cuda::describe(e);
    CHECK(cuda->reason == want);
    MESSAGE("cuda: " << cuda->reason);
    CHECK(cuda->devices.empty());
    try {
        moetrain::open_device("cuda");
        FAIL("open_device(cuda) should fail without a device");
    } catch (const moetrain::Error& err) {
        std::string msg = err.what();
        CHECK(msg == "device 'cuda' is not available: " + want);
        CHECK(msg.find('\n') == std::string::npos);
    }
    CHECK_THROWS_WITH_AS(moetrain::open_device("cuda:1"), doctest::Contains("no CUDA device: "),
                         moetrain::Error);
}
#endif

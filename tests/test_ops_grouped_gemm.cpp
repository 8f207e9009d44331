// Op tests, grouped GEMM (Device::gemm_grouped) on every device against the float64 reference:
// dim m (forward / input gradient: rows of A and C per group, one B_i per group, tb N or T) and
// dim k (weight gradient: rows of A and B per group, one C_i per group). Awkward group sizes
// (odd, empty groups, every row in one group, capacity above the used rows, no rows at all, a
// capacity large enough for the CUDA backend's multi-row tiles), padded leading dimensions and
// gaps between the B_i / C_i, alpha / beta (beta 0 over NaN: C is not read; rows of C past the
// groups and the gaps keep their values), fp32 and bf16 / f16 compute with f32 or 16-bit stored
// operands, 16-byte aligned 16-bit shapes (the CUTLASS kernels on Hopper), new group sizes in
// the same tensor, and the errors: bad arguments at once, bad group sizes at once or (cuda) at
// the next synchronize.
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <string>

#include "moetrain/profiling.h"
#include "op_test_util.h"
#include "reference_ops.h"

using namespace moetrain;
using namespace moetrain::test;

namespace {

struct Sizes {
    int64_t m, n, k;  // dim m: m = the capacity; dim k: k = the capacity
    std::vector<int32_t> rows;
};

struct Dtypes {
    DType compute, a, b;
};

struct Setup {
    GroupDim dim;
    Trans tb;
    float alpha, beta;
    int64_t pad;
    bool aligned_gaps = false;  // gaps of 8 / 4 elements: every B_i / C_i 16-byte aligned
};

// GemmArgs (tensors not set) of a grouped product with padded ld and gaps of 3 (B_i) / 2 (C_i)
// elements between the groups' matrices (8 / 4 with aligned_gaps).
GemmArgs grouped_args(const Setup& s, const Sizes& z) {
    GemmArgs g = dense_gemm(s.dim == GroupDim::m ? Trans::N : Trans::T, s.tb, z.m, z.n, z.k);
    g.alpha = s.alpha;
    g.beta = s.beta;
    if (s.dim == GroupDim::m) {
        const int64_t b_rows = s.tb == Trans::N ? z.k : z.n, b_cols = s.tb == Trans::N ? z.n : z.k;
        g.lda = z.k + s.pad;
        g.ldb = b_cols + s.pad;
        g.stride_b = b_rows * g.ldb + (s.aligned_gaps ? 8 : 3);
        g.ldc = z.n + s.pad;
    } else {
        g.lda = z.m + s.pad;
        g.ldb = z.n + s.pad;
        g.ldc = z.n + s.pad;
        g.stride_c = z.m * g.ldc + (s.aligned_gaps ? 4 : 2);
    }
    return g;
}

// Element counts of A, B and C (all groups, gaps included).
struct Counts {
    int64_t a, b, c;
};
Counts counts_of(const GemmArgs& g, GroupDim dim, int64_t groups) {
    if (dim == GroupDim::m) return {g.m * g.lda, groups * g.stride_b, g.m * g.ldc};
    return {g.k * g.lda, g.k * g.ldb, groups * g.stride_c};
}

// Whether C element i is written by the product (C's rows of the groups, or every C_i).
bool covered(const GemmArgs& g, GroupDim dim, int64_t used_rows, int64_t i) {
    if (dim == GroupDim::m) return i / g.ldc < used_rows && i % g.ldc < g.n;
    const int64_t in = i % g.stride_c;
    return in < g.m * g.ldc && in % g.ldc < g.n;
}

void run_case(Device& dev, const Setup& s, const Dtypes& d, const Sizes& z, uint64_t seed) {
    const std::string dtypes =
        std::string(dtype_name(d.compute)) + " A " + dtype_name(d.a) + " B " + dtype_name(d.b);
    CAPTURE(dtypes);
    const char* dim = s.dim == GroupDim::m ? "dim m" : "dim k";
    CAPTURE(dim);
    CAPTURE(static_cast<int>(s.tb));
    CAPTURE(s.beta);
    CAPTURE(z.m);
    CAPTURE(z.n);
    CAPTURE(z.k);
    const auto groups = static_cast<int64_t>(z.rows.size());
    GemmArgs g = grouped_args(s, z);
    g.compute = d.compute;
    const Counts n = counts_of(g, s.dim, groups);
    const int64_t used = std::accumulate(z.rows.begin(), z.rows.end(), int64_t{0});
    Rng rng(seed);
    auto a = rng.normal(n.a), b = rng.normal(n.b), c = rng.normal(n.c);
    if (s.beta == 0.0f)  // C must not be read
        for (int64_t i = 0; i < n.c; ++i)
            if (covered(g, s.dim, used, i))
                c[static_cast<size_t>(i)] = std::numeric_limits<double>::quiet_NaN();
    g.a = to_device_as(dev, a, d.a);
    g.b = to_device_as(dev, b, d.b);
    g.c = to_device(dev, c);
    dev.gemm_grouped(g, to_device(dev, z.rows), groups, s.dim);
    auto want = c;
    ref::gemm_grouped(ref::gemm_dims(g), ref::rounded(a, d.compute), ref::rounded(b, d.compute),
                      want, z.rows, s.dim);
    const double depth = static_cast<double>(z.k) + 1;  // the longest reduction
    const Tol tol = d.compute == DType::f32 ? Tol{1e-4, 2e-5 * std::sqrt(depth)}
                                            : Tol{1e-5, 2e-6 * std::sqrt(depth)};
    check_close(from_device(dev, g.c), want, tol, "gemm_grouped");
}

const Dtypes kDtypes[] = {
    {DType::f32, DType::f32, DType::f32},   {DType::bf16, DType::f32, DType::bf16},
    {DType::bf16, DType::bf16, DType::f32}, {DType::f16, DType::f32, DType::f32},
    {DType::f16, DType::f16, DType::f16},
};

// Group sizes for a capacity `cap`: odd sizes with an empty group, everything in one group,
// capacity above the used rows, one group, nothing used, and a large capacity (the CUDA
// backend's tiles then span 8 rows, with big tiles, 1 / 2 / 4-row remainders and dummies).
std::vector<std::pair<int64_t, std::vector<int32_t>>> group_cases() {
    return {{9, {3, 0, 5, 1}}, {17, {0, 0, 17, 0}}, {11, {4, 2}},           {1, {1}},
            {6, {0, 0, 0}},    {200, {77, 0, 100}}, {40, {13, 0, 0, 21, 6}}};
}

void run_all(GroupDim dim) {
    for_each_test_device([&](Device& dev) {
        uint64_t seed = 1;
        for (const auto& [cap, rows] : group_cases()) {
            CAPTURE(cap);
            const Sizes z = dim == GroupDim::m ? Sizes{cap, 7, 5, rows} : Sizes{6, 7, cap, rows};
            for (const Dtypes& d : kDtypes)
                for (Trans tb : {Trans::N, Trans::T}) {
                    if (dim == GroupDim::k && tb == Trans::T) continue;
                    run_case(dev, {dim, tb, 1.0f, 0.0f, 0}, d, z, seed++);
                    run_case(dev, {dim, tb, 0.5f, 1.0f, 3}, d, z, seed++);
                }
        }
    });
}

}  // namespace

TEST_CASE("ops: gemm_grouped dim m (rows of A and C per group, one B per group)") {
    run_all(GroupDim::m);
}

TEST_CASE("ops: gemm_grouped dim k (rows of A and B per group, one C per group)") {
    run_all(GroupDim::k);
}

// Shapes the CUDA backend can give CUTLASS's grouped kernels on compute capability 9.0: 16-bit
// products whose leading dimensions and gaps keep every group's operands 16-byte aligned. Run
// on a Hopper GPU (tools/gpu-check.sh) they check those kernels against the reference;
// elsewhere, or with MOETRAIN_CUDA_GROUPED_GEMM=cublas, the cuBLAS tiling. The kernel that ran is
// named (gemm_grouped_kernel) and the profile books the op under it.
TEST_CASE("ops: gemm_grouped with 16-byte aligned 16-bit operands (CUTLASS on Hopper)") {
    const Dtypes dtypes[] = {{DType::bf16, DType::f32, DType::bf16},
                             {DType::bf16, DType::bf16, DType::bf16},
                             {DType::bf16, DType::f32, DType::f32},
                             {DType::f16, DType::f16, DType::f16}};
    for_each_test_device([&](Device& dev) {
        const bool cuda = dev.backend_name() == "cuda" || dev.backend_name() == "cudasim";
        uint64_t seed = 900;
        for (const auto& [cap, rows] : group_cases()) {
            CAPTURE(cap);
            for (GroupDim dim : {GroupDim::m, GroupDim::k}) {
                const Sizes z =
                    dim == GroupDim::m ? Sizes{cap, 24, 40, rows} : Sizes{16, 24, cap, rows};
                for (const Dtypes& d : dtypes)
                    for (Trans tb : {Trans::N, Trans::T}) {
                        if (dim == GroupDim::k && tb == Trans::T) continue;
                        run_case(dev, {dim, tb, 1.0f, 0.0f, 8, true}, d, z, seed++);
                        run_case(dev, {dim, tb, 0.5f, 1.0f, 0, true}, d, z, seed++);
                    }
            }
        }
        ProfilingDevice prof(dev);
        const Sizes z{64, 24, 40, {}};
        GemmArgs g = grouped_args({GroupDim::m, Trans::T, 1.0f, 0.0f, 0, true}, z);
        g.compute = DType::bf16;
        g.a = zeros(dev, z.m * g.lda, DType::bf16);
        g.b = zeros(dev, 2 * g.stride_b, DType::bf16);
        g.c = zeros(dev, z.m * g.ldc);
        const std::string kernel = dev.gemm_grouped_kernel(g, GroupDim::m);
        MESSAGE(dev.backend_name() << " gemm_grouped runs on: " << (kernel.empty() ? "-" : kernel));
        CHECK(cuda ? (kernel == "cutlass" || kernel == "cublas") : kernel.empty());
        if (dev.backend_name() == "cudasim") CHECK(kernel == "cublas");  // never built there
        // Not declined, on a Hopper GPU the kernels must run (a build without them fails here).
        const char* choice = std::getenv("MOETRAIN_CUDA_GROUPED_GEMM");
        if (dev.backend_name() == "cuda" && (!choice || std::string(choice) != "cublas") &&
            dev.name().find("compute capability 9.0") != std::string::npos)
            CHECK(kernel == "cutlass");
        prof.gemm_grouped(g, to_device(dev, std::vector<int32_t>{30, 34}), 2, GroupDim::m);
        const auto table = prof.table();
        REQUIRE(table.size() == 1);
        CHECK(table[0].op == (kernel.empty() ? "gemm_grouped" : "gemm_grouped[" + kernel + "]"));
    });
}

// MOETRAIN_CUDA_GROUPED_GEMM is read when a cuda device opens: a value other than cublas or
// cutlass is refused in one line naming it.
TEST_CASE("ops: gemm_grouped's kernel choice refuses an unknown MOETRAIN_CUDA_GROUPED_GEMM") {
    for (auto& d : test_devices()) {
        if (!records_graphs(*d.dev)) continue;  // cuda and cudasim only
        CAPTURE(d.id);
        check_env_refused(d.id, "MOETRAIN_CUDA_GROUPED_GEMM", "cutlas",
                          "MOETRAIN_CUDA_GROUPED_GEMM=cutlas: expected cublas or cutlass");
        ScopedEnv env("MOETRAIN_CUDA_GROUPED_GEMM", "cublas");
        CHECK(open_device(d.id)->backend_name() == d.dev->backend_name());
    }
}

// The sizes are read when the op runs: the same tensor with new sizes gives the new grouping.
TEST_CASE("ops: gemm_grouped reads the group sizes on every call") {
    for_each_test_device([&](Device& dev) {
        const Sizes z{12, 5, 4, {}};
        GemmArgs g = grouped_args({GroupDim::m, Trans::T, 1.0f, 0.0f, 0}, z);
        Rng rng(3);
        auto a = rng.normal(z.m * g.lda), b = rng.normal(2 * g.stride_b);
        g.a = to_device(dev, a);
        g.b = to_device(dev, b);
        Tensor rows = to_device(dev, std::vector<int32_t>{12, 0});
        for (const std::vector<int32_t>& r : {std::vector<int32_t>{12, 0}, {5, 7}, {0, 12}}) {
            dev.upload(rows, r.data());
            g.c = zeros(dev, z.m * g.ldc);
            dev.gemm_grouped(g, rows, 2, GroupDim::m);
            std::vector<double> want(static_cast<size_t>(z.m * g.ldc), 0.0);
            ref::gemm_grouped(ref::gemm_dims(g), a, b, want, r, GroupDim::m);
            check_close(from_device(dev, g.c), want, Tol{1e-4, 1e-5}, "gemm_grouped regrouped");
        }
    });
}

TEST_CASE("ops: gemm_grouped rejects bad arguments and bad group sizes") {
    for_each_test_device([&](Device& dev) {
        const Sizes z{8, 3, 4, {}};
        auto args = [&](GroupDim dim) {
            GemmArgs g = grouped_args({dim, Trans::N, 1.0f, 0.0f, 0},
                                      dim == GroupDim::m ? z : Sizes{3, 3, 8, {}});
            g.a = zeros(dev, 64);
            g.b = zeros(dev, 64);
            g.c = zeros(dev, 64);
            return g;
        };
        Tensor two = to_device(dev, std::vector<int32_t>{4, 4});
        GemmArgs g = args(GroupDim::m);
        g.ta = Trans::T;
        CHECK_THROWS_WITH_AS(dev.gemm_grouped(g, two, 2, GroupDim::m),
                             doctest::Contains("gemm_grouped: dim m needs ta = N"), Error);
        g = args(GroupDim::k);
        g.tb = Trans::T;
        CHECK_THROWS_WITH_AS(dev.gemm_grouped(g, two, 2, GroupDim::k),
                             doctest::Contains("gemm_grouped: dim k needs ta = T, tb = N"), Error);
        g = args(GroupDim::m);
        g.batch = 2;
        CHECK_THROWS_WITH_AS(dev.gemm_grouped(g, two, 2, GroupDim::m),
                             doctest::Contains("gemm_grouped: batch must be 1"), Error);
        g = args(GroupDim::m);
        CHECK_THROWS_WITH_AS(dev.gemm_grouped(g, zeros(dev, 2), 2, GroupDim::m),
                             doctest::Contains("gemm_grouped: group_rows is f32, must be i32"),
                             Error);
        CHECK_THROWS_WITH_AS(
            dev.gemm_grouped(g, two, 3, GroupDim::m),
            doctest::Contains("gemm_grouped: group_rows has 2 elements for 3 groups"), Error);
        g.c = zeros(dev, 20);
        CHECK_THROWS_WITH_AS(
            dev.gemm_grouped(g, two, 2, GroupDim::m),
            doctest::Contains("gemm_grouped (dim m): C has 20 elements, the capacity needs 24"),
            Error);
        // Bad sizes: thrown by the op (host-readable sizes) or by the next synchronize (cuda).
        for (GroupDim dim : {GroupDim::m, GroupDim::k}) {
            g = args(dim);
            auto run = [&](const std::vector<int32_t>& r) {
                dev.gemm_grouped(g, to_device(dev, r), static_cast<int64_t>(r.size()), dim);
                dev.synchronize();
            };
            CHECK_THROWS_WITH_AS(run({3, -2, 1}),
                                 doctest::Contains("gemm_grouped: negative group size: -2"), Error);
            CHECK_THROWS_WITH_AS(
                run({5, 0, 4}),
                doctest::Contains("gemm_grouped: the group sizes sum past the capacity to 9"),
                Error);
            CHECK_NOTHROW(run({5, 0, 3}));
        }
    });
}

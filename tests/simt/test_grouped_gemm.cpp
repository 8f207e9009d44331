// Harness tests of kernels_cuda/grouped_gemm.cuh and the tile plan it shares with the backend
// (backends/shared/grouped_gemm_plan.h). Everything of CudaDevice::gemm_grouped but cuBLAS
// itself runs here: the planning kernels under two thread interleavings, then the batched calls
// the backend would queue are EXECUTED from the pointer arrays / padded tiles by a row-major
// emulation (the column-major mapping of those calls, backends/cuda/cublas_calls.cpp, runs end
// to end in the cudasim op tests), and the whole grouped result is compared with the float64
// reference. Awkward cases: empty groups, one group holding every row, capacity above the used
// rows, TM = 1 and multi-row tiles (big tiles, remainders, dummies), several dim-k rounds,
// 16-bit operands, and invalid sizes (reported into the error word, the groups clamped).
#include <limits>
#include <numeric>

#include "harness_util.h"
#include "moetrain/dtype.h"
// after simt.h (harness_util.h):
#include "grouped_gemm.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;
namespace gp = moetrain::grouped;
using moetrain::DType;
using moetrain::GroupDim;
using moetrain::Trans;

namespace {

struct Case {
    int64_t cap;
    IVec sizes;
};

// Capacities and sizes: TM = 1 (small capacities), TM = 8 and 64 (big tiles, remainders,
// dummies), empty groups, everything in one group, unused capacity.
const Case kCases[] = {
    {9, {3, 0, 5, 1}},     {17, {0, 0, 17, 0}},     {11, {4, 2}},  {6, {0, 0, 0}},
    {300, {0, 150, 7, 0}}, {301, {13, 0, 200, 29}}, {1000, {999}},
};

// The sizes as the kernels clamp them: negatives count 0, rows past the capacity dropped.
IVec clamped(const IVec& sizes, int64_t cap) {
    IVec out;
    int64_t row = 0;
    for (int32_t s : sizes) {
        const int64_t r = std::max(s, 0);
        out.push_back(static_cast<int32_t>(std::min(row + r, cap) - std::min(row, cap)));
        row += r;
    }
    return out;
}

// An operand stored as `dt` (f32 values, or 16-bit patterns); data() is what the kernels read.
struct Stored {
    FVec f;
    std::vector<uint16_t> h;
    DType dt;
    Stored(const Vec& v, DType t) : dt(t) {
        if (t == DType::f32) {
            f = to_f32(v);
            return;
        }
        for (double x : v)
            h.push_back(t == DType::bf16 ? moetrain::f32_to_bf16(static_cast<float>(x))
                                         : moetrain::f32_to_f16(static_cast<float>(x)));
    }
    const void* data() const {
        return dt == DType::f32 ? static_cast<const void*>(f.data()) : h.data();
    }
    int64_t esize() const { return dt == DType::f32 ? 4 : 2; }
};

double load(const void* p, DType t, int64_t i) {
    if (t == DType::f32) return static_cast<const float*>(p)[i];
    const uint16_t h = static_cast<const uint16_t*>(p)[i];
    return t == DType::bf16 ? moetrain::bf16_to_f32(h) : moetrain::f16_to_f32(h);
}

// One row-major product C [rows, n] = alpha op(A) [rows, k] @ op(B) [k, n] + beta C (operands
// read as `t`, double accumulation; beta 0 does not read C).
struct Product {
    int64_t rows, n, k, lda, ldb, ldc;
    Trans ta, tb;
    float alpha, beta;
    DType t;
};
void run_product(const Product& q, const void* a, const void* b, float* c) {
    for (int64_t r = 0; r < q.rows; ++r)
        for (int64_t col = 0; col < q.n; ++col) {
            double acc = 0;
            for (int64_t p = 0; p < q.k; ++p)
                acc += load(a, q.t, q.ta == Trans::N ? r * q.lda + p : p * q.lda + r) *
                       load(b, q.t, q.tb == Trans::N ? p * q.ldb + col : col * q.ldb + p);
            float& cv = c[r * q.ldc + col];
            cv = q.beta == 0.0f ? static_cast<float>(q.alpha * acc)
                                : static_cast<float>(q.alpha * acc + q.beta * cv);
        }
}

// One batched call as gemm_batched describes it: C_e [rows, n] = alpha A_e [rows, k] @ op(B_e)
// + beta C_e for e < count.
void run_entries(const void* const* a, const void* const* b, float* const* c, int64_t count,
                 int64_t rows, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc,
                 Trans tb, float alpha, float beta, DType t) {
    const Product q{rows, n, k, lda, ldb, ldc, Trans::N, tb, alpha, beta, t};
    for (int64_t e = 0; e < count; ++e) run_product(q, a[e], b[e], c[e]);
}

}  // namespace

TEST_CASE("simt: grouped_gemm plan covers every row of every group exactly once") {
    for (const Case& c : kCases) {
        CAPTURE(c.cap);
        const auto groups = static_cast<int64_t>(c.sizes.size());
        for (bool dim_k : {false, true}) {
            CAPTURE(dim_k);
            const gp::Plan p = gp::make_plan(dim_k, c.cap, groups, 3, 4, 4, 4, 0, 0);
            CHECK(p.tile >= 1);
            CHECK(p.tile <=
                  std::max<int64_t>(1, c.cap / ((dim_k ? gp::kSpreadK : gp::kSpreadM) * groups)));
            std::vector<gp::Span> spans(static_cast<size_t>(groups));
            const gp::ScanResult sr =
                gp::scan_groups(c.sizes.data(), groups, c.cap, p.tile, dim_k, spans.data());
            CHECK(sr.error == gp::kScanOk);
            std::vector<int> owner(static_cast<size_t>(c.cap), -1);
            int64_t wasted = 0;
            auto mark = [&](const gp::Tile& t, int64_t height) {
                if (t.group < 0) {
                    wasted += height;
                    return;
                }
                const gp::Span s = spans[static_cast<size_t>(t.group)];
                REQUIRE(t.row0 >= s.row0);
                REQUIRE(t.row0 + t.rows <= s.row0 + s.rows);
                wasted += height - t.rows;
                for (int64_t r = t.row0; r < t.row0 + t.rows; ++r) {
                    CHECK(owner[static_cast<size_t>(r)] == -1);  // no row twice
                    owner[static_cast<size_t>(r)] = t.group;
                }
            };
            if (!dim_k) {
                CHECK(sr.tiles <= p.big);
                for (int64_t e = 0; e < p.entries; ++e) {
                    const int64_t height =
                        e < p.big ? p.tile : int64_t{1} << ((e - p.big) / groups);
                    const gp::Tile t =
                        gp::entry_tile(spans.data(), groups, p.tile, p.big, sr.tiles, e);
                    if (t.group >= 0) CHECK(t.rows == height);  // dim m tiles are full
                    mark(t, height);
                }
            } else {
                CHECK(sr.tiles <= p.tiles);
                for (int64_t t = 0; t < p.tiles; ++t)
                    mark(gp::tile_of(spans.data(), groups, p.tile, sr.tiles, t), p.tile);
            }
            int64_t row = 0;
            for (int64_t g = 0; g < groups; ++g)
                for (int32_t r = 0; r < c.sizes[static_cast<size_t>(g)]; ++r)
                    CHECK(owner[static_cast<size_t>(row++)] == g);
            for (; row < c.cap; ++row) CHECK(owner[static_cast<size_t>(row)] == -1);
            // Wasted rows (dummies, padding) stay below 2 * groups * TM plus the unused capacity.
            const int64_t used = std::accumulate(c.sizes.begin(), c.sizes.end(), int64_t{0});
            CHECK(wasted <= 2 * groups * p.tile + (c.cap - used));
        }
    }
}

// Dim m: grouped_pointers, then one emulated batched call per class.
TEST_CASE("simt: grouped_gemm dim m pointer arrays against the reference") {
    const int64_t n = 5, k = 3, pad = 2;
    struct Types {
        DType compute, a, b;
    };
    uint64_t seed = 1;
    for (const Case& c : kCases)
        for (Types ty : {Types{DType::f32, DType::f32, DType::f32},
                         Types{DType::bf16, DType::bf16, DType::bf16}})
            for (Trans tb : {Trans::N, Trans::T})
                for (float beta : {0.0f, 1.0f}) {
                    CAPTURE(c.cap);
                    CAPTURE(static_cast<int>(tb));
                    CAPTURE(beta);
                    const auto groups = static_cast<int64_t>(c.sizes.size());
                    const int64_t lda = k + pad, ldc = n + pad;
                    const int64_t b_rows = tb == Trans::N ? k : n,
                                  ldb = (tb == Trans::N ? n : k) + pad;
                    const int64_t stride_b = b_rows * ldb + 1;
                    Rng rng(seed++);
                    Vec a = rng.normal(c.cap * lda), b = rng.normal(groups * stride_b),
                        c0 = rng.normal(c.cap * ldc);
                    const int64_t used =
                        std::accumulate(c.sizes.begin(), c.sizes.end(), int64_t{0});
                    if (beta == 0.0f)  // not read
                        for (int64_t i = 0; i < used * ldc; ++i)
                            if (i % ldc < n)
                                c0[static_cast<size_t>(i)] =
                                    std::numeric_limits<double>::quiet_NaN();
                    const Stored sa(a, ty.a), sb(b, ty.b);
                    const float alpha = 0.75f;
                    auto got = two_schedules("grouped dim m", [&] {
                        const gp::Plan p =
                            gp::make_plan(false, c.cap, groups, c.cap, n, ldc, sa.esize(), 0, 0);
                        FVec out = to_f32(c0), dummy(static_cast<size_t>((p.tile - 1) * ldc + n));
                        std::vector<gp::Span> spans(static_cast<size_t>(groups));
                        std::vector<const void*> va(static_cast<size_t>(p.entries)), vb(va.size());
                        std::vector<float*> vc(va.size());
                        const void** ap = va.data();
                        const void** bp = vb.data();
                        float** cp = vc.data();
                        IVec err = {0, 0};
                        const mtk::GroupedOperands o{sa.data(),   lda * sa.esize(),
                                                     sb.data(),   stride_b * sb.esize(),
                                                     out.data(),  ldc,
                                                     dummy.data()};
                        mtk::grouped_pointers(nullptr, c.sizes.data(), groups, c.cap, p.tile, p.big,
                                              p.entries, o, spans.data(), ap, bp, cp, err.data());
                        for (int64_t cls = -1; cls < p.classes; ++cls) {
                            const int64_t e0 = cls < 0 ? 0 : p.big + cls * groups;
                            run_entries(ap + e0, bp + e0, cp + e0, cls < 0 ? p.big : groups,
                                        cls < 0 ? p.tile : int64_t{1} << cls, n, k, lda, ldb, ldc,
                                        tb, alpha, beta, ty.compute);
                        }
                        return std::make_pair(out, err);
                    });
                    CHECK(got.second == IVec{0, 0});
                    Vec want = c0;
                    const ref::Gemm g{.tb = tb,
                                      .m = c.cap,
                                      .n = n,
                                      .k = k,
                                      .alpha = alpha,
                                      .beta = beta,
                                      .lda = lda,
                                      .ldb = ldb,
                                      .ldc = ldc,
                                      .stride_b = stride_b};
                    ref::gemm_grouped(g, ref::rounded(a, ty.compute), ref::rounded(b, ty.compute),
                                      want, c.sizes, GroupDim::m);
                    check_close(got.first, want, Tol{1e-5, 1e-5}, "grouped dim m");
                }
}

namespace {

// Dim k as the backend queues it, with `per_round` tiles per round: scale, tiles, then per
// round pad A and B, the emulated strided product into the partials, and the reduce.
struct DimK {
    int64_t m, n, lda, ldb, ldc, stride_c;
    float alpha, beta;
    DType compute;
};
std::pair<FVec, IVec> run_dim_k(const DimK& d, const Case& c, const Stored& a, const Stored& b,
                                const Vec& c0, int64_t per_round) {
    const auto groups = static_cast<int64_t>(c.sizes.size());
    const int64_t es = d.compute == DType::f32 ? 4 : 2;
    gp::Plan p = gp::make_plan(true, c.cap, groups, d.m, d.n, d.ldc, es, 0, 0);
    p.per_round = std::min(per_round, p.tiles);
    p.rounds = (p.tiles + p.per_round - 1) / p.per_round;
    FVec out = to_f32(c0), partials(static_cast<size_t>(p.per_round * d.m * d.n), NAN);
    std::vector<uint8_t> pa(static_cast<size_t>(p.per_round * p.tile * d.m * es), 0xff),
        pb(static_cast<size_t>(p.per_round * p.tile * d.n * es), 0xff);
    std::vector<gp::Span> spans(static_cast<size_t>(groups));
    std::vector<gp::Tile> table(static_cast<size_t>(p.tiles));
    IVec err = {0, 0};
    const auto kind = [](DType t) { return static_cast<mtk::FloatKind>(static_cast<int>(t)); };
    if (d.beta != 1.0f)
        mtk::grouped_scale(nullptr, out.data(), groups, d.stride_c, d.m, d.n, d.ldc, d.beta);
    mtk::grouped_tiles(nullptr, c.sizes.data(), groups, c.cap, p.tile, p.tiles, spans.data(),
                       table.data(), err.data());
    for (int64_t r = 0; r < p.rounds; ++r) {
        const int64_t t0 = r * p.per_round, count = std::min(p.per_round, p.tiles - t0);
        mtk::grouped_pad(nullptr, pa.data(), kind(d.compute), a.data(), kind(a.dt), d.lda, d.m,
                         table.data() + t0, count, p.tile);
        mtk::grouped_pad(nullptr, pb.data(), kind(d.compute), b.data(), kind(b.dt), d.ldb, d.n,
                         table.data() + t0, count, p.tile);
        for (int64_t q = 0; q < count; ++q)  // partial_q = alpha A'_q^T B'_q (row-major, compact)
            for (int64_t i = 0; i < d.m; ++i)
                for (int64_t j = 0; j < d.n; ++j) {
                    double acc = 0;
                    for (int64_t t = 0; t < p.tile; ++t)
                        acc += load(pa.data(), d.compute, (q * p.tile + t) * d.m + i) *
                               load(pb.data(), d.compute, (q * p.tile + t) * d.n + j);
                    partials[static_cast<size_t>((q * d.m + i) * d.n + j)] =
                        static_cast<float>(d.alpha * acc);
                }
        mtk::grouped_reduce(nullptr, out.data(), d.stride_c, d.ldc, partials.data(),
                            table.data() + t0, count, d.m, d.n);
    }
    return {out, err};
}

ref::Gemm dim_k_gemm(const DimK& d, int64_t cap) {
    return {.ta = Trans::T,
            .m = d.m,
            .n = d.n,
            .k = cap,
            .alpha = d.alpha,
            .beta = d.beta,
            .lda = d.lda,
            .ldb = d.ldb,
            .ldc = d.ldc,
            .stride_c = d.stride_c};
}

}  // namespace

TEST_CASE("simt: grouped_gemm dim k padded tiles, rounds and reduce against the reference") {
    uint64_t seed = 100;
    for (const Case& c : kCases)
        for (DType compute : {DType::f32, DType::bf16, DType::f16})
            for (float beta : {0.0f, 1.0f, 0.5f})
                for (int64_t per_round : {int64_t{1}, int64_t{3}, int64_t{1000}}) {
                    CAPTURE(c.cap);
                    CAPTURE(static_cast<int>(compute));
                    CAPTURE(beta);
                    CAPTURE(per_round);
                    const auto groups = static_cast<int64_t>(c.sizes.size());
                    DimK d{4, 3, 4 + 1, 3 + 2, 3 + 1, 0, 0.5f, beta, compute};
                    d.stride_c = d.m * d.ldc + 3;
                    Rng rng(seed++);
                    Vec a = rng.normal(c.cap * d.lda), b = rng.normal(c.cap * d.ldb),
                        c0 = rng.normal(groups * d.stride_c);
                    if (beta == 0.0f)  // not read
                        for (int64_t g = 0; g < groups; ++g)
                            for (int64_t i = 0; i < d.m * d.ldc; ++i)
                                if (i % d.ldc < d.n)
                                    c0[static_cast<size_t>(g * d.stride_c + i)] = NAN;
                    // f32 compute: f32 operands; 16-bit: A f32 (converted by the pad), B 16-bit.
                    const Stored sa(a, DType::f32), sb(b, compute);
                    auto got = two_schedules(
                        "grouped dim k", [&] { return run_dim_k(d, c, sa, sb, c0, per_round); });
                    CHECK(got.second == IVec{0, 0});
                    Vec want = c0;  // the padding and the gaps between the C_i keep their values
                    ref::gemm_grouped(dim_k_gemm(d, c.cap), ref::rounded(a, compute),
                                      ref::rounded(b, compute), want, c.sizes, GroupDim::k);
                    check_close(got.first, want, Tol{1e-5, 1e-5}, "grouped dim k");
                }
}

namespace {

// The per-group products a kernel with device-side sizes (CUTLASS) runs from grouped_problems'
// output, row-major as cutlass_grouped.h describes them: D_i [M, N] = alpha op(A_i) op(B_i) +
// beta C_i, every group with the same leading dimensions (operands read as `t`).
void run_problems(const IVec& problems, const std::vector<const void*>& a,
                  const std::vector<const void*>& b, const std::vector<float*>& c, Trans ta,
                  Trans tb, int64_t lda, int64_t ldb, int64_t ldc, float alpha, float beta,
                  DType t) {
    for (size_t i = 0; i < a.size(); ++i) {
        const int64_t M = problems[3 * i], N = problems[3 * i + 1], K = problems[3 * i + 2];
        if (M == 0 || N == 0) continue;  // no output tile
        // M, N > 0 with K = 0 would leave the kernel's accumulators unset (cutlass_grouped.h).
        REQUIRE(K > 0);
        run_product({M, N, K, lda, ldb, ldc, ta, tb, alpha, beta, t}, a[i], b[i], c[i]);
    }
}

}  // namespace

// grouped_problems for both dims and the three layouts with CUTLASS kernels: the sizes and
// pointers it writes, run as per-group products, give the float64 reference's grouped result
// (dim k after grouped_scale, with beta 1, as the backend queues it). Empty groups have no
// output tile; invalid sizes are reported and clamped as for the cuBLAS tiling.
TEST_CASE("simt: grouped_gemm per-group problems (CUTLASS) against the reference") {
    uint64_t seed = 500;
    const int64_t pad = 3;
    for (const Case& c : kCases)
        for (bool dim_k : {false, true})
            for (auto [ta, tb] : {std::pair{Trans::N, Trans::T}, std::pair{Trans::N, Trans::N},
                                  std::pair{Trans::T, Trans::N}})
                for (float beta : {0.0f, 1.0f}) {
                    if (dim_k != (ta == Trans::T)) continue;  // the model's layouts per dim
                    CAPTURE(c.cap);
                    CAPTURE(dim_k);
                    CAPTURE(static_cast<int>(tb));
                    CAPTURE(beta);
                    const auto groups = static_cast<int64_t>(c.sizes.size());
                    // dim m: C [cap, n] = A [cap, k] op(B_i); dim k: C_i [m, n] = A^T B.
                    const int64_t m = dim_k ? 4 : c.cap, n = 5, k = dim_k ? c.cap : 3;
                    const int64_t a_cols = dim_k ? m : k, lda = a_cols + pad;
                    const int64_t b_rows = dim_k ? c.cap : (tb == Trans::N ? k : n);
                    const int64_t ldb = (dim_k ? n : (tb == Trans::N ? n : k)) + pad;
                    const int64_t stride_b = dim_k ? 0 : b_rows * ldb + 8;
                    const int64_t ldc = n + pad, stride_c = dim_k ? m * ldc + 4 : 0;
                    Rng rng(seed++);
                    Vec a = rng.normal(c.cap * lda),
                        b = rng.normal(dim_k ? c.cap * ldb : groups * stride_b),
                        c0 = rng.normal(dim_k ? groups * stride_c : c.cap * ldc);
                    const Stored sa(a, DType::bf16), sb(b, DType::bf16);
                    const float alpha = 0.5f;
                    auto got = two_schedules("grouped problems", [&] {
                        FVec out = to_f32(c0);
                        std::vector<gp::Span> spans(static_cast<size_t>(groups));
                        IVec problems(static_cast<size_t>(3 * groups), -7), err = {0, 0};
                        std::vector<const void*> ap(static_cast<size_t>(groups)), bp(ap.size());
                        std::vector<float*> cp(ap.size());
                        if (dim_k && beta != 1.0f)
                            mtk::grouped_scale(nullptr, out.data(), groups, stride_c, m, n, ldc,
                                               beta);
                        const mtk::GroupedSteps steps{.a = sa.data(),
                                                      .a_row_bytes = lda * 2,
                                                      .b = sb.data(),
                                                      .b_row_bytes = dim_k ? ldb * 2 : 0,
                                                      .b_group_bytes = dim_k ? 0 : stride_b * 2,
                                                      .c = out.data(),
                                                      .c_row = dim_k ? 0 : ldc,
                                                      .c_group = dim_k ? stride_c : 0};
                        mtk::grouped_problems(
                            nullptr, c.sizes.data(), groups, c.cap, dim_k, static_cast<int32_t>(m),
                            static_cast<int32_t>(n), static_cast<int32_t>(k), steps, spans.data(),
                            problems.data(), ap.data(), bp.data(), cp.data(), err.data());
                        for (int64_t i = 0; i < groups; ++i) {  // the encoding of each group
                            const int32_t M = problems[static_cast<size_t>(3 * i)],
                                          K = problems[static_cast<size_t>(3 * i + 2)];
                            CHECK(problems[static_cast<size_t>(3 * i + 1)] == n);
                            if (dim_k)
                                CHECK((K > 0 ? M == m : M == 0));
                            else
                                CHECK(K == k);
                        }
                        run_problems(problems, ap, bp, cp, ta, tb, lda, ldb, ldc, alpha,
                                     dim_k ? 1.0f : beta, DType::bf16);
                        return std::make_pair(out, err);
                    });
                    CHECK(got.second == IVec{0, 0});
                    Vec want = c0;
                    const ref::Gemm g{.ta = ta,
                                      .tb = tb,
                                      .m = m,
                                      .n = n,
                                      .k = k,
                                      .alpha = alpha,
                                      .beta = beta,
                                      .lda = lda,
                                      .ldb = ldb,
                                      .ldc = ldc,
                                      .stride_b = stride_b,
                                      .stride_c = stride_c};
                    ref::gemm_grouped(g, ref::rounded(a, DType::bf16), ref::rounded(b, DType::bf16),
                                      want, c.sizes, dim_k ? GroupDim::k : GroupDim::m);
                    check_close(got.first, want, Tol{1e-5, 1e-5}, "grouped problems");
                }
}

// Invalid sizes: the first problem goes to the error word and the product runs over the
// clamped groups (never outside the capacity).
TEST_CASE("simt: grouped_gemm reports invalid group sizes and clamps the groups") {
    const DimK d{2, 3, 2, 3, 3, 6, 1.0f, 0.0f, DType::f32};
    for (auto [c, code, value] : {std::tuple{Case{10, {5, -3, 2}}, mtk::kErrGroupRows, -3},
                                  std::tuple{Case{10, {8, 8, 1}}, mtk::kErrGroupTotal, 17},
                                  std::tuple{Case{64, {-1, 70}}, mtk::kErrGroupRows, -1}}) {
        CAPTURE(c.cap);
        const auto groups = static_cast<int64_t>(c.sizes.size());
        Rng rng(7);
        Vec a = rng.normal(c.cap * d.lda), b = rng.normal(c.cap * d.ldb),
            c0 = rng.normal(groups * d.stride_c);
        const Stored sa(a, DType::f32), sb(b, DType::f32);
        auto got = two_schedules("grouped dim k, invalid sizes",
                                 [&] { return run_dim_k(d, c, sa, sb, c0, 2); });
        CHECK(got.second == IVec{code, value});
        Vec want = c0;
        ref::gemm_grouped(dim_k_gemm(d, c.cap), a, b, want, clamped(c.sizes, c.cap), GroupDim::k);
        check_close(got.first, want, Tol{1e-5, 1e-5}, "grouped dim k, clamped");

        // Dim m: every pointer stays inside A, B and C (or the dummy C).
        const int64_t n = 2, k = 2;
        const gp::Plan p = gp::make_plan(false, c.cap, groups, c.cap, n, n, 4, 0, 0);
        FVec fa(static_cast<size_t>(c.cap * k)), fb(static_cast<size_t>(groups * k * n)),
            fc(static_cast<size_t>(c.cap * n)), dummy(static_cast<size_t>(p.tile * n));
        std::vector<gp::Span> spans(static_cast<size_t>(groups));
        std::vector<const void*> ap(static_cast<size_t>(p.entries)), bp(ap.size());
        std::vector<float*> cp(ap.size());
        IVec err = {0, 0};
        const mtk::GroupedOperands o{fa.data(), k * 4, fb.data(),   k * n * 4,
                                     fc.data(), n,     dummy.data()};
        mtk::grouped_pointers(nullptr, c.sizes.data(), groups, c.cap, p.tile, p.big, p.entries, o,
                              spans.data(), ap.data(), bp.data(), cp.data(), err.data());
        CHECK(err == IVec{code, value});
        // The per-group problems (CUTLASS): the clamped sizes, the error reported the same way.
        IVec problems(static_cast<size_t>(3 * groups)), perr = {0, 0};
        std::vector<const void*> gap(static_cast<size_t>(groups)), gbp(gap.size());
        std::vector<float*> gcp(gap.size());
        const mtk::GroupedSteps steps{.a = fa.data(),
                                      .a_row_bytes = k * 4,
                                      .b = fb.data(),
                                      .b_group_bytes = k * n * 4,
                                      .c = fc.data(),
                                      .c_row = n};
        mtk::grouped_problems(nullptr, c.sizes.data(), groups, c.cap, false, 0, 2, 2, steps,
                              spans.data(), problems.data(), gap.data(), gbp.data(), gcp.data(),
                              perr.data());
        CHECK(perr == IVec{code, value});
        const IVec rows = clamped(c.sizes, c.cap);
        for (int64_t i = 0; i < groups; ++i) {
            CHECK(problems[static_cast<size_t>(3 * i)] == rows[static_cast<size_t>(i)]);
            const float* ci = gcp[static_cast<size_t>(i)];
            CHECK((ci >= fc.data() &&
                   ci + rows[static_cast<size_t>(i)] * n <= fc.data() + fc.size()));
        }
        for (int64_t e = 0; e < p.entries; ++e) {
            const int64_t h = e < p.big ? p.tile : int64_t{1} << ((e - p.big) / groups);
            const float* ce = cp[static_cast<size_t>(e)];
            const auto* ae = static_cast<const float*>(ap[static_cast<size_t>(e)]);
            CHECK((ce == dummy.data() || (ce >= fc.data() && ce + h * n <= fc.data() + fc.size())));
            CHECK((ae >= fa.data() && ae + h * k <= fa.data() + fa.size()));
        }
    }
}

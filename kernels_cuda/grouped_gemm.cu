// CudaDevice::gemm_grouped (docs/CUDA.md, "Grouped GEMM") with the kernels of grouped_gemm.cuh: the
// group sizes never leave the device, so the op queues a fixed sequence of kernels and cuBLAS calls
// sized by the capacity and the group count alone (backends/shared/grouped_gemm_plan.h) and can be
// captured in a CUDA Graph. Its scratch (pointer arrays / tile table, 16-bit operand copies, dummy
// C, dim-k round buffers) is one request to the context scratch, the same size for every call of a
// shape, so after the first call nothing is allocated.
//  dim m: grouped_pointers writes the pointer arrays of every tile class, then one
//    cublasGemmBatchedEx per class (the big tiles, then the 2^j-row remainder tiles) writes
//    disjoint row tiles of C with alpha / beta as given.
//  dim k: C_i = beta C_i, grouped_tiles lays the groups out in padded TM-row tiles, then per
//    round: the round's tiles of A and B copied compact (zero padded, in the compute dtype), one
//    strided-batched product per tile into its partial buffer, and grouped_reduce adding the
//    partials into their C_i in tile order.
//  CUTLASS (the default on compute capability 9.0 for 16-bit products, both dims;
//    MOETRAIN_CUDA_GROUPED_GEMM=cublas keeps the tiling above): f32 operands converted over their
//    capacity span, grouped_problems writes each group's sizes and pointers, and one CUTLASS
//    grouped kernel reads them on the device: no padding, dummies or partial products
//    (backends/cuda/cutlass_grouped.h).
#include <algorithm>
#include <climits>
#include <string>

#include "grouped_gemm.cuh"

#include "cuda/cuda_device.h"
#include "cuda/cutlass_grouped.h"
#include "cuda/env_choice.h"
#include "shared/grouped_gemm.h"
#include "shared/grouped_gemm_plan.h"

namespace moetrain::cuda {
namespace {

namespace gp = grouped;
constexpr const char* kOp = "gemm_grouped";

// Consecutive parts of one scratch block, in the order of gp::Plan.
struct Carve {
    char* base;
    size_t at = 0;
    template <typename T>
    T* take(size_t bytes) {
        T* p = bytes ? reinterpret_cast<T*>(base + at) : nullptr;
        at += bytes;
        return p;
    }
};

// An operand as the 16-bit products read it: `n` f32 elements at src rounded into dst (n > 0:
// an f32 operand of a 16-bit product), or src itself.
const void* operand16(CudaDevice& dev, DType compute, const void* src, int64_t n, char* dst) {
    if (n <= 0) return src;
    dev.round_operand(dst, compute, src, n);
    return dst;
}

// Dim k, before any product: C_i = beta C_i for every group (beta 1: nothing), so that the
// products can add and empty groups end scaled too. False when there is no product (k == 0).
bool scale_dim_k(CudaDevice& dev, const GemmArgs& g, int64_t groups) {
    if (g.beta != 1.0f)
        mtk::grouped_scale(dev.stream(kOp), static_cast<float*>(dev.raw(g.c)), groups, g.stride_c,
                           g.m, g.n, g.ldc, g.beta);
    dev.launched(kOp);
    return g.k != 0;
}

void grouped_m(CudaDevice& dev, const GemmArgs& g, const int32_t* sizes, int64_t groups) {
    const GroupedSpans sp = grouped_spans(g, groups, GroupDim::m);
    const bool half = g.compute != DType::f32;
    const int64_t esize = half ? 2 : 4;
    const bool conv_a = half && g.a.dtype == DType::f32, conv_b = half && g.b.dtype == DType::f32;
    const gp::Plan p = gp::make_plan(false, g.m, groups, g.m, g.n, g.ldc, esize, conv_a ? sp.a : 0,
                                     conv_b ? sp.b : 0);
    auto* c = static_cast<float*>(dev.raw(g.c));
    Carve s{static_cast<char*>(dev.scratch(p.total()))};
    auto* spans = s.take<gp::Span>(p.spans);
    const size_t ptr_bytes = static_cast<size_t>(p.entries) * sizeof(void*);  // table: A, B, C
    auto** a_ptrs = s.take<const void*>(ptr_bytes);
    auto** b_ptrs = s.take<const void*>(ptr_bytes);
    auto** c_ptrs = s.take<float*>(p.table - 2 * ptr_bytes);
    auto* ca = s.take<char>(p.convert_a);
    auto* cb = s.take<char>(p.convert_b);
    auto* dummy = s.take<float>(p.dummy_c);
    mtk::Stream st = dev.stream(kOp);
    const void* a = operand16(dev, g.compute, dev.raw(g.a), conv_a ? sp.a : 0, ca);
    const void* b = operand16(dev, g.compute, dev.raw(g.b), conv_b ? sp.b : 0, cb);
    const mtk::GroupedOperands o{a, g.lda * esize, b, g.stride_b * esize, c, g.ldc, dummy};
    mtk::grouped_pointers(st, sizes, groups, g.m, p.tile, p.big, p.entries, o, spans, a_ptrs,
                          b_ptrs, c_ptrs, dev.error_word());
    dev.launched(kOp);
    GemmArgs t = g;  // one batched call per tile class: m = the class's tile rows
    for (int64_t cls = -1; cls < p.classes; ++cls) {
        const int64_t e0 = cls < 0 ? 0 : p.big + cls * groups;
        const int64_t count = cls < 0 ? p.big : groups;
        if (count == 0) continue;
        t.m = cls < 0 ? p.tile : int64_t{1} << cls;
        dev.cublas_batched(t, a_ptrs + e0, b_ptrs + e0, c_ptrs + e0, count);
    }
}

void grouped_k(CudaDevice& dev, const GemmArgs& g, const int32_t* sizes, int64_t groups) {
    auto* c = static_cast<float*>(dev.raw(g.c));
    mtk::Stream st = dev.stream(kOp);
    if (!scale_dim_k(dev, g, groups)) return;
    const int64_t esize = g.compute == DType::f32 ? 4 : 2;
    const gp::Plan p = gp::make_plan(true, g.k, groups, g.m, g.n, g.ldc, esize, 0, 0);
    const void* a = dev.raw(g.a);
    const void* b = dev.raw(g.b);
    Carve s{static_cast<char*>(dev.scratch(p.total()))};
    auto* spans = s.take<gp::Span>(p.spans);
    auto* table = s.take<gp::Tile>(p.table);
    auto* pa = s.take<char>(p.padded_a);
    auto* pb = s.take<char>(p.padded_b);
    auto* partials = s.take<float>(p.partials);
    mtk::grouped_tiles(st, sizes, groups, g.k, p.tile, p.tiles, spans, table, dev.error_word());
    dev.launched(kOp);
    GemmArgs t;  // partial_p = alpha * A'_p^T B'_p over the round's padded tiles
    t.ta = Trans::T;
    t.tb = Trans::N;
    t.m = g.m;
    t.n = g.n;
    t.k = p.tile;
    t.alpha = g.alpha;
    t.beta = 0.0f;
    t.lda = g.m;
    t.ldb = g.n;
    t.ldc = g.n;
    t.stride_a = p.tile * g.m;
    t.stride_b = p.tile * g.n;
    t.stride_c = g.m * g.n;
    t.compute = g.compute;
    for (int64_t r = 0; r < p.rounds; ++r) {
        const int64_t t0 = r * p.per_round, count = std::min(p.per_round, p.tiles - t0);
        mtk::grouped_pad(st, pa, float_kind(g.compute), a, float_kind(g.a.dtype), g.lda, g.m,
                         table + t0, count, p.tile);
        mtk::grouped_pad(st, pb, float_kind(g.compute), b, float_kind(g.b.dtype), g.ldb, g.n,
                         table + t0, count, p.tile);
        dev.launched(kOp);
        t.batch = count;
        dev.cublas_strided(t, pa, pb, partials);
        mtk::grouped_reduce(st, c, g.stride_c, g.ldc, partials, table + t0, count, g.m, g.n);
        dev.launched(kOp);
    }
}

// 16-byte alignment of a device address (TMA's rule for the CUTLASS kernels' operands).
bool aligned16(const void* p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// Both dims on the CUTLASS kernels: one scratch block holds the spans, the groups' (M, N, K),
// the three pointer arrays, the 16-bit copies of f32 operands and CUTLASS's own scratch.
void grouped_cutlass(CudaDevice& dev, const GemmArgs& g, const int32_t* sizes, int64_t groups,
                     GroupDim dim, int sm_count) {
    const bool dim_k = dim == GroupDim::k;
    auto* c = static_cast<float*>(dev.raw(g.c));
    mtk::Stream st = dev.stream(kOp);
    if (dim_k && !scale_dim_k(dev, g, groups)) return;  // then the products add (beta 1)
    const GroupedSpans sp = grouped_spans(g, groups, dim);
    const bool conv_a = g.a.dtype == DType::f32, conv_b = g.b.dtype == DType::f32;
    const auto n = static_cast<size_t>(groups);
    const size_t ptr_bytes = gp::align256(n * sizeof(void*));
    const size_t cut = cutlass_grouped_scratch(g.ta, g.tb, g.compute, groups, sm_count);
    const size_t part_spans = gp::align256(n * sizeof(gp::Span)),
                 part_problems = gp::align256(n * 3 * sizeof(int32_t)),
                 part_a = conv_a ? gp::align256(static_cast<size_t>(sp.a) * 2) : 0,
                 part_b = conv_b ? gp::align256(static_cast<size_t>(sp.b) * 2) : 0;
    Carve s{static_cast<char*>(
        dev.scratch(part_spans + part_problems + 3 * ptr_bytes + part_a + part_b + cut))};
    auto* spans = s.take<gp::Span>(part_spans);
    auto* problems = s.take<int32_t>(part_problems);
    auto** a_ptrs = s.take<const void*>(ptr_bytes);
    auto** b_ptrs = s.take<const void*>(ptr_bytes);
    auto** c_ptrs = s.take<float*>(ptr_bytes);
    auto* ca = s.take<char>(part_a);
    auto* cb = s.take<char>(part_b);
    void* cutlass_scratch = s.take<char>(cut);
    const void* a = operand16(dev, g.compute, dev.raw(g.a), conv_a ? sp.a : 0, ca);
    const void* b = operand16(dev, g.compute, dev.raw(g.b), conv_b ? sp.b : 0, cb);
    // dim m: A_i and C_i move by rows, B_i by groups; dim k: A_i and B_i by rows, C_i by groups.
    const mtk::GroupedSteps steps{.a = a,
                                  .a_row_bytes = g.lda * 2,
                                  .b = b,
                                  .b_row_bytes = dim_k ? g.ldb * 2 : 0,
                                  .b_group_bytes = dim_k ? 0 : g.stride_b * 2,
                                  .c = c,
                                  .c_row = dim_k ? 0 : g.ldc,
                                  .c_group = dim_k ? g.stride_c : 0};
    mtk::grouped_problems(st, sizes, groups, grouped_capacity(g, dim), dim_k,
                          static_cast<int32_t>(g.m), static_cast<int32_t>(g.n),
                          static_cast<int32_t>(g.k), steps, spans, problems, a_ptrs, b_ptrs, c_ptrs,
                          dev.error_word());
    dev.launched(kOp);
    cutlass_grouped_run({.ta = g.ta,
                         .tb = g.tb,
                         .dtype = g.compute,
                         .groups = groups,
                         .problems = problems,
                         .a_ptrs = a_ptrs,
                         .b_ptrs = b_ptrs,
                         .c_ptrs = c_ptrs,
                         .lda = g.lda,
                         .ldb = g.ldb,
                         .ldc = g.ldc,
                         .alpha = g.alpha,
                         .beta = dim_k ? 1.0f : g.beta,
                         .scratch = cutlass_scratch,
                         .sm_count = sm_count,
                         .stream = st});
    dev.launched(kOp);
}

}  // namespace

std::string grouped_gemm_choice() {
    return env_choice("MOETRAIN_CUDA_GROUPED_GEMM", "cutlass", "cublas", "cutlass");
}

std::string grouped_gemm_summary(int cc) {
    std::string s = "grouped GEMM (MoE experts): cuBLAS tiling";
    if (!cutlass_grouped_built()) return s + " (this build has no CUTLASS kernels)";
    if (cc != 90) return s + " (CUTLASS kernels need compute capability 9.0)";
    return "grouped GEMM (MoE experts): CUTLASS sm_90a for bf16 / f16 products, cuBLAS tiling "
           "otherwise (MOETRAIN_CUDA_GROUPED_GEMM=cublas: always)";
}

bool CudaDevice::grouped_runs_cutlass(const GemmArgs& g, GroupDim dim) const {
    if (!grouped_cutlass_ || !cutlass_grouped_built() || cc_ != 90) return false;
    if (g.compute == DType::f32 || (dim == GroupDim::m && g.k == 0)) return false;
    if (!cutlass_grouped_supports(g.ta, g.tb, g.compute, g.lda, g.ldb, g.ldc)) return false;
    // Group offsets stay 16-byte aligned: B_i (dim m) and C_i (dim k) by their batch stride.
    if (dim == GroupDim::m ? g.stride_b % 8 != 0 : g.stride_c % 4 != 0) return false;
    // f32 operands are converted into 256-byte aligned copies; the others must be aligned.
    auto ok = [&](const Tensor& t) { return t.dtype == DType::f32 || aligned16(raw(t)); };
    return ok(g.a) && ok(g.b) && aligned16(raw(g.c));
}

std::string CudaDevice::gemm_grouped_kernel(const GemmArgs& g, GroupDim dim) const {
    return grouped_runs_cutlass(g, dim) ? "cutlass" : "cublas";
}

void CudaDevice::gemm_grouped_impl(const GemmArgs& g, const Tensor& group_rows, int64_t groups,
                                   GroupDim dim) {
    MT_CHECK(grouped_capacity(g, dim) <= INT_MAX, kOp, ": capacity ", grouped_capacity(g, dim),
             " exceeds int32 row indices");
    const int32_t* sizes = i32(group_rows);
    if (groups == 0 || g.m == 0 || g.n == 0) return;
    if (grouped_runs_cutlass(g, dim))
        grouped_cutlass(*this, g, sizes, groups, dim, sm_count_);
    else if (dim == GroupDim::m)
        grouped_m(*this, g, sizes, groups);
    else
        grouped_k(*this, g, sizes, groups);
}

}  // namespace moetrain::cuda

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
#include <algorithm>
#include <climits>

#include "grouped_gemm.cuh"

#include "cuda/cuda_device.h"
#include "shared/grouped_gemm.h"
#include "shared/grouped_gemm_plan.h"

namespace moetrain::cuda {
namespace {

namespace gp = grouped;
constexpr const char* kOp = "gemm_grouped";

mtk::FloatKind kind_of(DType t) {
    return static_cast<mtk::FloatKind>(static_cast<int>(t));
}

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

void grouped_m(CudaDevice& dev, const GemmArgs& g, const int32_t* sizes, int64_t groups) {
    const GroupedSpans sp = grouped_spans(g, groups, GroupDim::m);
    const bool half = g.compute != DType::f32;
    const int64_t esize = half ? 2 : 4;
    const bool conv_a = half && g.a.dtype == DType::f32, conv_b = half && g.b.dtype == DType::f32;
    const gp::Plan p = gp::make_plan(false, g.m, groups, g.m, g.n, g.ldc, esize, conv_a ? sp.a : 0,
                                     conv_b ? sp.b : 0);
    const void* a = dev.raw(g.a);
    const void* b = dev.raw(g.b);
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
    if (conv_a && sp.a > 0) {
        dev.round_operand(ca, g.compute, a, sp.a);
        a = ca;
    }
    if (conv_b && sp.b > 0) {
        dev.round_operand(cb, g.compute, b, sp.b);
        b = cb;
    }
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
    if (g.beta != 1.0f) mtk::grouped_scale(st, c, groups, g.stride_c, g.m, g.n, g.ldc, g.beta);
    dev.launched(kOp);
    if (g.k == 0) return;
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
        mtk::grouped_pad(st, pa, kind_of(g.compute), a, kind_of(g.a.dtype), g.lda, g.m, table + t0,
                         count, p.tile);
        mtk::grouped_pad(st, pb, kind_of(g.compute), b, kind_of(g.b.dtype), g.ldb, g.n, table + t0,
                         count, p.tile);
        dev.launched(kOp);
        t.batch = count;
        dev.cublas_strided(t, pa, pb, partials);
        mtk::grouped_reduce(st, c, g.stride_c, g.ldc, partials, table + t0, count, g.m, g.n);
        dev.launched(kOp);
    }
}

}  // namespace

void CudaDevice::gemm_grouped_impl(const GemmArgs& g, const Tensor& group_rows, int64_t groups,
                                   GroupDim dim) {
    MT_CHECK(grouped_capacity(g, dim) <= INT_MAX, kOp, ": capacity ", grouped_capacity(g, dim),
             " exceeds int32 row indices");
    const int32_t* sizes = i32(group_rows);
    if (groups == 0 || g.m == 0 || g.n == 0) return;
    if (dim == GroupDim::m)
        grouped_m(*this, g, sizes, groups);
    else
        grouped_k(*this, g, sizes, groups);
}

}  // namespace moetrain::cuda

// CudaDevice::gemm with cuBLAS (cublas_calls.h), gemm_epilogue with cuBLASLt (cublaslt_calls.h),
// the decode step's skinny products on kernels_cuda/gemv.cuh instead (gemv_takes), and the
// cuBLAS products the grouped GEMM (kernels_cuda/grouped_gemm.cu) queues, on the device stream.
#include "cuda/cublas_calls.h"
#include "cuda/cublaslt_calls.h"
#include "cuda/cuda_context.h"
#include "cuda/cuda_device.h"
#include "launch.h"
#include "shared/gemm_dtypes.h"

namespace moetrain::cuda {

namespace {
// Elements a strided-batched row-major operand spans: (batch-1)*stride + (rows-1)*ld + cols.
int64_t span(int64_t batch, int64_t stride, int64_t rows, int64_t cols, int64_t ld) {
    return gemm_span(batch, stride, rows, cols, ld);
}
}  // namespace

// compute = bf16 / f16: cuBLAS multiplies 16-bit A and B directly; an f32 operand is first
// converted to `compute` (round_operand) over its whole span into the context scratch, so its
// ld and batch stride stay as they are. The converted copies and the extra bytes start 256-byte
// aligned.
CudaDevice::GemmOperands CudaDevice::gemm_operands(const GemmArgs& g, size_t extra_bytes) {
    const int64_t a_rows = g.ta == Trans::N ? g.m : g.k, a_cols = g.ta == Trans::N ? g.k : g.m;
    const int64_t b_rows = g.tb == Trans::N ? g.k : g.n, b_cols = g.tb == Trans::N ? g.n : g.k;
    const bool convert = g.compute != DType::f32;
    const int64_t na = span(g.batch, g.stride_a, a_rows, a_cols, g.lda);
    const int64_t nb = span(g.batch, g.stride_b, b_rows, b_cols, g.ldb);
    GemmOperands ops{convert ? raw(g.a) : f32(g.a), convert ? raw(g.b) : f32(g.b)};
    // 256-byte aligned parts of the scratch for the operands that need converting.
    auto part = [](bool f32, int64_t n) {
        return f32 ? (static_cast<size_t>(n) * 2 + 255) / 256 * 256 : 0;
    };
    const size_t pa = part(convert && g.a.dtype == DType::f32, na);
    const size_t pb = part(convert && g.b.dtype == DType::f32, nb);
    const size_t total = pa + pb + extra_bytes;
    auto* tmp = total ? static_cast<char*>(scratch(total)) : nullptr;
    if (extra_bytes) ops.extra = tmp + pa + pb;
    if (pa) {
        round_operand(tmp, g.compute, ops.a, na);
        ops.a = tmp;
    }
    if (pb) {
        round_operand(tmp + pa, g.compute, ops.b, nb);
        ops.b = tmp + pa;
    }
    return ops;
}

// Float operands of any of the three dtypes (16-bit ones are the compute type: gemm checks), no
// bias gradient and no GELU backward; the rest is mtk::gemv_shape.
bool CudaDevice::gemv_takes(const GemmArgs& g, const GemmEpilogue& e) {
    auto is_float = [](DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; };
    return mtk::gemv_shape(g.m, g.n, g.k, g.batch, g.ta == Trans::T, g.tb == Trans::T) &&
           is_float(g.a.dtype) && is_float(g.b.dtype) && !e.dbias &&
           e.act != EpilogueAct::gelu_grad;
}

void CudaDevice::gemm_impl(const GemmArgs& g) {
    if (g.m == 0 || g.n == 0) return;
    if (gemv_takes(g, {})) return gemv(g, {});
    const GemmOperands ops = gemm_operands(g);
    launched("gemm");
    cublas_strided(g, ops.a, ops.b, f32(g.c));
}

// The cuBLASLt shape of (g, e): an operand gemm_operands converts lands 256-byte aligned in
// the scratch, the others keep their own pointer's alignment.
LtShape CudaDevice::lt_shape(const GemmArgs& g, const GemmEpilogue& e) const {
    auto operand = [&](const Tensor& t) {
        return g.compute != DType::f32 && t.dtype == DType::f32 ? 256u : lt_alignment(raw(t));
    };
    LtShape s{.ta = g.ta,
              .tb = g.tb,
              .m = g.m,
              .n = g.n,
              .k = g.k,
              .lda = g.lda,
              .ldb = g.ldb,
              .ldc = g.ldc,
              .compute = g.compute,
              .bias = static_cast<bool>(e.bias),
              .act = e.act,
              .dbias = static_cast<bool>(e.dbias)};
    s.align = {operand(g.a), operand(g.b), lt_alignment(raw(g.c)),
               e.bias ? lt_alignment(raw(e.bias)) : 256u,  // dbias: the scratch (256)
               e.pre_act ? lt_alignment(raw(e.pre_act)) : 256u};
    return s;
}

// Whether cuBLASLt runs (g, e) fused. Not the GELU backward (DGELU): on the H200 cuBLASLt's
// DGELU product of gpt2-124m's FFN (16384 x 3072 x 768, f32 aux) took 0.55 ms, 3.2x the plain
// product, more than the plain product and act_bwd over the output take (docs/BENCHMARKS.md).
bool CudaDevice::lt_fuses(const GemmArgs& g, const GemmEpilogue& e) const {
    return e.act != EpilogueAct::gelu_grad && ctx_->lt().supported(lt_shape(g, e));
}

std::string CudaDevice::gemm_epilogue_kernel(const GemmArgs& g, const GemmEpilogue& e) const {
    if (gemv_takes(g, e)) return "gemv";
    return lt_fuses(g, e) ? "cublaslt" : "unfused";
}

// Decode's skinny products on the gemv kernel; else one cuBLASLt product with the epilogue where
// cuBLASLt fuses it (lt_fuses), else the unfused ops (visible: gemm_epilogue_kernel, and `bench
// --profile`'s gemm_epilogue[gemv] / [cublaslt] / [unfused]).
// A bias gradient (e.dbias): cuBLASLt's BGRADB writes it into the scratch after the converted
// operands, and add_f32 adds it to dbias (the epilogue cannot accumulate, the model's gradients
// do). Under 16-bit compute it sums the rounded dy the product reads.
void CudaDevice::gemm_epilogue_impl(const GemmArgs& g, const GemmEpilogue& e) {
    if (g.m == 0 || g.n == 0 || g.k == 0) return gemm_epilogue_unfused(g, e);
    if (gemv_takes(g, e)) return gemv(g, e);
    if (!lt_fuses(g, e)) return gemm_epilogue_unfused(g, e);
    const LtShape s = lt_shape(g, e);
    const size_t dbias_bytes = e.dbias ? static_cast<size_t>(g.m) * sizeof(float) : 0;
    const GemmOperands ops = gemm_operands(g, dbias_bytes);
    auto* dbias_part = static_cast<float*>(ops.extra);
    const LtPointers p{.a = ops.a,
                       .b = ops.b,
                       .c = f32(g.c),
                       .bias = e.bias ? f32(e.bias) : nullptr,
                       .pre_act = e.pre_act ? f32(e.pre_act) : nullptr,
                       .dbias = dbias_part};
    launched("gemm_epilogue");  // the operand conversions
    stream("gemm_epilogue");
    ctx_->lt().run(s, p, g.alpha, g.beta, ctx_->stream(), ctx_->cublas_workspace());
    if (dbias_part) add_f32(f32(e.dbias), dbias_part, g.m);
}

void CudaDevice::cublas_strided(const GemmArgs& g, const void* a, const void* b, float* c) {
    stream("gemm");
    gemm_strided(ctx_->cublas(), g, a, b, c);
}

void CudaDevice::cublas_batched(const GemmArgs& g, const void* const* a_ptrs,
                                const void* const* b_ptrs, float* const* c_ptrs, int64_t batch) {
    stream("gemm");
    gemm_batched(ctx_->cublas(), g, a_ptrs, b_ptrs, c_ptrs, batch);
}

}  // namespace moetrain::cuda

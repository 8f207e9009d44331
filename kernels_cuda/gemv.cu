// CudaDevice::gemv: the skinny products of gemm / gemm_epilogue (gemv_takes, cuda_gemm.cpp) on
// the launcher of gemv.cuh, on the device stream (docs/CUDA.md "Skinny products").
#include "gemv.cuh"

#include "cuda/cuda_device.h"

namespace moetrain::cuda {

void CudaDevice::gemv(const GemmArgs& g, const GemmEpilogue& e) {
    mtk::GemvArgs p;
    p.a = raw(g.a);
    p.a_kind = float_kind(g.a.dtype);
    p.lda = g.lda;
    p.b = raw(g.b);
    p.b_kind = float_kind(g.b.dtype);
    p.ldb = g.ldb;
    p.c = f32(g.c);
    p.ldc = g.ldc;
    p.m = g.m;
    p.n = g.n;
    p.k = g.k;
    p.alpha = g.alpha;
    p.beta = g.beta;
    p.bias = e.bias ? f32(e.bias) : nullptr;
    p.pre_act = e.act == EpilogueAct::gelu ? f32(e.pre_act) : nullptr;
    p.compute = float_kind(g.compute);
    mtk::gemv_rows(stream("gemm"), p);
    launched("gemm");
}

}  // namespace moetrain::cuda

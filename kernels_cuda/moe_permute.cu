// CudaDevice ops: the MoE counting sort by expert (with the cub scan), gather, combine and its
// backward. Each turns its tensors into pointers and calls the launcher of moe_permute.cuh on the
// device stream (docs/CUDA.md).
#include <algorithm>

#include "moe_permute.cuh"

#include "cuda/cub_scan.h"
#include "cuda/cuda_device.h"

namespace moetrain::cuda {

void CudaDevice::moe_sort_impl(const Tensor& counts, const Tensor& row_token,
                               const Tensor& slot_row, const Tensor& topk_idx, int64_t N, int64_t k,
                               int64_t E) {
    const char* op = "moe_sort";
    int32_t* c = i32(counts);
    int32_t* rt = i32(row_token);
    int32_t* sr = i32(slot_row);
    const int32_t* idx = i32(topk_idx);
    const mtk::Stream st = stream(op);  // this device current before cub sizes its temp storage
    const CountingScan cs = counting_scan(op, N * k, E);  // cub, cub_scan.h
    void* tmp = scratch(cs.scratch_bytes);
    mtk::moe_sort(st, c, rt, sr, idx, N, k, E, cs.scan, cs.temp_bytes, tmp, error_word());
    launched(op);  // a bad expert index is reported at the next download() / synchronize()
}

void CudaDevice::gather_rows_impl(const Tensor& dst, const Tensor& src, const Tensor& index,
                                  int64_t R, int64_t dim) {
    const char* op = "gather_rows";
    const float* s = f32(src);
    mtk::gather_rows(stream(op), f32(dst), s, dim > 0 ? src.numel() / dim : 0, i32(index), R, dim,
                     error_word());
    launched(op);
}

void CudaDevice::moe_combine_impl(const Tensor& y, const Tensor& rows, const Tensor& slot_row,
                                  const Tensor& w, int64_t N, int64_t k, int64_t dim,
                                  bool accumulate) {
    const char* op = "moe_combine";
    const float* r = f32(rows);
    const int64_t nrows = dim > 0 && r ? rows.numel() / dim : 0;
    mtk::moe_combine(stream(op), f32(y), r, nrows, i32(slot_row), f32(w), N, k, dim, accumulate,
                     error_word());
    launched(op);
}

void CudaDevice::moe_combine_bwd_impl(const Tensor& drows, const Tensor& dw, const Tensor& dy,
                                      const Tensor& rows, const Tensor& slot_row, const Tensor& w,
                                      int64_t N, int64_t k, int64_t dim) {
    const char* op = "moe_combine_bwd";
    const auto [pdr, pdw, pdy, pr] = f32s(drows, dw, dy, rows);
    const int32_t* ps = i32(slot_row);
    const float* pw = f32(w);
    const int64_t nrows = dim > 0 && pr ? std::min(drows.numel(), rows.numel()) / dim : 0;
    mtk::moe_combine_bwd(stream(op), pdr, pdw, pdy, pr, nrows, ps, pw, N, k, dim, error_word());
    launched(op);
}

}  // namespace moetrain::cuda

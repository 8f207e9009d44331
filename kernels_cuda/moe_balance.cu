// CudaDevice ops: MoE load control, i.e. capacity admission (a counting pass with the cub scan,
// no host read) and its data-parallel offset shares, the expert-count accumulator and the
// float64 expert-bias update. Each turns its tensors into pointers and calls the launcher of
// moe_balance.cuh on the device stream (docs/CUDA.md).
#include <climits>

#include "moe_balance.cuh"

#include "cuda/cub_scan.h"
#include "cuda/cuda_device.h"

namespace moetrain::cuda {

void CudaDevice::moe_capacity_impl(const Tensor& kept_idx, const Tensor& counts,
                                   const Tensor& topk_idx, const Tensor& offsets, int64_t N,
                                   int64_t k, int64_t E, int64_t capacity) {
    const char* op = "moe_capacity";
    int32_t* kept = i32(kept_idx);
    int32_t* c = i32(counts);
    const int32_t* idx = i32(topk_idx);
    const int32_t* off = i32(offsets);
    const mtk::Stream st = stream(op);  // this device current before cub sizes its temp storage
    const CountingScan cs = counting_scan(op, N * k, E);
    void* tmp = scratch(cs.scratch_bytes);
    mtk::moe_capacity(st, kept, c, idx, off, N, k, E, capacity, cs.scan, cs.temp_bytes, tmp,
                      error_word());
    launched(op);  // a bad expert index is reported at the next download() / synchronize()
}

void CudaDevice::moe_capacity_shares_impl(const Tensor& shares, const Tensor& topk_idx, int64_t N,
                                          int64_t k, int64_t E, int64_t rank, int64_t ranks) {
    const char* op = "moe_capacity_shares";
    MT_CHECK(E <= INT_MAX && k <= INT_MAX, op, ": n_experts ", E, " or top_k ", k, " too large");
    mtk::moe_capacity_shares(stream(op), i32(shares), i32(topk_idx), N, k, E, rank, ranks,
                             error_word());
    launched(op);  // a bad expert index is reported at the next download() / synchronize()
}

void CudaDevice::add_counts_impl(const Tensor& acc, const Tensor& counts, int64_t n) {
    mtk::add_counts(stream("add_counts"), i32(acc), i32(counts), n);
    launched("add_counts");
}

void CudaDevice::expert_bias_update_impl(const Tensor& bias, const Tensor& counts, int64_t E,
                                         double rate) {
    const char* op = "expert_bias_update";
    MT_CHECK(E <= INT_MAX, op, ": n_experts ", E, " too large");
    mtk::expert_bias_update(stream(op), f32(bias), i32(counts), E, rate);
    launched(op);
}

}  // namespace moetrain::cuda

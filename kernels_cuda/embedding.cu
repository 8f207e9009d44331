// CudaDevice ops: embedding lookup and its gradient (with the cub radix sort of the token indices
// by id). Each turns its tensors into pointers and calls the launcher of embedding.cuh on the
// device stream (docs/CUDA.md).
#include "embedding.cuh"

#include "cuda/cub_sort.h"
#include "cuda/cuda_device.h"

namespace moetrain::cuda {

void CudaDevice::embedding_fwd_impl(const Tensor& out, const Tensor& table, const Tensor& ids,
                                    int64_t n, int64_t dim, bool accumulate) {
    mtk::embedding_fwd(stream("embedding_fwd"), f32(out), f32(table), table.numel() / dim, i32(ids),
                       n, dim, accumulate, error_word());
    launched("embedding_fwd");
}

void CudaDevice::embedding_bwd_impl(const Tensor& dtable, const Tensor& dout, const Tensor& ids,
                                    int64_t n, int64_t dim) {
    const char* op = "embedding_bwd";
    const int64_t rows = dtable.numel() / dim;
    MT_CHECK(n <= INT32_MAX, op, ": ", n, " tokens exceed int32 token indices");
    MT_CHECK(rows < INT32_MAX, op, ": ", rows, " table rows exceed int32 sort keys");
    float* dt = f32(dtable);
    const float* dy = f32(dout);
    const int32_t* id = i32(ids);
    const mtk::Stream st = stream(op);  // this device current before cub sizes its temp storage
    const mtk::RadixSortPairs sort = radix_sort_pairs_i32();  // cub, cub_sort.h
    const size_t temp = sort.temp_bytes(n, mtk::embedding_key_bits(rows));
    void* tmp = scratch(mtk::embedding_bwd_scratch_bytes(n, dim, temp));
    mtk::embedding_bwd(st, dt, rows, dy, id, n, dim, sort, temp, tmp, error_word());
    launched(op);  // a bad id is reported at the next download() / synchronize()
}

}  // namespace moetrain::cuda

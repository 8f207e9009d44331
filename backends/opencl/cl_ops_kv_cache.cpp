// KV-cache append (kernels_cl/kv_cache.cl): one kernel per element size, any dtype.
#include "cl_device.h"

namespace moetrain::opencl {

void ClDevice::kv_append_impl(const Tensor& cache, const Tensor& rows, int64_t B, int64_t T,
                              int64_t S, int64_t row_len, int64_t pos0, const Tensor& pos_dev) {
    const int64_t n = B * T * row_len;
    DevPtr c = arg(cache);
    DevPtr r = arg(rows);
    DevValue pd = dev_value(pos_dev);
    if (n == 0) return;
    const char* kernel = dtype_size(cache.dtype) == 4   ? "mt_kv_append_4"
                         : dtype_size(cache.dtype) == 2 ? "mt_kv_append_2"
                                                        : "mt_kv_append_1";
    launch("kv_cache", kernel, items(n), c, r, cl_long{B}, cl_long{T}, cl_long{S}, cl_long{row_len},
           cl_long{pos0}, pd, error_word());
}

}  // namespace moetrain::opencl

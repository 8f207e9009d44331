// CPU whole-vector reductions (sum, sum of squares): fixed chunks summed in double and
// combined in chunk order (cpu_parallel.h), so the result does not depend on the threads.
// Within a chunk the sum runs over the fixed SIMD lanes of cpu_simd.h.
#include "cpu/cpu_device.h"
#include "cpu/cpu_parallel.h"
#include "cpu/cpu_simd.h"

namespace moetrain {

void CpuDevice::sum_impl(const Tensor& out, const Tensor& x, int64_t n, float scale,
                         bool accumulate) {
    float* po = f32(out);
    const float* px = f32(x);
    const double s = cpu::chunked_sum(n, [&](int64_t i0, int64_t i1) {
        const float* c = px + i0;
        return cpu::lane_sum<double>(i1 - i0, [&](int64_t i) { return static_cast<double>(c[i]); });
    });
    po[0] = (accumulate ? po[0] : 0.0f) + static_cast<float>(scale * s);
}

void CpuDevice::sum_squares_impl(const Tensor& out, const Tensor& x, int64_t n, bool accumulate) {
    float* po = f32(out);
    const float* px = f32(x);
    const double s = cpu::chunked_sum(n, [&](int64_t i0, int64_t i1) {
        const float* c = px + i0;
        return cpu::lane_sum<double>(i1 - i0,
                                     [&](int64_t i) { return static_cast<double>(c[i]) * c[i]; });
    });
    po[0] = (accumulate ? po[0] : 0.0f) + static_cast<float>(s);
}

}  // namespace moetrain

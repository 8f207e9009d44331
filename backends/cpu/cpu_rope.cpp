// CPU rotary position embedding (MODEL.md 2, half-split convention), in place on
// x[B,T,nh,hd]; the angle comes from the shared float32 formula of mt_math.h.
#include <cmath>
#include <vector>

#include "cpu/cpu_device.h"
#include "cpu/cpu_parallel.h"
#include "shared/mt_math.h"

namespace moetrain {

void CpuDevice::rope(const Tensor& x, int64_t B, int64_t T, int64_t nh, int64_t hd, float theta,
                     int64_t pos0, bool inverse) {
    check_sizes("rope", {B, T, nh, hd, pos0});
    MT_CHECK(hd % 2 == 0, "rope: head_dim ", hd, " is odd");
    MT_CHECK(theta > 0, "rope: theta ", theta, " must be positive");
    float* px = f32(x, B * T * nh * hd, "rope", "x");
    const int64_t half = hd / 2;
#pragma omp parallel if (B * T * nh * hd > cpu::kParallelMin)
    {
        std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
#pragma omp for schedule(static)
        for (int64_t bt = 0; bt < B * T; ++bt) {
            const int pos = static_cast<int>(pos0 + bt % T);
            for (int64_t i = 0; i < half; ++i) {
                const float ang = mt_rope_angle(theta, static_cast<int>(i), static_cast<int>(hd), pos);
                cs[i] = std::cos(ang);
                sn[i] = inverse ? -std::sin(ang) : std::sin(ang);
            }
            for (int64_t h = 0; h < nh; ++h) {
                float* v = px + (bt * nh + h) * hd;
#pragma omp simd
                for (int64_t i = 0; i < half; ++i) {
                    const float x0 = v[i], x1 = v[i + half];
                    v[i] = x0 * cs[i] - x1 * sn[i];
                    v[i + half] = x1 * cs[i] + x0 * sn[i];
                }
            }
        }
    }
}

}  // namespace moetrain

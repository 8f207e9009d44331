// CPU rotary position embedding (MODEL.md 2, half-split convention), in place on
// x[B,T,nh,hd] at positions pos0 + pos_dev[0] + t; the angle comes from the shared float32
// formula of mt_math.h.
#include <cmath>
#include <vector>

#include "cpu/cpu_device.h"
#include "cpu/cpu_parallel.h"
#include "shared/mt_math.h"

namespace moetrain {

void CpuDevice::rope_impl(const Tensor& x, int64_t B, int64_t T, int64_t nh, int64_t hd,
                          float theta, int64_t pos0, const Tensor& pos_dev, bool inverse) {
    float* px = f32(x);
    const int64_t offset = device_value(pos_dev);
    pos0 += offset;
    MT_CHECK(pos0 >= 0 && pos0 + T <= MT_POS_LIMIT, "rope: device position offset ", offset,
             " puts positions ", pos0, "..", pos0 + T - 1, " outside [0, 2^30)");
    const int64_t half = hd / 2;
    // cos / sin of every (position, pair), shared by the batch rows and heads.
    std::vector<float> cs(static_cast<size_t>(T * half)), sn(cs.size());
#pragma omp parallel for schedule(static) if (T * half > cpu::kParallelMin / 8)
    for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < half; ++i) {
            const float ang = mt_rope_angle(theta, static_cast<int>(i), static_cast<int>(hd),
                                            static_cast<int>(pos0 + t));
            cs[t * half + i] = std::cos(ang);
            sn[t * half + i] = inverse ? -std::sin(ang) : std::sin(ang);
        }
#pragma omp parallel for schedule(static) if (B * T * nh * hd > cpu::kParallelMin)
    for (int64_t bt = 0; bt < B * T; ++bt) {
        const float* c = cs.data() + (bt % T) * half;
        const float* s = sn.data() + (bt % T) * half;
        for (int64_t h = 0; h < nh; ++h) {
            float* v = px + (bt * nh + h) * hd;
#pragma omp simd
            for (int64_t i = 0; i < half; ++i) {
                const float x0 = v[i], x1 = v[i + half];
                v[i] = x0 * c[i] - x1 * s[i];
                v[i + half] = x1 * c[i] + x0 * s[i];
            }
        }
    }
}

}  // namespace moetrain

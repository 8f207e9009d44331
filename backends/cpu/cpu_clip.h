// The clip coefficient of the optimizer ops (device.h) on the CPU backend, shared by
// cpu_optimizer.cpp and cpu_optimizer8.cpp. `static` on purpose: each file compiles its own
// copy under its own floating-point settings (cpu_optimizer8.cpp turns FMA contraction off).
#pragma once

#include "cpu/cpu_device.h"
#include "shared/mt_math.h"

namespace moetrain {

// The clip coefficient c of device.h; gnorm_sq is empty only when clipping is off (checked
// by the front door).
static inline float clip_coefficient(const CpuDevice& dev, const Tensor& gnorm_sq, float clip,
                                     float grad_scale) {
    if (!gnorm_sq) return 1.0f;
    const float gn = *dev.f32(gnorm_sq);
    return mt_clip_coef(gn, grad_scale, clip);
}

}  // namespace moetrain

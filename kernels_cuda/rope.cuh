// In-place half-split RoPE (MODEL.md 2) on x[B,T,nh,hd]: one thread per rotated pair; the
// angle is mt_rope_angle (float32, as every backend computes it); inverse rotates by -angle.
// Row t sits at position pos0 + pos_dev[0] + t (pos_dev: the device-side offset, or nullptr);
// positions outside [0, MT_POS_LIMIT) are reported (kErrRopePosition) and nothing is rotated.
#pragma once

#include "common.cuh"

namespace mtk {

__global__ void rope_kernel(float* __restrict__ x, int64_t T, int64_t nh, int64_t hd, float theta,
                            int64_t pos0, const int32_t* __restrict__ pos_dev, bool inverse,
                            int64_t pairs, int32_t* err) {
    const int64_t offset = pos_dev ? *pos_dev : 0;
    pos0 += offset;
    if (pos0 < 0 || pos0 + T > MT_POS_LIMIT) {
        if (global_thread() == 0) report_error(err, kErrRopePosition, static_cast<int32_t>(offset));
        return;
    }
    const int64_t half = hd / 2;
    for (int64_t i = global_thread(); i < pairs; i += grid_threads()) {
        int64_t p = i % half, row = i / half;  // row = (b*T + t)*nh + h
        int64_t t = (row / nh) % T;
        float ang = mt_rope_angle(theta, static_cast<int>(p), static_cast<int>(hd),
                                  static_cast<int>(pos0 + t));
        float c = cosf(ang), sn = inverse ? -sinf(ang) : sinf(ang);
        float* v = x + row * hd;
        float x0 = v[p], x1 = v[p + half];
        v[p] = x0 * c - x1 * sn;
        v[p + half] = x1 * c + x0 * sn;
    }
}

// pos_dev: the device-side position offset added to pos0 (may be nullptr).
void rope(Stream s, float* x, int64_t B, int64_t T, int64_t nh, int64_t hd, float theta,
          int64_t pos0, const int32_t* pos_dev, bool inverse, int32_t* err) {
    int64_t pairs = B * T * nh * (hd / 2);
    if (pairs > 0)
        MT_LAUNCH(rope_kernel, elementwise(pairs), s, x, T, nh, hd, theta, pos0, pos_dev, inverse,
                  pairs, err);
}

}  // namespace mtk

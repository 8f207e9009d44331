// CPU 8-bit AdamW (device.h adamw8bit, docs/OPS.md): block by block, dequantise the moments,
// the shared AdamW element update of mt_math.h in fp32, the block's new absmax, requantise
// (mt_requantize, with the table-driven nearest-code search of cpu_qmap_search.h).
// Blocks are independent, so OpenMP splits the work by blocks and the result does not depend
// on the thread count. This file is compiled without FMA contraction (g++ would otherwise fuse
// b1 m + (1 - b1) g under -march=x86-64-v3 even in -std=c++20 mode): the OpenCL kernels
// (FP_CONTRACT OFF) and the CUDA kernels under the SIMT harness do the same float operations,
// so p, codes and absmax are bit-identical across those backends.
#pragma GCC optimize("fp-contract=off")

#include <algorithm>
#include <cmath>

#include "cpu/cpu_clip.h"
#include "cpu/cpu_device.h"
#include "cpu/cpu_parallel.h"
#include "cpu/cpu_qmap_search.h"
#include "shared/mt_math.h"
#include "shared/mt_qmap_table.h"

namespace moetrain {
namespace {
// The two maps' searches (tables built once per process).
const cpu::QmapSearch& signed_search() {
    static const cpu::QmapSearch s(qmap_host_table());
    return s;
}
const cpu::QmapSearch& unsigned_search() {
    static const cpu::QmapSearch s(qmap_host_table() + MT_QMAP_UNSIGNED);
    return s;
}
}  // namespace

void CpuDevice::adamw8bit_impl(const Tensor& p, const Tensor& g, const Tensor& m_codes,
                               const Tensor& v_codes, const Tensor& m_absmax,
                               const Tensor& v_absmax, int64_t n, const AdamWArgs& a,
                               const Tensor& gnorm_sq, float clip, float grad_scale) {
    if (n == 0) return;
    const int64_t blocks = (n + MT_QBLOCK - 1) / MT_QBLOCK;
    float* pp = f32(p);
    const float* pg = f32(g);
    auto* mc = static_cast<uint8_t*>(raw(m_codes));
    auto* vc = static_cast<uint8_t*>(raw(v_codes));
    float* ma = f32(m_absmax);
    float* va = f32(v_absmax);
    const float gs = grad_scale * clip_coefficient(*this, gnorm_sq, clip, grad_scale);
    const float* table = qmap_host_table();
    const cpu::QmapSearch &ms = signed_search(), &vs = unsigned_search();
#pragma omp parallel for schedule(static) if (n > cpu::kParallelMin)
    for (int64_t b = 0; b < blocks; ++b) {
        const int64_t i0 = b * MT_QBLOCK, len = std::min<int64_t>(MT_QBLOCK, n - i0);
        // mt_adamw8bit_update in two loops, so that the second (the fp32 AdamW update with
        // its divisions and square root) vectorises; the same float operations.
        float m[MT_QBLOCK], v[MT_QBLOCK];
        for (int64_t k = 0; k < len; ++k) {
            m[k] = table[mc[i0 + k]] * ma[b];
            v[k] = table[MT_QMAP_UNSIGNED + vc[i0 + k]] * va[b];
        }
        float* pb = pp + i0;
        const float* gb = pg + i0;
        for (int64_t k = 0; k < len; ++k)
            mt_adamw_update(pb + k, m + k, v + k, gb[k] * gs, a.lr, a.b1, a.b2, a.eps, a.wd, a.bc1,
                            a.bc2);
        float m_max = 0.0f, v_max = 0.0f;
        for (int64_t k = 0; k < len; ++k) {
            m_max = std::max(m_max, std::fabs(m[k]));
            v_max = std::max(v_max, v[k]);
        }
        ma[b] = m_max;
        va[b] = v_max;
        // mt_requantize, with QmapSearch::encode for mt_qmap_encode (the same codes).
        const float m_div = m_max > 0.0f ? m_max : 1.0f, v_div = v_max > 0.0f ? v_max : 1.0f;
        for (int64_t k = 0; k < len; ++k) {  // x / absmax, or 0 when absmax is 0
            m[k] = m_max > 0.0f ? m[k] / m_div : 0.0f;
            v[k] = v_max > 0.0f ? v[k] / v_div : 0.0f;
        }
        for (int64_t k = 0; k < len; ++k) {
            const int v_code = vs.encode(v[k]);
            vc[i0 + k] = static_cast<uint8_t>(v_code);
            mc[i0 + k] = static_cast<uint8_t>(v_code == 0 ? MT_QZERO_SIGNED : ms.encode(m[k]));
        }
    }
}

}  // namespace moetrain

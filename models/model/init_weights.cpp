// Seeded host-side initialisation (model.h): N(0, 0.02) for weights and embeddings,
// N(0, 0.02/sqrt(2L)) for the output projections wo and w_down (dense, experts, shared),
// gains 1, biases 0. Normals come from Philox-4x32-10 (backends/shared/mt_math.h) keyed by
// the seed, with counter (pair index, hash of the parameter NAME): every tensor's values are
// independent of the layout order and of which other tensors exist, and identical on every
// backend. Each Philox call gives two normals by Box-Muller (53-bit uniforms, in double).
#include <algorithm>
#include <cmath>
#include <numbers>

#include "model/param_store.h"
#include "shared/mt_math.h"

namespace moetrain {
namespace {

uint32_t fnv1a32(const std::string& s) {
    uint32_t h = 2166136261u;
    for (unsigned char ch : s) {
        h ^= ch;
        h *= 16777619u;
    }
    return h;
}

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_output_projection(const std::string& name) {
    return ends_with(name, "attn.wo.weight") || name.find("w_down") != std::string::npos;
}

// Two independent N(0, 1) draws for pair j of the tensor keyed by `key`.
void normal_pair(uint64_t seed, uint32_t key, uint64_t j, double* z0, double* z1) {
    mt_u32 o[4];
    mt_philox4x32_10(static_cast<mt_u32>(j), static_cast<mt_u32>(j >> 32), key, 0x696e6974u,
                     static_cast<mt_u32>(seed), static_cast<mt_u32>(seed >> 32), o);
    const double k53 = 1.0 / 9007199254740992.0;  // 2^-53
    const uint64_t a = (uint64_t{o[0]} << 21) ^ (o[1] >> 11);
    const uint64_t b = (uint64_t{o[2]} << 21) ^ (o[3] >> 11);
    const double u1 = (static_cast<double>(a & ((uint64_t{1} << 53) - 1)) + 1.0) * k53;  // (0,1]
    const double u2 = static_cast<double>(b & ((uint64_t{1} << 53) - 1)) * k53;          // [0,1)
    const double r = std::sqrt(-2.0 * std::log(u1));
    *z0 = r * std::cos(2.0 * std::numbers::pi * u2);
    *z1 = r * std::sin(2.0 * std::numbers::pi * u2);
}

}  // namespace

std::vector<float> init_values(const ModelConfig& c, const std::vector<ParamInfo>& layout,
                               uint64_t seed) {
    int64_t total = 0;
    for (const auto& p : layout) total = std::max(total, p.offset + p.numel());
    std::vector<float> v(static_cast<size_t>(total), 0.0f);
    const double out_std = 0.02 / std::sqrt(2.0 * std::max(c.n_layers, 1));
    for (const auto& p : layout) {
        float* dst = v.data() + p.offset;
        const int64_t n = p.numel();
        if (!p.decay) {  // norm gains 1, biases 0
            const float value = ends_with(p.name, ".bias") ? 0.0f : 1.0f;
            std::fill(dst, dst + n, value);
            continue;
        }
        const double sd = is_output_projection(p.name) ? out_std : 0.02;
        const uint32_t key = fnv1a32(p.name);
#pragma omp parallel for schedule(static)
        for (int64_t j = 0; j < (n + 1) / 2; ++j) {
            double z0, z1;
            normal_pair(seed, key, static_cast<uint64_t>(j), &z0, &z1);
            dst[2 * j] = static_cast<float>(sd * z0);
            if (2 * j + 1 < n) dst[2 * j + 1] = static_cast<float>(sd * z1);
        }
    }
    return v;
}

}  // namespace moetrain

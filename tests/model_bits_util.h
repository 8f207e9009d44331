// Helpers of the tests that demand BIT-identical training results from two ways of running
// the same model (recompute modes, 16-bit vs f32 activation storage): two accumulated
// micro-batches with the routing recorded, and a bitwise comparison that names the first
// differing element (and the parameter holding it).
#pragma once

#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_access.h"
#include "model/model_impl.h"
#include "test_xbackend_util.h"

namespace moetrain::bits {

struct FbRun {
    std::vector<LossStats> losses;
    std::vector<float> grads;
    std::vector<int32_t> routing;
    std::vector<ExpertLoad> loads;
};

// From zeroed gradients, two micro-batches of B x T tokens of the learnable stream `seed`,
// each with grad_scale 1/2.
inline FbRun accumulate_two(Model& m, uint32_t seed, int B, int T) {
    const std::vector<int32_t> stream = xbackend::token_stream(m.config().vocab_size, 4096, seed);
    FbRun r;
    m.zero_grads();
    ModelAccess::impl(m).passes.record_routing = &r.routing;
    for (int i = 0; i < 2; ++i) {
        const xbackend::Batch b = xbackend::batch_at(stream, i, B, T);
        r.losses.push_back(m.forward_backward(b.x.data(), b.y.data(), B, T, 0.5f));
    }
    ModelAccess::impl(m).passes.record_routing = nullptr;
    r.grads = m.get_flat(m.grads_flat());
    r.loads = m.expert_load();
    return r;
}

// The parameter holding flat element i.
inline std::string param_at(const std::vector<ParamInfo>& layout, size_t i) {
    for (const ParamInfo& p : layout)
        if (static_cast<int64_t>(i) >= p.offset && static_cast<int64_t>(i) < p.offset + p.numel())
            return p.name;
    return "?";
}

// CHECKs that got and want are bit-identical (-0 differs from 0, NaN payloads count); on a
// difference the first differing element is reported, with its parameter when `layout` (of a
// flat buffer) is given.
inline void check_bits(const std::vector<float>& got, const std::vector<float>& want,
                       const std::string& what, const std::vector<ParamInfo>* layout = nullptr) {
    CAPTURE(what);
    REQUIRE(got.size() == want.size());
    auto bits = [](float f) { return std::bit_cast<uint32_t>(f); };
    size_t i = 0;
    while (i < got.size() && bits(got[i]) == bits(want[i])) ++i;
    if (i == got.size()) return;
    CAPTURE(i);
    CAPTURE(got[i]);
    CAPTURE(want[i]);
    const std::string param = layout ? param_at(*layout, i) : "";
    CAPTURE(param);
    FAIL_CHECK("not bit-identical");
}

}  // namespace moetrain::bits

// Expert parallelism's shard layout (param_layout.h ExpertShard, expert_shard.h): the same
// tensors in the same order with one block of experts each, and the copy of a whole flat
// buffer into a rank's shard. The all-gather back is tested end to end under mpirun
// (tests/dist: checkpoints of expert-parallel runs and their resumes).
#include <doctest/doctest.h>

#include <numeric>

#include "model/expert_shard.h"
#include "op_test_util.h"
#include "reference_model.h"

using namespace moetrain;
namespace rm = moetrain::refmodel;

TEST_CASE("expert shard: block j of P experts, everything else as in the whole layout") {
    ModelConfig c = rm::with_moe(rm::small_config(), 4, 2, 1);  // E 4, top-2, from layer 1
    c.moe->n_shared_experts = 1;
    const std::vector<ParamInfo> whole = build_param_layout(c);
    auto dev = open_device("cpu");
    Tensor w = dev->alloc(DType::f32, {whole.back().offset + whole.back().numel()});
    std::vector<float> values(static_cast<size_t>(w.numel()));
    std::iota(values.begin(), values.end(), 0.0f);
    dev->upload(w, values.data());
    for (int j = 0; j < 2; ++j) {
        const std::vector<ParamInfo> shard = build_param_layout(c, {2, j});
        REQUIRE(shard.size() == whole.size());
        int64_t n = 0, experts = 0;
        for (size_t i = 0; i < shard.size(); ++i) {
            const ParamInfo &s = shard[i], &f = whole[i];
            CHECK(s.name == f.name);
            CHECK(s.offset == n);
            n += s.numel();
            if (s.name.find(".moe.experts.") == std::string::npos) {
                CHECK(s.shape == f.shape);
                continue;
            }
            ++experts;
            CHECK(s.shape[0] == 2);  // 2 of the 4 experts
            CHECK(s.numel() * 2 == f.numel());
        }
        int moe_layers = 0;
        for (int l = 0; l < c.n_layers; ++l) moe_layers += c.is_moe_layer(l);
        CHECK(moe_layers > 0);
        CHECK(experts == (c.ffn == FfnKind::swiglu ? 3 : 2) * moe_layers);
        Tensor local = dev->alloc(DType::f32, {n});
        whole_to_shard(*dev, j, shard_runs(shard, whole), w, local);
        std::vector<float> got(static_cast<size_t>(n));
        dev->download(got.data(), local);
        for (size_t i = 0; i < shard.size(); ++i) {  // tensor by tensor: this rank's slice
            const ParamInfo &s = shard[i], &f = whole[i];
            const bool expert = s.shape[0] * 2 == f.shape[0] && s.shape.rank == 3;
            const int64_t from = f.offset + (expert ? j * s.numel() : 0);
            for (int64_t e = 0; e < s.numel(); e += 7)
                REQUIRE(got[static_cast<size_t>(s.offset + e)] ==
                        values[static_cast<size_t>(from + e)]);
        }
    }
    CHECK_THROWS_AS(build_param_layout(c, {3, 0}), Error);  // 3 does not split 4 experts
}

// Host reads of an MoE training step, at the Device interface: a forward + backward queued by
// ModelPasses::queue_micro_batch downloads nothing (the model's side of capturing a step as a
// CUDA Graph: the expert products are grouped GEMMs that read the expert counts on the
// device), on every device through a ProfilingDevice that books every download. The expert
// loads are then downloaded once, when Model::expert_load() is read, and equal those of the
// same step on the bare device.
#include <doctest/doctest.h>

#include <numeric>

#include "model/model_access.h"
#include "model/model_impl.h"
#include "moetrain/profiling.h"
#include "test_xbackend_util.h"

using namespace moetrain;
namespace xb = moetrain::xbackend;

namespace {

int64_t downloads(const ProfilingDevice& p) {
    for (const OpProfile& op : p.table())
        if (op.op == "download") return op.calls;
    return 0;
}

}  // namespace

TEST_CASE("model: an MoE training step downloads nothing; expert loads are read once") {
    constexpr int B = 2, T = 8;
    const std::vector<int32_t> stream =
        xb::token_stream(xb::config_moe_hash().cfg.vocab_size, 1024, 5);
    const xb::Batch batch = xb::batch_at(stream, 0, B, T);
    test::for_each_test_device([&](Device& dev) {
        for (const auto& nc : {xb::config_moe_softmax(), xb::config_moe_hash()})
            for (Recompute r : {Recompute::none, Recompute::ffn}) {
                CAPTURE(nc.name);
                CAPTURE(to_string(r));
                ProfilingDevice prof(dev);
                Model m(prof, nc.cfg), bare(dev, nc.cfg);
                for (Model* x : {&m, &bare}) {
                    x->init_weights(3);
                    x->set_recompute(r);
                }
                prof.reset();
                ModelAccess::impl(m).passes.queue_micro_batch(batch.x.data(), batch.y.data(), B, T,
                                                              1.0f, 1.0f, true);
                CHECK(downloads(prof) == 0);

                const std::vector<ExpertLoad> loads = m.expert_load();
                CHECK(downloads(prof) == 1);
                m.expert_load();  // cached until the next forward
                CHECK(downloads(prof) == 1);
                bare.forward_backward(batch.x.data(), batch.y.data(), B, T);
                const std::vector<ExpertLoad>& want = bare.expert_load();
                REQUIRE(loads.size() == want.size());
                REQUIRE(!loads.empty());
                for (size_t l = 0; l < loads.size(); ++l) {
                    CHECK(loads[l].layer == want[l].layer);
                    CHECK(loads[l].counts == want[l].counts);
                    const int64_t rows =
                        std::accumulate(loads[l].counts.begin(), loads[l].counts.end(), int64_t{0});
                    CHECK(rows == int64_t{B} * T * nc.cfg.moe->active_k());  // dropless
                }
            }
    });
}

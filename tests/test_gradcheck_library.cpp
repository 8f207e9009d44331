// The library gradient check (api/moetrain/gradcheck.h, used by `moetrain gradcheck`) passes
// on the tiny preset and on a hash-routed config, on every available device, and leaves the
// weights as they were.
#include <doctest/doctest.h>

#include <cstring>

#include "moetrain/gradcheck.h"
#include "op_test_util.h"
#include "reference_model.h"

using namespace moetrain;
namespace rm = moetrain::refmodel;

TEST_CASE("gradcheck: every tensor of the tiny preset passes") {
    ModelConfig hash = rm::with_moe(rm::small_config(), 4, 1, 0);
    hash.moe->router = RouterKind::hash;
    hash.norm = NormKind::layernorm;
    hash.bias = true;
    for (const ModelConfig& c : {preset_config("tiny"), hash}) {
        for (auto& d : test::test_devices()) {
            CAPTURE(d.id);
            Model m(*d.dev, c);
            m.init_weights(1);
            const std::vector<float> before = m.get_flat(m.params_flat());
            const GradcheckResult r = gradcheck(m);
            CHECK(r.tensors.size() == m.params().size());
            for (const auto& t : r.tensors) {
                CAPTURE(t.name);
                CAPTURE(t.numeric);
                CAPTURE(t.analytic);
                CHECK(t.rel_error <= r.tolerance);
                CHECK(t.pass);
            }
            CHECK(r.pass);
            const std::vector<float> after = m.get_flat(m.params_flat());
            CHECK(std::memcmp(before.data(), after.data(), before.size() * sizeof(float)) == 0);
        }
    }
}

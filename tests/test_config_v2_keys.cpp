// The MoE routing options of MODEL.md v2 in the config (sigmoid_topk, routed_scaling,
// bias_update_rate, capacity_factor): defaults, the canonical JSON round trip, the capacity
// formula, and every hostile value refused with one line naming the key.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "moetrain/config.h"
#include "test_checkpoint_util.h"

using nlohmann::json;

namespace {

json moe_config(const json& moe) {
    json j = {{"vocab_size", 256}, {"d_model", 64},      {"n_layers", 2},
              {"n_heads", 4},      {"max_seq_len", 128}, {"d_ff", 128}};
    j["moe"] = moe;
    j["moe"]["n_experts"] = 8;
    return j;
}

std::string parse_error(const json& j) {
    return moetrain::testing::error_of([&] { moetrain::parse_config(j.dump()); });
}

}  // namespace

TEST_CASE("config: the v2 routing keys parse, default and round-trip") {
    const moetrain::ModelConfig d = moetrain::parse_config(moe_config(json::object()).dump());
    CHECK(d.moe->router == moetrain::RouterKind::softmax_topk);
    CHECK(d.moe->routed_scaling == 1.0);
    CHECK(d.moe->bias_update_rate == 0.0);
    CHECK(d.moe->capacity_factor == 0.0);
    CHECK(!d.moe->has_expert_bias());

    const json moe = {{"router", "sigmoid_topk"},
                      {"routed_scaling", 2.5},
                      {"bias_update_rate", 0.001},
                      {"capacity_factor", 1.25},
                      {"top_k", 2}};
    const moetrain::ModelConfig c = moetrain::parse_config(moe_config(moe).dump());
    CHECK(c.moe->router == moetrain::RouterKind::sigmoid_topk);
    CHECK(c.moe->topk_router());
    CHECK(c.moe->routed_scaling == 2.5);
    CHECK(c.moe->bias_update_rate == 0.001);
    CHECK(c.moe->capacity_factor == 1.25);
    CHECK(c.moe->has_expert_bias());
    // Canonical JSON names every key; parsing it gives the same config back.
    const std::string canon = moetrain::config_to_json(c);
    const json back = json::parse(canon);
    CHECK(back["moe"]["router"] == "sigmoid_topk");
    CHECK(back["moe"]["capacity_factor"] == 1.25);
    CHECK(moetrain::config_to_json(moetrain::parse_config(canon)) == canon);
}

TEST_CASE("config: the capacity is ceil(((c * N) * k) / E) in float64") {
    moetrain::MoeConfig m;
    m.n_experts = 4;
    m.top_k = 2;
    m.capacity_factor = 1.1;
    CHECK(moetrain::moe_capacity_rows(m, 100) == 56);  // MODEL.md 2's example (55.000...01)
    m.capacity_factor = 1.0;
    CHECK(moetrain::moe_capacity_rows(m, 100) == 50);
    m.capacity_factor = 0.0;
    CHECK(moetrain::moe_capacity_rows(m, 100) == -1);  // dropless
    m.capacity_factor = 1e300;                         // never more than every selection
    CHECK(moetrain::moe_capacity_rows(m, 100) == 200);
}

TEST_CASE("config: hostile v2 routing values are refused, naming the key") {
    const std::vector<std::pair<json, std::string>> cases = {
        {{{"routed_scaling", 0.0}}, "config: \"moe.routed_scaling\" = 0 must be positive"},
        {{{"routed_scaling", -2}}, "config: \"moe.routed_scaling\" = -2 must be positive"},
        {{{"bias_update_rate", -0.1}}, "config: \"moe.bias_update_rate\" = -0.1 must be >= 0"},
        {{{"capacity_factor", -1}}, "config: \"moe.capacity_factor\" = -1 must be >= 0"},
        {{{"router", "hash"}, {"bias_update_rate", 0.01}},
         "config: \"moe.bias_update_rate\" = 0.01 needs a top-k router (\"moe.router\" is "
         "\"hash\")"},
        {{{"router", "hash"}, {"capacity_factor", 2}},
         "config: \"moe.capacity_factor\" = 2 needs a top-k router (\"moe.router\" is \"hash\")"},
        {{{"router", "hash"}, {"routed_scaling", 2}},
         "config: \"moe.routed_scaling\" = 2 needs a top-k router (\"moe.router\" is \"hash\")"},
        {{{"top_k", 2}, {"capacity_factor", 0.4}},
         "config: \"moe.capacity_factor\" = 0.4 times \"moe.top_k\" = 2 is below 1 (capacity "
         "under the average load of first choices; use >= 0.5 or 0 for dropless)"},
        {{{"router", "sigmoid"}}, "config: \"moe.router\""},
        {{{"capacity_factor", "1.25"}}, "config: \"moe.capacity_factor\""},
    };
    for (const auto& [moe, want] : cases) {
        CAPTURE(moe.dump());
        const std::string e = parse_error(moe_config(moe));
        CHECK(e.rfind(want, 0) == 0);
        CHECK(e.find('\n') == std::string::npos);
    }
    // The hash router with the defaults written out still parses, and c * k = 1 is allowed.
    CHECK(parse_error(moe_config({{"router", "hash"},
                                  {"routed_scaling", 1.0},
                                  {"bias_update_rate", 0},
                                  {"capacity_factor", 0}}))
              .empty());
    CHECK(parse_error(moe_config({{"top_k", 2}, {"capacity_factor", 0.5}})).empty());
}

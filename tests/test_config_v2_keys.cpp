// The MoE options of docs/MODEL.md that are not implemented yet (sigmoid_topk routing, routed
// scaling, expert-bias updates, capacity factor): a config that asks for one is refused with one
// line naming the key, never parsed with the option silently ignored.
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

TEST_CASE("config: the MoE options not implemented yet are refused, naming the key") {
    const std::string not_yet = "is not implemented yet (docs/MODEL.md";
    const std::vector<std::pair<json, std::string>> cases = {
        {{{"router", "sigmoid_topk"}}, "config: \"moe.router\" = \"sigmoid_topk\" "},
        {{{"routed_scaling", 2.5}}, "config: \"moe.routed_scaling\" "},
        {{{"routed_scaling", 1.0}}, "config: \"moe.routed_scaling\" "},  // even the default
        {{{"bias_update_rate", 0.001}}, "config: \"moe.bias_update_rate\" "},
        {{{"capacity_factor", 1.25}}, "config: \"moe.capacity_factor\" "},
    };
    for (const auto& [moe, key] : cases) {
        CAPTURE(moe.dump());
        const std::string e = parse_error(moe_config(moe));
        CHECK(e == key + not_yet + ", \"Not implemented yet\")");
        CHECK(e.find('\n') == std::string::npos);
    }
    // The implemented routers still parse.
    for (const char* router : {"softmax_topk", "hash"})
        CHECK(parse_error(moe_config({{"router", router}})).empty());
}

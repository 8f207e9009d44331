// Inputs crafted to crash, hang or exhaust memory, found by review and by the fuzzers of
// tests/fuzz: each must end in one moetrain::Error naming the problem.
#include <doctest/doctest.h>

#include <string>

#include "io/checkpoint_meta.h"
#include "io/json.h"
#include "moetrain/config.h"
#include "test_checkpoint_util.h"

using namespace moetrain;
using namespace moetrain::testing;

TEST_CASE("hostile: deeply nested JSON is refused before parsing (no stack overflow)") {
    const std::string deep = std::string(200000, '[') + std::string(200000, ']');
    CHECK(error_of([&] { io::parse_json_strict(deep, "x.json"); }) ==
          "x.json: JSON nested deeper than 64 levels");
    CHECK(error_of([&] { parse_config("{\"a\":" + deep + "}"); }).find("nested deeper") !=
          std::string::npos);
    OptimizerState opt{};
    CHECK(error_of([&] { io::parse_state(deep, "state.json", &opt); }).find("nested deeper") !=
          std::string::npos);
    // Brackets inside strings do not count; 64 levels are fine.
    CHECK_NOTHROW(io::parse_json_strict("{\"k\": \"" + std::string(1000, '[') + "\"}", "s"));
    CHECK_NOTHROW(io::parse_json_strict(std::string(64, '[') + std::string(64, ']'), "s"));
}

TEST_CASE("hostile: configs whose counts would hang or exhaust the host are refused") {
    const std::string tiny = config_to_json(preset_config("tiny"));
    auto with = [&](const std::string& key, const std::string& value) {
        std::string text = tiny;
        const size_t at = text.find("\"" + key + "\"");
        REQUIRE(at != std::string::npos);
        const size_t colon = text.find(':', at), end = text.find_first_of(",}", colon);
        text.replace(colon + 1, end - colon - 1, value);
        return error_of([&] { parse_config(text); });
    };
    CHECK(with("n_layers", "1000000000").find("\"n_layers\" = 1000000000 exceeds the limit") !=
          std::string::npos);
    CHECK(with("max_seq_len", "2147483647").find("\"max_seq_len\"") != std::string::npos);
    CHECK(with("n_experts", "100000").find("\"moe.n_experts\"") != std::string::npos);
    CHECK(with("n_layers", "1024").empty());
}

// Config JSON (MODEL.md 1): every default, every rejection (the message names the key and is
// one line), the canonical JSON round trip, and config files.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "moetrain/config.h"
#include "moetrain/error.h"
#include "config_test_util.h"
#include "test_checkpoint_util.h"

using moetrain::ModelConfig;
using namespace moetrain::testing;
using nlohmann::json;

namespace {

json minimal() {
    return {{"vocab_size", 256}, {"d_model", 64},      {"n_layers", 2},
            {"n_heads", 4},      {"max_seq_len", 128}, {"d_ff", 128}};
}

json minimal_moe() {
    json j = minimal();
    j["moe"] = {{"n_experts", 8}};
    return j;
}

// The message of the moetrain::Error parse_config throws ("" when it does not throw).
std::string parse_error(const std::string& text) {
    return moetrain::testing::error_of([&] { moetrain::parse_config(text); });
}

struct BadCase {
    json config;
    std::string expected;  // substring of the error
};

json set(json j, const json::json_pointer& key, json value) {
    j[key] = std::move(value);
    return j;
}

json erase(json j, const std::string& key) {
    j.erase(key);
    return j;
}

}  // namespace

TEST_CASE("config: defaults of every optional key") {
    ModelConfig c = moetrain::parse_config(minimal().dump());
    CHECK(sizes_of(c) == ConfigSizes{256, 64, 2, 4, 1, 16, 128, 128});
    CHECK(kinds_of(c) == ConfigKinds{moetrain::NormKind::rmsnorm, moetrain::PosKind::rope,
                                     moetrain::FfnKind::swiglu, false, false});
    CHECK(numbers_of(c) == ConfigNumbers{1e-5, 10000.0, 1.0});
    CHECK(!c.moe.has_value());
    CHECK(!moetrain::parse_config(set(minimal(), "/moe"_json_pointer, nullptr).dump()).moe);

    ModelConfig m = moetrain::parse_config(minimal_moe().dump());
    REQUIRE(m.moe.has_value());
    CHECK(moe_basics_of(*m.moe) ==
          MoeBasics{8, 2, moetrain::RouterKind::softmax_topk, true, 0, 0.01, 0.0, 0});
}

TEST_CASE("config: explicit values of every key are read") {
    json j = {{"vocab_size", 300},
              {"d_model", 48},
              {"n_layers", 3},
              {"n_heads", 6},
              {"n_kv_heads", 3},
              {"head_dim", 10},
              {"max_seq_len", 77},
              {"norm", "layernorm"},
              {"norm_eps", 1e-6},
              {"pos", "learned"},
              {"rope_theta", 500000},
              {"rope_ntk_alpha", 2.5},
              {"ffn", "gelu"},
              {"d_ff", 96},
              {"bias", true},
              {"tie_embeddings", true},
              {"moe",
               {{"n_experts", 5},
                {"top_k", 3},
                {"router", "hash"},
                {"norm_topk_prob", false},
                {"n_shared_experts", 2},
                {"aux_loss_alpha", 0.5},
                {"z_loss_alpha", 0.25},
                {"first_layer", 3}}}};
    ModelConfig c = moetrain::parse_config(j.dump());
    // head_dim explicit: need not be d_model / n_heads.
    CHECK(sizes_of(c) == ConfigSizes{300, 48, 3, 6, 3, 10, 77, 96});
    CHECK(kinds_of(c) == ConfigKinds{moetrain::NormKind::layernorm, moetrain::PosKind::learned,
                                     moetrain::FfnKind::gelu, true, true});
    CHECK(numbers_of(c) == ConfigNumbers{1e-6, 500000.0, 2.5});
    REQUIRE(c.moe);
    CHECK(moe_basics_of(*c.moe) ==
          MoeBasics{5, 3, moetrain::RouterKind::hash, false, 2, 0.5, 0.25, 3});
    CHECK(c.moe->active_k() == 1);
    CHECK(!c.is_moe_layer(2));
    CHECK(moetrain::parse_config(set(j, "/ffn"_json_pointer, "relu").dump()).ffn ==
          moetrain::FfnKind::relu);
    // head_dim 0 means d_model / n_heads.
    CHECK(moetrain::parse_config(set(minimal(), "/head_dim"_json_pointer, 0).dump()).head_dim ==
          16);
    // Hash routing ignores top_k, so top_k > n_experts is accepted there.
    json hash = set(minimal_moe(), "/moe/router"_json_pointer, "hash");
    CHECK_NOTHROW(moetrain::parse_config(set(hash, "/moe/top_k"_json_pointer, 9).dump()));
    // An odd head_dim is fine with learned positions.
    json learned = set(minimal(), "/pos"_json_pointer, "learned");
    CHECK(moetrain::parse_config(set(learned, "/head_dim"_json_pointer, 5).dump()).head_dim == 5);
}

TEST_CASE("config: every rejection names the key in one line") {
    using P = json::json_pointer;
    const json m = minimal(), e = minimal_moe();
    const std::vector<BadCase> cases = {
        // syntax and structure
        {"not json", "invalid JSON"},
        {json::array({1, 2}), "top level must be a JSON object"},
        {set(m, P("/foo"), 1), "unknown key \"foo\""},
        {set(e, P("/moe/topk"), 1), "unknown key \"moe.topk\""},
        // required keys
        {erase(m, "vocab_size"), "missing required key \"vocab_size\""},
        {erase(m, "d_model"), "missing required key \"d_model\""},
        {erase(m, "n_layers"), "missing required key \"n_layers\""},
        {erase(m, "n_heads"), "missing required key \"n_heads\""},
        {erase(m, "max_seq_len"), "missing required key \"max_seq_len\""},
        {erase(m, "d_ff"), "missing required key \"d_ff\""},
        {set(m, P("/moe"), json::object()), "missing required key \"moe.n_experts\""},
        // wrong types
        {set(m, P("/d_model"), "64"), "\"d_model\" must be an integer, got \"64\""},
        {set(m, P("/d_model"), 64.5), "\"d_model\" must be an integer"},
        {set(m, P("/n_kv_heads"), nullptr), "\"n_kv_heads\" must be an integer"},
        {set(m, P("/vocab_size"), 10000000000LL), "\"vocab_size\" = 10000000000 is out of range"},
        {set(m, P("/bias"), 1), "\"bias\" must be true or false"},
        {set(m, P("/tie_embeddings"), "yes"), "\"tie_embeddings\" must be true or false"},
        {set(m, P("/norm"), 3), "\"norm\" must be a string"},
        {set(m, P("/norm"), "batchnorm"),
         "\"norm\" = \"batchnorm\" is not one of rmsnorm, layernorm"},
        {set(m, P("/pos"), "alibi"), "\"pos\" = \"alibi\" is not one of rope, learned"},
        {set(m, P("/ffn"), "geglu"), "\"ffn\" = \"geglu\" is not one of swiglu, gelu, relu"},
        {set(m, P("/norm_eps"), "1e-5"), "\"norm_eps\" must be a number"},
        {set(m, P("/rope_theta"), true), "\"rope_theta\" must be a number"},
        {set(m, P("/moe"), 4), "\"moe\" must be a JSON object"},
        {set(e, P("/moe/top_k"), 2.0), "\"moe.top_k\" must be an integer"},
        {set(e, P("/moe/router"), "topk"), "\"moe.router\" = \"topk\" is not one of"},
        {set(e, P("/moe/norm_topk_prob"), 0), "\"moe.norm_topk_prob\" must be true or false"},
        {set(e, P("/moe/aux_loss_alpha"), "0.1"), "\"moe.aux_loss_alpha\" must be a number"},
        // inconsistent or out-of-range values
        {set(m, P("/vocab_size"), 0), "\"vocab_size\" = 0 must be positive"},
        {set(m, P("/d_model"), -64), "\"d_model\" = -64 must be positive"},
        {set(m, P("/n_layers"), 0), "\"n_layers\" = 0 must be positive"},
        {set(m, P("/n_heads"), 0), "\"n_heads\" = 0 must be positive"},
        {set(m, P("/n_kv_heads"), 0), "\"n_kv_heads\" = 0 must be positive"},
        {set(m, P("/max_seq_len"), 0), "\"max_seq_len\" = 0 must be positive"},
        {set(m, P("/d_ff"), 0), "\"d_ff\" = 0 must be positive"},
        {set(m, P("/head_dim"), -2), "\"head_dim\" = -2 must be positive"},
        {set(m, P("/n_kv_heads"), 3), "\"n_heads\" = 4 is not a multiple of \"n_kv_heads\" = 3"},
        {set(m, P("/d_model"), 66), "\"d_model\" = 66 is not divisible by \"n_heads\" = 4"},
        {set(m, P("/head_dim"), 5), "\"head_dim\" = 5 must be even with \"pos\" = \"rope\""},
        {set(set(m, P("/head_dim"), 2), P("/rope_ntk_alpha"), 2.0), "\"rope_ntk_alpha\" = 2"},
        {set(m, P("/norm_eps"), 0), "\"norm_eps\" = 0 must be positive"},
        {set(m, P("/rope_theta"), -1), "\"rope_theta\" = -1 must be positive"},
        {set(m, P("/rope_ntk_alpha"), 0), "\"rope_ntk_alpha\" = 0 must be positive"},
        {set(e, P("/moe/n_experts"), 0), "\"moe.n_experts\" = 0 must be positive"},
        {set(e, P("/moe/top_k"), 0), "\"moe.top_k\" = 0 must be positive"},
        {set(e, P("/moe/n_shared_experts"), -1), "\"moe.n_shared_experts\" = -1 must be >= 0"},
        {set(e, P("/moe/aux_loss_alpha"), -0.5), "\"moe.aux_loss_alpha\" = -0.5 must be >= 0"},
        {set(e, P("/moe/z_loss_alpha"), -1), "\"moe.z_loss_alpha\" = -1 must be >= 0"},
        {set(e, P("/moe/first_layer"), 3),
         "\"moe.first_layer\" = 3 is outside [0, \"n_layers\" = 2]"},
        {set(e, P("/moe/first_layer"), -1), "\"moe.first_layer\" = -1 is outside"},
        {set(set(m, P("/d_model"), 1 << 30), P("/d_ff"), 1 << 30), "parameters"},
    };
    for (const BadCase& bad : cases) {
        std::string text =
            bad.config.is_string() ? bad.config.get<std::string>() : bad.config.dump();
        std::string msg = parse_error(text);
        CAPTURE(text);
        CAPTURE(msg);
        CHECK(msg.rfind("config: ", 0) == 0);
        CHECK(msg.find(bad.expected) != std::string::npos);
        CHECK(msg.find('\n') == std::string::npos);
    }
    // The exact form promised in the brief.
    CHECK(parse_error(set(minimal_moe(), "/moe/top_k"_json_pointer, 9).dump()) ==
          "config: \"moe.top_k\" = 9 exceeds \"moe.n_experts\" = 8");
    // Duplicate keys are not silently resolved.
    CHECK(parse_error(R"({"vocab_size": 256, "vocab_size": 512})") ==
          "config: duplicate key \"vocab_size\"");
}

TEST_CASE("config: validate_config applies the same rules to configs built in code") {
    ModelConfig c = moetrain::parse_config(minimal_moe().dump());
    CHECK_NOTHROW(moetrain::validate_config(c));
    ModelConfig unresolved = c;
    unresolved.head_dim = 0;
    CHECK_THROWS_WITH_AS(moetrain::validate_config(unresolved), doctest::Contains("\"head_dim\""),
                         moetrain::Error);
    ModelConfig bad_k = c;
    bad_k.moe->top_k = 9;
    CHECK_THROWS_WITH_AS(moetrain::validate_config(bad_k),
                         "config: \"moe.top_k\" = 9 exceeds \"moe.n_experts\" = 8",
                         moetrain::Error);
}

TEST_CASE("config: canonical JSON writes every key and round-trips exactly") {
    json full = minimal_moe();
    full["norm_eps"] = 1.0 / 3.0;  // needs all 17 digits to survive
    full["rope_theta"] = 123456.789;
    full["moe"]["z_loss_alpha"] = 1e-7;
    for (const json& j : {minimal(), full}) {
        ModelConfig c = moetrain::parse_config(j.dump());
        std::string text = moetrain::config_to_json(c);
        json canonical = json::parse(text);
        CHECK(canonical.size() == 17);  // every top-level key of MODEL.md 1
        CHECK(canonical["head_dim"] == 16);
        if (c.moe)
            CHECK(canonical["moe"].size() == 11);  // every moe key of MODEL.md 1 (v2)
        else
            CHECK(canonical["moe"].is_null());
        ModelConfig back = moetrain::parse_config(text);
        CHECK(moetrain::config_to_json(back) == text);
        CHECK(back.norm_eps == c.norm_eps);
        CHECK(back.rope_theta == c.rope_theta);
        if (c.moe) CHECK(back.moe->z_loss_alpha == c.moe->z_loss_alpha);
    }
}

TEST_CASE("config: load_config_file names the file") {
    moetrain::testing::TempDir dir;
    std::string good = dir.file("good.json"), bad = dir.file("bad.json");
    moetrain::testing::spit(good, minimal().dump());
    moetrain::testing::spit(bad, set(minimal(), "/d_ff"_json_pointer, "wide").dump());
    CHECK(moetrain::load_config_file(good).d_ff == 128);
    CHECK_THROWS_WITH_AS(
        moetrain::load_config_file(bad),
        ("config file " + bad + ": config: \"d_ff\" must be an integer, got \"wide\"").c_str(),
        moetrain::Error);
    std::string missing = dir.file("missing.json");
    CHECK_THROWS_WITH_AS(moetrain::load_config_file(missing),
                         doctest::Contains(("config file " + missing + ": cannot open").c_str()),
                         moetrain::Error);
}

// Built-in presets: all valid, sizes as specified, round trip, unknown names rejected.
#include <doctest/doctest.h>

#include "moetrain/config.h"
#include "config_test_util.h"
#include "moetrain/error.h"

using moetrain::ModelConfig;
using namespace moetrain::testing;

TEST_CASE("config: every preset is valid and round-trips through JSON") {
    auto names = moetrain::preset_names();
    CHECK(names ==
          std::vector<std::string>{"tiny", "dense-small", "moe-mini", "gpt2-124m", "seed-moe"});
    for (const auto& name : names) {
        CAPTURE(name);
        ModelConfig c = moetrain::preset_config(name);
        CHECK_NOTHROW(moetrain::validate_config(c));
        std::string text = moetrain::config_to_json(c);
        CHECK(moetrain::config_to_json(moetrain::parse_config(text)) == text);
    }
}

TEST_CASE("config: preset sizes") {
    ModelConfig t = moetrain::preset_config("tiny");
    CHECK(sizes_of(t) == ConfigSizes{256, 64, 2, 4, 2, 16, 128, 128});
    REQUIRE(t.moe);
    CHECK(t.moe->n_experts == 4);
    CHECK(t.moe->top_k == 2);
    CHECK(t.moe->n_shared_experts == 1);
    CHECK(t.moe->z_loss_alpha == 0.001);
    CHECK(!t.is_moe_layer(0));  // one dense and one MoE layer
    CHECK(t.is_moe_layer(1));

    for (const char* name : {"dense-small", "gpt2-124m"}) {
        CAPTURE(name);
        ModelConfig c = moetrain::preset_config(name);
        CHECK(kinds_of(c) == ConfigKinds{moetrain::NormKind::layernorm, moetrain::PosKind::learned,
                                         moetrain::FfnKind::gelu, true, true});
        CHECK(c.n_kv_heads == c.n_heads);
        CHECK(c.max_seq_len == 1024);
        CHECK(!c.moe);
    }
    ModelConfig d = moetrain::preset_config("dense-small");
    CHECK((d.vocab_size == 8192 && d.d_model == 512 && d.n_layers == 8 && d.n_heads == 8 &&
           d.d_ff == 2048));
    ModelConfig g = moetrain::preset_config("gpt2-124m");
    CHECK((g.vocab_size == 50304 && g.d_model == 768 && g.n_layers == 12 && g.n_heads == 12 &&
           g.d_ff == 3072 && g.head_dim == 64));

    ModelConfig m = moetrain::preset_config("moe-mini");
    CHECK((m.vocab_size == 8192 && m.d_model == 512 && m.n_layers == 8 && m.n_heads == 8 &&
           m.n_kv_heads == 1 && m.d_ff == 1024 && m.max_seq_len == 1024));
    ModelConfig s = moetrain::preset_config("seed-moe");
    CHECK((s.vocab_size == 32000 && s.d_model == 768 && s.n_layers == 30 && s.n_heads == 12 &&
           s.n_kv_heads == 1 && s.d_ff == 6144 && s.max_seq_len == 2048));
    for (const ModelConfig& c : {m, s}) {
        CHECK(kinds_of(c) == ConfigKinds{moetrain::NormKind::rmsnorm, moetrain::PosKind::rope,
                                         moetrain::FfnKind::swiglu, false, false});
        REQUIRE(c.moe);
        CHECK(c.moe->n_experts == 16);
        CHECK(c.moe->top_k == 4);
        CHECK(c.moe->first_layer == 0);
    }
}

TEST_CASE("config: unknown preset lists the known names") {
    CHECK_THROWS_WITH_AS(
        moetrain::preset_config("huge"),
        "unknown preset \"huge\" (known: tiny, dense-small, moe-mini, gpt2-124m, seed-moe)",
        moetrain::Error);
}

TEST_CASE("config: enum names") {
    CHECK(moetrain::to_string(moetrain::NormKind::layernorm) == "layernorm");
    CHECK(moetrain::to_string(moetrain::PosKind::rope) == "rope");
    CHECK(moetrain::to_string(moetrain::FfnKind::relu) == "relu");
    CHECK(moetrain::to_string(moetrain::RouterKind::softmax_topk) == "softmax_topk");
}

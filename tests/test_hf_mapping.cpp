// The Hugging Face tensor mapping (models/io/hf_tensor_map.cpp) against the MODEL.md layout:
// for every family, every element of every moetrain parameter is covered by exactly one
// transformers tensor, each transformers tensor's parts fill its shape, and the exported
// config.json reads back as the same config. (The numbers themselves are compared with
// transformers by tests/hf/hf_interop_tests.py.)
#include <doctest/doctest.h>

#include <map>
#include <vector>

#include "io/hf_mapping.h"
#include "model/param_layout.h"
#include "moetrain/config.h"

using namespace moetrain;

namespace {

ModelConfig base() {
    return sized_config(300, 32, 2, 4, 2, 24, 16);
}

void check_cover(io::HfFamily f, const ModelConfig& c) {
    const std::vector<ParamInfo> layout = build_param_layout(c);
    std::map<std::string, std::vector<int>> hits;
    for (const ParamInfo& p : layout) hits[p.name].assign(static_cast<size_t>(p.numel()), 0);
    for (const io::HfTensor& t : io::hf_tensor_map(f, c)) {
        CAPTURE(t.name);
        int64_t n = 0;
        for (const io::HfPart& part : t.parts) {
            CAPTURE(part.name);
            REQUIRE(hits.count(part.name) == 1);
            auto& h = hits[part.name];
            REQUIRE(part.offset >= 0);
            REQUIRE(part.offset + part.numel <= static_cast<int64_t>(h.size()));
            for (int64_t i = 0; i < part.numel; ++i) ++h[static_cast<size_t>(part.offset + i)];
            n += part.numel;
        }
        if (t.parts.empty())
            CHECK_FALSE(t.zero_reason.empty());
        else
            CHECK(n == t.numel());
        if (t.transpose) CHECK(t.shape.size() == 2);
    }
    for (const auto& [name, h] : hits) {
        CAPTURE(name);
        for (int v : h) REQUIRE(v == 1);
    }
    CHECK(io::hf_family_for_export(c) == f);
    CHECK_NOTHROW(io::hf_check_round_trip(f, c));
    const io::HfImportedConfig back =
        io::hf_config_from_json(io::hf_config_json(f, c), "config.json");
    CHECK(back.family == f);
    CHECK(back.config.n_kv_heads == c.n_kv_heads);
    CHECK(back.config.tie_embeddings == c.tie_embeddings);
}

}  // namespace

TEST_CASE("hf mapping: GPT-2 covers every parameter once, tied and untied") {
    ModelConfig c = base();
    c.n_kv_heads = 4;
    c.norm = NormKind::layernorm;
    c.pos = PosKind::learned;
    c.ffn = FfnKind::gelu;
    c.bias = true;
    for (bool tie : {true, false}) {
        c.tie_embeddings = tie;
        check_cover(io::HfFamily::gpt2, c);
    }
    // RoPE settings mean nothing with learned positions: they do not block the export.
    c.rope_theta = 5e5;
    c.rope_ntk_alpha = 2.0;
    CHECK_NOTHROW(io::hf_check_round_trip(io::HfFamily::gpt2, c));
}

TEST_CASE("hf mapping: Llama, Mixtral and Qwen2-MoE cover every parameter once") {
    ModelConfig c = base();
    check_cover(io::HfFamily::llama, c);
    c.tie_embeddings = true;
    c.n_kv_heads = 1;
    check_cover(io::HfFamily::llama, c);
    MoeConfig m;
    m.n_experts = 4;
    m.top_k = 2;
    c.moe = m;
    check_cover(io::HfFamily::mixtral, c);
    c.moe->n_shared_experts = 2;
    c.moe->norm_topk_prob = false;
    check_cover(io::HfFamily::qwen2_moe, c);
}

TEST_CASE("hf mapping: the NTK alpha is folded into rope_theta") {
    ModelConfig c = base();
    c.rope_ntk_alpha = 4.0;
    const io::HfImportedConfig back =
        io::hf_config_from_json(io::hf_config_json(io::HfFamily::llama, c), "config.json");
    CHECK(back.config.rope_ntk_alpha == 1.0);
    CHECK(back.config.rope_theta == c.rope_theta_eff());
    CHECK(c.rope_theta_eff() > c.rope_theta);
}

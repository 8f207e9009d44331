// Built-in model presets: `tiny` for tests (small, but dense + MoE layers, shared expert,
// grouped-query attention and z-loss), and the reference sizes named in the task brief.
#include <functional>
#include <utility>

#include "io/json.h"
#include "moetrain/config.h"
#include "moetrain/error.h"

namespace moetrain {

ModelConfig sized_config(int vocab_size, int d_model, int n_layers, int n_heads, int n_kv_heads,
                         int d_ff, int max_seq_len) {
    ModelConfig c;
    c.vocab_size = vocab_size;
    c.d_model = d_model;
    c.n_layers = n_layers;
    c.n_heads = n_heads;
    c.n_kv_heads = n_kv_heads;
    c.head_dim = d_model / n_heads;
    c.d_ff = d_ff;
    c.max_seq_len = max_seq_len;
    return c;
}

namespace {

// GPT-2 style: layernorm with biases, learned positions, gelu, tied embeddings.
ModelConfig gpt_style(ModelConfig c) {
    c.norm = NormKind::layernorm;
    c.pos = PosKind::learned;
    c.ffn = FfnKind::gelu;
    c.bias = true;
    c.tie_embeddings = true;
    return c;
}

ModelConfig with_moe(ModelConfig c, int n_experts, int top_k) {
    MoeConfig m;
    m.n_experts = n_experts;
    m.top_k = top_k;
    c.moe = m;
    return c;
}

ModelConfig tiny() {
    // Layer 0 dense, layer 1 MoE (4 experts, top-2, 1 shared expert, z-loss on).
    ModelConfig c = with_moe(sized_config(256, 64, 2, 4, 2, 128, 128), 4, 2);
    c.moe->n_shared_experts = 1;
    c.moe->z_loss_alpha = 0.001;
    c.moe->first_layer = 1;
    return c;
}

const std::vector<std::pair<std::string, std::function<ModelConfig()>>>& presets() {
    static const std::vector<std::pair<std::string, std::function<ModelConfig()>>> table = {
        {"tiny", tiny},
        {"dense-small", [] { return gpt_style(sized_config(8192, 512, 8, 8, 8, 2048, 1024)); }},
        {"moe-mini", [] { return with_moe(sized_config(8192, 512, 8, 8, 1, 1024, 1024), 16, 4); }},
        {"gpt2-124m", [] { return gpt_style(sized_config(50304, 768, 12, 12, 12, 3072, 1024)); }},
        {"seed-moe",
         [] { return with_moe(sized_config(32000, 768, 30, 12, 1, 6144, 2048), 16, 4); }},
    };
    return table;
}

}  // namespace

std::vector<std::string> preset_names() {
    std::vector<std::string> names;
    for (const auto& p : presets()) names.push_back(p.first);
    return names;
}

ModelConfig preset_config(const std::string& name) {
    for (const auto& p : presets()) {
        if (p.first != name) continue;
        ModelConfig c = p.second();
        validate_config(c);
        return c;
    }
    fail("unknown preset \"", name, "\" (known: ", io::join(preset_names()), ")");
}

}  // namespace moetrain

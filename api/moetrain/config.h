// Model configuration (MODEL.md section 1): the JSON stored in every checkpoint, its parser
// and validator (errors name the offending key), and the built-in presets.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moetrain {

enum class NormKind { rmsnorm, layernorm };
enum class PosKind { rope, learned };
enum class FfnKind { swiglu, gelu, relu };
enum class RouterKind { softmax_topk, hash, sigmoid_topk };

struct MoeConfig {
    int n_experts = 0;
    int top_k = 2;
    RouterKind router = RouterKind::softmax_topk;
    bool norm_topk_prob = true;
    int n_shared_experts = 0;
    double aux_loss_alpha = 0.01;
    double z_loss_alpha = 0.0;
    int first_layer = 0;
    double routed_scaling = 1.0;    // multiplies the routed weights (top-k routers)
    double bias_update_rate = 0.0;  // u > 0: expert bias balancing (top-k routers)
    double capacity_factor = 0.0;   // c > 0: per-expert capacity in training micro-batches
    // Experts each token goes to (hash routing is top-1).
    int active_k() const { return router == RouterKind::hash ? 1 : top_k; }
    // softmax_topk or sigmoid_topk: a learned router weight selects k experts.
    bool topk_router() const { return router != RouterKind::hash; }
    bool has_expert_bias() const { return bias_update_rate > 0; }
};

struct ModelConfig {
    int vocab_size = 0;
    int d_model = 0;
    int n_layers = 0;
    int n_heads = 0;
    int n_kv_heads = 1;
    int head_dim = 0;  // 0 in JSON input = d_model / n_heads; always resolved after parsing
    int max_seq_len = 0;
    NormKind norm = NormKind::rmsnorm;
    double norm_eps = 1e-5;
    PosKind pos = PosKind::rope;
    double rope_theta = 10000.0;
    double rope_ntk_alpha = 1.0;
    FfnKind ffn = FfnKind::swiglu;
    int d_ff = 0;
    bool bias = false;
    bool tie_embeddings = false;
    std::optional<MoeConfig> moe;

    bool is_moe_layer(int l) const { return moe && l >= moe->first_layer; }
    // rope_theta * alpha^(h/(h-2)), in double (MODEL.md 2).
    double rope_theta_eff() const;
};

// A config of these sizes (head_dim = d_model / n_heads) with every other setting at its
// default: the starting point of the presets and of configs built in code.
ModelConfig sized_config(int vocab_size, int d_model, int n_layers, int n_heads, int n_kv_heads,
                         int d_ff, int max_seq_len);

// Parse and validate a JSON config. Throws moetrain::Error naming the key on unknown keys,
// wrong types, missing required keys and inconsistent values.
ModelConfig parse_config(const std::string& json_text);
// Read a JSON config file (errors name the file).
ModelConfig load_config_file(const std::string& path);
// Validate a config built in code (same rules as parse_config).
void validate_config(const ModelConfig& c);
// The per-expert capacity of a training micro-batch of N tokens (MODEL.md 2):
// ceil(((c * N) * k) / E) in float64, in exactly that order; -1 when the model is dropless.
int64_t moe_capacity_rows(const MoeConfig& m, int64_t N);
// Canonical JSON with every key written explicitly (head_dim resolved).
std::string config_to_json(const ModelConfig& c);

// Built-in presets: tiny, dense-small, moe-mini, gpt2-124m, seed-moe.
std::vector<std::string> preset_names();
ModelConfig preset_config(const std::string& name);  // throws on unknown name

std::string to_string(NormKind k);
std::string to_string(PosKind k);
std::string to_string(FfnKind k);
std::string to_string(RouterKind k);

}  // namespace moetrain

// A transformers config.json as a moetrain ModelConfig: GPT2LMHeadModel, LlamaForCausalLM,
// MixtralForCausalLM, Qwen2MoeForCausalLM (transformers 4.40 keys and defaults). Every
// setting that changes the model function and has no MODEL.md counterpart is refused with
// one line naming the key; keys that do not change the function (dropout, cache, token ids)
// are ignored.
#include <cmath>

#include "io/hf_mapping.h"
#include "io/json.h"
#include "moetrain/error.h"

namespace moetrain::io {

namespace {

struct Keys {
    const json& j;
    std::string where;

    [[noreturn]] void refuse(const std::string& key, const std::string& why) const {
        fail(where, ": \"", key, "\" ", why);
    }
    bool has(const std::string& k) const { return j.contains(k) && !j.at(k).is_null(); }
    int integer(const std::string& k) const {
        if (!has(k)) fail(where, ": missing \"", k, "\"");
        const json& v = j.at(k);
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (1 << 30))
            refuse(k, "must be a non-negative integer, not " + v.dump());
        return v.get<int>();
    }
    int integer(const std::string& k, int def) const { return has(k) ? integer(k) : def; }
    double number(const std::string& k, double def) const {
        if (!has(k)) return def;
        const json& v = j.at(k);
        if (!v.is_number() || !std::isfinite(v.get<double>()))
            refuse(k, "must be a finite number, not " + v.dump());
        return v.get<double>();
    }
    bool boolean(const std::string& k, bool def) const {
        if (!has(k)) return def;
        if (!j.at(k).is_boolean()) refuse(k, "must be true or false, not " + j.at(k).dump());
        return j.at(k).get<bool>();
    }
    std::string string(const std::string& k, const std::string& def) const {
        if (!has(k)) return def;
        if (!j.at(k).is_string()) refuse(k, "must be a string, not " + j.at(k).dump());
        return j.at(k).get<std::string>();
    }
    // A key whose only representable value is `want` (absent counts as `def`).
    void require_bool(const std::string& k, bool def, bool want, const std::string& why) const {
        if (boolean(k, def) != want)
            refuse(k, std::string("= ") + (want ? "false" : "true") + " is not supported: " + why);
    }
};

HfFamily family_of(const Keys& k) {
    std::string arch;
    if (k.j.contains("architectures") && k.j.at("architectures").is_array() &&
        !k.j.at("architectures").empty() && k.j.at("architectures")[0].is_string())
        arch = k.j.at("architectures")[0].get<std::string>();
    const std::string type = k.string("model_type", "");
    for (HfFamily f : {HfFamily::gpt2, HfFamily::llama, HfFamily::mixtral, HfFamily::qwen2_moe})
        if (arch == hf_architecture(f) || (arch.empty() && type == hf_model_type(f))) return f;
    fail(k.where, ": unknown architecture \"", arch.empty() ? type : arch,
         "\" (moetrain imports GPT2LMHeadModel, LlamaForCausalLM, MixtralForCausalLM and "
         "Qwen2MoeForCausalLM)");
}

ModelConfig gpt2(const Keys& k) {
    ModelConfig c;
    c.vocab_size = k.integer("vocab_size");
    c.d_model = k.integer("n_embd");
    c.n_layers = k.integer("n_layer");
    c.n_heads = k.integer("n_head");
    c.n_kv_heads = c.n_heads;
    c.max_seq_len = k.integer("n_positions");
    c.d_ff = k.integer("n_inner", 4 * c.d_model);
    c.norm = NormKind::layernorm;
    c.norm_eps = k.number("layer_norm_epsilon", 1e-5);
    c.pos = PosKind::learned;
    c.bias = true;
    c.tie_embeddings = k.boolean("tie_word_embeddings", true);
    const std::string act = k.string("activation_function", "gelu_new");
    if (act == "gelu_new" || act == "gelu_pytorch_tanh")
        c.ffn = FfnKind::gelu;
    else if (act == "relu")
        c.ffn = FfnKind::relu;
    else
        k.refuse("activation_function", "= \"" + act +
                                            "\" is not supported: MODEL.md has the "
                                            "tanh gelu (gelu_new) and relu");
    k.require_bool("scale_attn_weights", true, true, "MODEL.md scales scores by 1/sqrt(head_dim)");
    k.require_bool("scale_attn_by_inverse_layer_idx", false, false,
                   "MODEL.md scales every layer's scores alike");
    k.require_bool("add_cross_attention", false, false, "MODEL.md has no cross-attention");
    return c;
}

// Keys shared by Llama, Mixtral and Qwen2-MoE.
ModelConfig llama_family(const Keys& k, HfFamily f) {
    ModelConfig c;
    c.vocab_size = k.integer("vocab_size");
    c.d_model = k.integer("hidden_size");
    c.n_layers = k.integer("num_hidden_layers");
    c.n_heads = k.integer("num_attention_heads");
    c.n_kv_heads = k.integer("num_key_value_heads", c.n_heads);
    c.max_seq_len = k.integer("max_position_embeddings");
    c.d_ff = k.integer("intermediate_size");
    c.norm = NormKind::rmsnorm;
    c.norm_eps = k.number("rms_norm_eps", f == HfFamily::mixtral ? 1e-5 : 1e-6);
    c.pos = PosKind::rope;
    c.rope_theta = k.number("rope_theta", f == HfFamily::mixtral ? 1e6 : 10000.0);
    c.ffn = FfnKind::swiglu;
    c.tie_embeddings = k.boolean("tie_word_embeddings", false);
    const std::string act = k.string("hidden_act", "silu");
    if (act != "silu" && act != "swish")
        k.refuse("hidden_act",
                 "= \"" + act + "\" is not supported: MODEL.md's gated FFN is SwiGLU");
    if (k.has("rope_scaling"))
        k.refuse("rope_scaling",
                 "is not supported: MODEL.md's RoPE has only rope_theta and the "
                 "NTK alpha");
    if (k.has("head_dim") && c.n_heads > 0 && k.integer("head_dim") * c.n_heads != c.d_model)
        k.refuse("head_dim", "!= hidden_size / num_attention_heads is not supported");
    k.require_bool("attention_bias", false, false, "MODEL.md's bias = true also needs FFN biases");
    k.require_bool("mlp_bias", false, false,
                   "MODEL.md has no setting with FFN biases but no attention-output bias");
    if (f != HfFamily::llama && k.has("sliding_window") &&
        k.integer("sliding_window") < c.max_seq_len)
        k.refuse("sliding_window",
                 "= " + std::to_string(k.integer("sliding_window")) +
                     " < max_position_embeddings is not supported: MODEL.md attends to the whole "
                     "causal prefix");
    return c;
}

void moe_keys(const Keys& k, HfFamily f, ModelConfig& c) {
    MoeConfig m;
    m.router = RouterKind::softmax_topk;
    m.aux_loss_alpha = k.number("router_aux_loss_coef", 0.001);
    m.z_loss_alpha = 0.0;
    m.first_layer = 0;
    if (f == HfFamily::mixtral) {
        m.n_experts = k.integer("num_local_experts", 8);
        m.top_k = k.integer("num_experts_per_tok", 2);
        m.norm_topk_prob = true;  // Mixtral always renormalises the top-k probabilities
        m.n_shared_experts = 0;
    } else {
        m.n_experts = k.integer("num_experts", 60);
        m.top_k = k.integer("num_experts_per_tok", 4);
        m.norm_topk_prob = k.boolean("norm_topk_prob", false);
        c.d_ff = k.integer("moe_intermediate_size", 1408);
        const int shared = k.integer("shared_expert_intermediate_size", 5632);
        if (c.d_ff <= 0 || shared <= 0 || shared % c.d_ff != 0)
            k.refuse("shared_expert_intermediate_size",
                     "= " + std::to_string(shared) +
                         " is not a positive multiple of "
                         "moe_intermediate_size " +
                         std::to_string(c.d_ff) +
                         " (MODEL.md's shared expert is n_shared_experts * d_ff wide)");
        m.n_shared_experts = shared / c.d_ff;
        if (k.integer("decoder_sparse_step", 1) != 1)
            k.refuse("decoder_sparse_step",
                     "!= 1 is not supported: MODEL.md's dense layers "
                     "come only before the first MoE layer");
        if (k.j.contains("mlp_only_layers") && k.j.at("mlp_only_layers").is_array() &&
            !k.j.at("mlp_only_layers").empty())
            k.refuse("mlp_only_layers", "is not supported (dense layers among the MoE layers)");
    }
    c.moe = m;
}

}  // namespace

HfImportedConfig hf_config_from_json(const std::string& text, const std::string& where) {
    const json j = parse_json_strict(text, where);
    MT_CHECK(j.is_object(), where, ": not a JSON object");
    const Keys k{j, where};
    HfImportedConfig out{family_of(k), {}};
    if (out.family == HfFamily::gpt2) {
        out.config = gpt2(k);
    } else {
        out.config = llama_family(k, out.family);
        if (out.family != HfFamily::llama) moe_keys(k, out.family, out.config);
    }
    out.config.head_dim = out.config.n_heads > 0 ? out.config.d_model / out.config.n_heads : 0;
    if (out.config.n_heads > 0 && out.config.head_dim * out.config.n_heads != out.config.d_model)
        fail(where, ": hidden size ", out.config.d_model, " is not a multiple of the head count ",
             out.config.n_heads);
    try {
        validate_config(out.config);
    } catch (const Error& e) {
        fail(where, ": ", e.what());
    }
    return out;
}

}  // namespace moetrain::io

// config.json and generation_config.json of an exported model (the transformers 4.40 keys of
// each class). Token ids are null: moetrain's vocabularies have no special tokens, and the
// classes' defaults (GPT-2 50256, Llama 1 / 2) would name ordinary tokens or none at all.
// Dropout is 0 and sliding windows are off: moetrain has neither.
#include "io/hf_mapping.h"
#include "io/json.h"

namespace moetrain::io {

namespace {
void common_keys(ordered_json& j, HfFamily f, const ModelConfig& c) {
    j["architectures"] = {hf_architecture(f)};
    j["model_type"] = hf_model_type(f);
    j["vocab_size"] = c.vocab_size;
    j["tie_word_embeddings"] = c.tie_embeddings;
    j["bos_token_id"] = nullptr;
    j["eos_token_id"] = nullptr;
    j["pad_token_id"] = nullptr;
    j["torch_dtype"] = "float32";
    j["use_cache"] = true;
    j["initializer_range"] = 0.02;
}

void gpt2_keys(ordered_json& j, const ModelConfig& c) {
    j["n_positions"] = c.max_seq_len;
    j["n_embd"] = c.d_model;
    j["n_layer"] = c.n_layers;
    j["n_head"] = c.n_heads;
    j["n_inner"] = c.d_ff;
    j["activation_function"] = c.ffn == FfnKind::gelu ? "gelu_new" : "relu";
    j["layer_norm_epsilon"] = c.norm_eps;
    j["resid_pdrop"] = 0.0;
    j["embd_pdrop"] = 0.0;
    j["attn_pdrop"] = 0.0;
    j["scale_attn_weights"] = true;
    j["scale_attn_by_inverse_layer_idx"] = false;
    j["reorder_and_upcast_attn"] = false;
}

void llama_keys(ordered_json& j, const ModelConfig& c) {
    j["hidden_size"] = c.d_model;
    j["intermediate_size"] = c.d_ff;
    j["num_hidden_layers"] = c.n_layers;
    j["num_attention_heads"] = c.n_heads;
    j["num_key_value_heads"] = c.n_kv_heads;
    j["hidden_act"] = "silu";
    j["max_position_embeddings"] = c.max_seq_len;
    j["rms_norm_eps"] = c.norm_eps;
    j["rope_theta"] = c.rope_theta_eff();  // the NTK alpha folded in (MODEL.md 2)
    j["rope_scaling"] = nullptr;
    j["attention_dropout"] = 0.0;
}
}  // namespace

std::string hf_config_json(HfFamily f, const ModelConfig& c) {
    ordered_json j;
    common_keys(j, f, c);
    if (f == HfFamily::gpt2) {
        gpt2_keys(j, c);
        return j.dump(2) + "\n";
    }
    llama_keys(j, c);
    if (f == HfFamily::llama) {
        j["attention_bias"] = false;
        j["pretraining_tp"] = 1;
        return j.dump(2) + "\n";
    }
    const MoeConfig& m = *c.moe;
    j["num_experts_per_tok"] = m.top_k;
    j["router_aux_loss_coef"] = m.aux_loss_alpha;
    j["output_router_logits"] = false;
    j["sliding_window"] = nullptr;
    if (f == HfFamily::mixtral) {
        j["num_local_experts"] = m.n_experts;
        j["router_jitter_noise"] = 0.0;
    } else {
        j["num_experts"] = m.n_experts;
        j["moe_intermediate_size"] = c.d_ff;
        j["shared_expert_intermediate_size"] = static_cast<int64_t>(m.n_shared_experts) * c.d_ff;
        j["norm_topk_prob"] = m.norm_topk_prob;
        j["decoder_sparse_step"] = 1;
        j["use_sliding_window"] = false;
        j["max_window_layers"] = c.n_layers;
    }
    return j.dump(2) + "\n";
}

std::string hf_generation_config_json(const ModelConfig& c) {
    ordered_json j;
    j["bos_token_id"] = nullptr;
    j["eos_token_id"] = nullptr;
    j["pad_token_id"] = nullptr;
    j["max_length"] = c.max_seq_len;
    return j.dump(2) + "\n";
}

}  // namespace moetrain::io

// Which transformers class computes exactly a moetrain config's function (export side), and
// the training-only settings that do not carry over. Facts of transformers 4.40 used here:
// - GPT2LMHeadModel: layernorm with bias, learned positions, biases on every linear, the
//   tanh gelu ("gelu_new") or relu, multi-head attention only, head_dim = n_embd / n_head.
// - LlamaForCausalLM: rmsnorm, half-split RoPE, SwiGLU MLP without biases, GQA through
//   num_key_value_heads, head_dim = hidden_size / num_attention_heads; attention_bias puts
//   biases on q/k/v/o only (MODEL.md's bias also needs FFN biases, which Llama lacks).
// - MixtralForCausalLM: Llama attention without biases; every layer is sparse; softmax over
//   all experts, top-k, then ALWAYS renormalised; no shared expert.
// - Qwen2MoeForCausalLM: q/k/v biases (o none); softmax, top-k, renormalised only with
//   norm_topk_prob; a shared expert scaled by sigmoid(shared_expert_gate(x)). With a zero
//   gate that factor is exactly 0.5, so MODEL.md's ungated shared expert is exported with a
//   zero gate and its w_down doubled (both exact in floating point).
#include <cmath>

#include "io/hf_mapping.h"
#include "io/json.h"
#include "moetrain/enum_names.h"
#include "moetrain/error.h"

namespace moetrain::io {

namespace {
constexpr EnumName<HfFamily> kArchitectures[] = {{HfFamily::gpt2, "GPT2LMHeadModel"},
                                                 {HfFamily::llama, "LlamaForCausalLM"},
                                                 {HfFamily::mixtral, "MixtralForCausalLM"},
                                                 {HfFamily::qwen2_moe, "Qwen2MoeForCausalLM"}};
constexpr EnumName<HfFamily> kModelTypes[] = {{HfFamily::gpt2, "gpt2"},
                                              {HfFamily::llama, "llama"},
                                              {HfFamily::mixtral, "mixtral"},
                                              {HfFamily::qwen2_moe, "qwen2_moe"}};
}  // namespace

const char* hf_architecture(HfFamily f) {
    return enum_name(kArchitectures, f);
}

const char* hf_model_type(HfFamily f) {
    return enum_name(kModelTypes, f);
}

namespace {
[[noreturn]] void refuse(const std::string& what) {
    fail("export --format hf: ", what, "; no transformers architecture computes this exactly");
}
}  // namespace

HfFamily hf_family_for_export(const ModelConfig& c) {
    if (c.head_dim * c.n_heads != c.d_model)
        refuse("head_dim " + std::to_string(c.head_dim) +
               " != d_model / n_heads (transformers "
               "derives head_dim from hidden_size)");
    if (c.pos == PosKind::learned) {  // the GPT-2 family
        if (c.moe) refuse("an MoE model with learned positions (pos = learned)");
        if (c.norm != NormKind::layernorm) refuse("pos = learned with norm = rmsnorm");
        if (c.ffn == FfnKind::swiglu) refuse("pos = learned with ffn = swiglu");
        if (!c.bias) refuse("pos = learned with bias = false (GPT-2 always has biases)");
        if (c.n_kv_heads != c.n_heads)
            refuse("pos = learned with n_kv_heads " + std::to_string(c.n_kv_heads) +
                   " != n_heads (GPT-2 is multi-head only)");
        return HfFamily::gpt2;
    }
    // RoPE: the Llama family.
    const double theta = c.rope_theta_eff();
    if (!(std::isfinite(theta) && theta > 0))
        refuse("rope_theta * rope_ntk_alpha^(h/(h-2)) is not a finite positive number");
    if (c.norm != NormKind::rmsnorm) refuse("pos = rope with norm = layernorm");
    if (c.ffn != FfnKind::swiglu)
        refuse("pos = rope with ffn = " + to_string(c.ffn) + " (Llama-family MLPs are gated)");
    if (c.bias) refuse("pos = rope with bias = true (Llama-family MLPs have no biases)");
    if (!c.moe) return HfFamily::llama;
    const MoeConfig& m = *c.moe;
    if (m.router != RouterKind::softmax_topk)
        refuse("moe.router = " + to_string(m.router) + " (only softmax top-k routing)");
    // MODEL.md 2's expert bias and routed scaling change which experts a token reaches and
    // with what weight; transformers' Mixtral and Qwen2-MoE have neither. (The capacity is
    // training-only: inference is dropless, so it is dropped with a note.)
    if (m.bias_update_rate > 0)
        refuse("moe.bias_update_rate = " + json(m.bias_update_rate).dump() +
               " (an expert bias in the selection; Mixtral and Qwen2-MoE have none)");
    if (m.routed_scaling != 1.0)
        refuse("moe.routed_scaling = " + json(m.routed_scaling).dump() +
               " (Mixtral and Qwen2-MoE do not scale the routed weights)");
    if (m.first_layer > 0)
        refuse("moe.first_layer = " + std::to_string(m.first_layer) +
               " (dense layers before the MoE layers)");
    if (m.n_shared_experts == 0 && m.norm_topk_prob) return HfFamily::mixtral;
    if (m.n_shared_experts == 0)
        refuse(
            "moe.norm_topk_prob = false without shared experts (Mixtral always renormalises "
            "and Qwen2-MoE always has a shared expert)");
    return HfFamily::qwen2_moe;
}

void hf_check_round_trip(HfFamily f, const ModelConfig& c) {
    // What the exported config.json means to moetrain must be `c` itself, up to the NTK alpha
    // (folded into rope_theta; both unused with learned positions) and the training-only
    // z-loss weight and capacity factor (notes). Any other key
    // that does not survive - one this mapping does not know, say - is refused by name.
    ModelConfig want = c;
    if (c.pos == PosKind::rope) {
        want.rope_theta = c.rope_theta_eff();
    } else {  // unused with learned positions: they come back as the defaults
        want.rope_theta = ModelConfig{}.rope_theta;
    }
    want.rope_ntk_alpha = 1.0;
    if (want.moe) {  // training-only settings, noted by hf_export_notes
        want.moe->z_loss_alpha = 0.0;
        want.moe->capacity_factor = 0.0;
    }
    const ModelConfig back = hf_config_from_json(hf_config_json(f, c), "config.json").config;
    const json a = json::parse(config_to_json(want)), b = json::parse(config_to_json(back));
    for (const auto& [key, value] : a.items()) {
        const json& other = b.contains(key) ? b.at(key) : json();
        if (key == "moe" && value.is_object() && other.is_object()) {
            for (const auto& [k, v] : value.items())
                if (!other.contains(k) || other.at(k) != v)
                    refuse("moe." + k + " = " + v.dump() + " (" + hf_architecture(f) + " gives " +
                           (other.contains(k) ? other.at(k).dump() : "nothing") + ")");
        } else if (value != other) {
            refuse(key + " = " + value.dump() + " (" + hf_architecture(f) + " gives " +
                   other.dump() + ")");
        }
    }
}

std::vector<std::string> hf_export_notes(HfFamily f, const ModelConfig& c) {
    std::vector<std::string> notes;
    if (!c.moe) return notes;
    notes.push_back(
        std::string("router_aux_loss_coef = moe.aux_loss_alpha; ") + hf_architecture(f) +
        " computes its load-balancing loss over all layers at once and without MODEL.md's 1/k, "
        "so fine-tuning with output_router_logits=True weighs it differently");
    if (c.moe->z_loss_alpha > 0)
        notes.push_back("moe.z_loss_alpha has no transformers counterpart (training only)");
    if (c.moe->capacity_factor > 0)
        notes.push_back(
            "moe.capacity_factor has no transformers counterpart (training only; inference is "
            "dropless)");
    return notes;
}

}  // namespace moetrain::io

// Tensor-by-tensor layout of each transformers family against MODEL.md section 6 names.
// GPT-2 fuses q, k, v into one Conv1D (c_attn, [in, out] = [D, 3D]); Mixtral and Qwen2-MoE
// store each expert as separate linears; MODEL.md stacks experts as [E, F, D] / [E, D, F].
#include <functional>
#include <string>

#include "io/hf_mapping.h"
#include "moetrain/error.h"

namespace moetrain::io {

int64_t HfTensor::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

namespace {

struct Builder {
    const ModelConfig& c;
    const std::function<void(HfTensor)>& out;

    // A transformers tensor that is exactly one whole moetrain tensor.
    void whole(const std::string& hf, const std::string& mt, std::vector<int64_t> shape,
               float scale = 1.0f) {
        HfTensor t{hf, std::move(shape), {}, false, scale, ""};
        t.parts.push_back(HfPart{mt, 0, t.numel()});
        out(std::move(t));
    }
    // Expert e of a stacked [E, rows, cols] moetrain tensor as a [rows, cols] linear.
    void expert(const std::string& hf, const std::string& mt, int e, int64_t rows, int64_t cols,
                float scale = 1.0f) {
        HfTensor t{hf, {rows, cols}, {}, false, scale, ""};
        t.parts.push_back(HfPart{mt, e * rows * cols, rows * cols});
        out(std::move(t));
    }
    void zeros(const std::string& hf, std::vector<int64_t> shape, const std::string& why) {
        out(HfTensor{hf, std::move(shape), {}, false, 1.0f, why});
    }

    void gpt2() {
        const int64_t D = c.d_model, F = c.d_ff, V = c.vocab_size;
        whole("transformer.wte.weight", "tok_emb.weight", {V, D});
        whole("transformer.wpe.weight", "pos_emb.weight", {c.max_seq_len, D});
        for (int l = 0; l < c.n_layers; ++l) {
            const std::string h = "transformer.h." + std::to_string(l) + ".";
            const std::string m = "layers." + std::to_string(l) + ".";
            for (const char* ln : {"ln_1", "ln_2"}) {
                const std::string mn = m + (ln[3] == '1' ? "attn_norm" : "ffn_norm");
                whole(h + ln + ".weight", mn + ".weight", {D});
                whole(h + ln + ".bias", mn + ".bias", {D});
            }
            HfTensor qkv{h + "attn.c_attn.weight", {D, 3 * D}, {}, true, 1.0f, ""};
            HfTensor qkv_b{h + "attn.c_attn.bias", {3 * D}, {}, false, 1.0f, ""};
            for (const char* w : {"wq", "wk", "wv"}) {
                qkv.parts.push_back(HfPart{m + "attn." + w + ".weight", 0, D * D});
                qkv_b.parts.push_back(HfPart{m + "attn." + w + ".bias", 0, D});
            }
            out(std::move(qkv));
            out(std::move(qkv_b));
            auto conv1d = [&](const std::string& hf, const std::string& mt, int64_t in,
                              int64_t outd) {
                HfTensor t{hf + ".weight", {in, outd}, {}, true, 1.0f, ""};
                t.parts.push_back(HfPart{mt + ".weight", 0, in * outd});
                out(std::move(t));
                whole(hf + ".bias", mt + ".bias", {outd});
            };
            conv1d(h + "attn.c_proj", m + "attn.wo", D, D);
            conv1d(h + "mlp.c_fc", m + "ffn.w_up", D, F);
            conv1d(h + "mlp.c_proj", m + "ffn.w_down", F, D);
        }
        whole("transformer.ln_f.weight", "norm_f.weight", {D});
        whole("transformer.ln_f.bias", "norm_f.bias", {D});
        if (!c.tie_embeddings) whole("lm_head.weight", "lm_head.weight", {V, D});
    }

    void swiglu(const std::string& hf, const std::string& mt, int64_t F, float down_scale) {
        const int64_t D = c.d_model;
        whole(hf + "gate_proj.weight", mt + "w_gate.weight", {F, D});
        whole(hf + "up_proj.weight", mt + "w_up.weight", {F, D});
        whole(hf + "down_proj.weight", mt + "w_down.weight", {D, F}, down_scale);
    }

    void llama_family(HfFamily f) {
        const int64_t D = c.d_model, F = c.d_ff, V = c.vocab_size;
        const int64_t q = int64_t{c.n_heads} * c.head_dim, kv = int64_t{c.n_kv_heads} * c.head_dim;
        whole("model.embed_tokens.weight", "tok_emb.weight", {V, D});
        for (int l = 0; l < c.n_layers; ++l) {
            const std::string h = "model.layers." + std::to_string(l) + ".";
            const std::string m = "layers." + std::to_string(l) + ".";
            whole(h + "input_layernorm.weight", m + "attn_norm.weight", {D});
            whole(h + "post_attention_layernorm.weight", m + "ffn_norm.weight", {D});
            whole(h + "self_attn.q_proj.weight", m + "attn.wq.weight", {q, D});
            whole(h + "self_attn.k_proj.weight", m + "attn.wk.weight", {kv, D});
            whole(h + "self_attn.v_proj.weight", m + "attn.wv.weight", {kv, D});
            whole(h + "self_attn.o_proj.weight", m + "attn.wo.weight", {D, q});
            if (f == HfFamily::qwen2_moe) {
                const char* why =
                    "attention biases (MODEL.md's bias = true also biases o_proj "
                    "and the FFNs)";
                zeros(h + "self_attn.q_proj.bias", {q}, why);
                zeros(h + "self_attn.k_proj.bias", {kv}, why);
                zeros(h + "self_attn.v_proj.bias", {kv}, why);
            }
            if (f == HfFamily::llama) {
                swiglu(h + "mlp.", m + "ffn.", F, 1.0f);
                continue;
            }
            const MoeConfig& moe = *c.moe;
            const std::string mx = f == HfFamily::mixtral ? h + "block_sparse_moe." : h + "mlp.";
            whole(mx + "gate.weight", m + "moe.router.weight", {moe.n_experts, D});
            for (int e = 0; e < moe.n_experts; ++e) {
                const std::string ex = mx + "experts." + std::to_string(e) + ".";
                const bool mix = f == HfFamily::mixtral;
                expert(ex + (mix ? "w1" : "gate_proj") + ".weight", m + "moe.experts.w_gate", e, F,
                       D);
                expert(ex + (mix ? "w3" : "up_proj") + ".weight", m + "moe.experts.w_up", e, F, D);
                expert(ex + (mix ? "w2" : "down_proj") + ".weight", m + "moe.experts.w_down", e, D,
                       F);
            }
            if (f == HfFamily::qwen2_moe) {
                // sigmoid(0) = 0.5 exactly: a zero gate and a doubled w_down give MODEL.md's
                // ungated shared expert.
                swiglu(mx + "shared_expert.", m + "moe.shared.", int64_t{moe.n_shared_experts} * F,
                       2.0f);
                zeros(mx + "shared_expert_gate.weight", {1, D},
                      "a shared-expert gate (MODEL.md's shared expert is ungated)");
            }
        }
        whole("model.norm.weight", "norm_f.weight", {D});
        if (!c.tie_embeddings) whole("lm_head.weight", "lm_head.weight", {V, D});
    }
};

}  // namespace

void for_each_hf_tensor(HfFamily f, const ModelConfig& c,
                        const std::function<void(HfTensor)>& visit) {
    Builder b{c, visit};
    if (f == HfFamily::gpt2)
        b.gpt2();
    else
        b.llama_family(f);
}

std::vector<HfTensor> hf_tensor_map(HfFamily f, const ModelConfig& c) {
    std::vector<HfTensor> out;
    for_each_hf_tensor(f, c, [&](HfTensor t) { out.push_back(std::move(t)); });
    return out;
}

bool hf_ignored_tensor(const std::string& name) {
    auto ends = [&](const std::string& s) {
        return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    return ends(".attn.bias") || ends(".attn.masked_bias") || ends(".rotary_emb.inv_freq");
}

}  // namespace moetrain::io

// Parameter names and shapes of MODEL.md section 6, their place in the flat buffer, and the
// binding of a flat buffer to the typed views of param_layout.h.
#include "model/param_layout.h"

#include <algorithm>
#include <map>

namespace moetrain {
namespace {

// Collects (name, shape) in MODEL.md order.
struct Lister {
    std::vector<ParamInfo> list;
    void add(const std::string& name, Shape s) {
        ParamInfo p;
        p.name = name;
        p.shape = s;
        p.decay = s.rank >= 2;
        list.push_back(p);
    }
    void norm(const std::string& prefix, const ModelConfig& c) {
        add(prefix + ".weight", {c.d_model});
        if (c.norm == NormKind::layernorm && c.bias) add(prefix + ".bias", {c.d_model});
    }
    void linear(const std::string& prefix, int64_t out, int64_t in, bool bias) {
        add(prefix + ".weight", {out, in});
        if (bias) add(prefix + ".bias", {out});
    }
    void dense_ffn(const std::string& prefix, const ModelConfig& c, int64_t F, bool bias) {
        if (c.ffn == FfnKind::swiglu) linear(prefix + ".w_gate", F, c.d_model, bias);
        linear(prefix + ".w_up", F, c.d_model, bias);
        linear(prefix + ".w_down", c.d_model, F, bias);
    }
};

}  // namespace

std::vector<ParamInfo> build_param_layout(const ModelConfig& c, const ExpertShard& shard) {
    const int64_t D = c.d_model, V = c.vocab_size, h = c.head_dim;
    const int64_t qdim = int64_t{c.n_heads} * h, kvdim = int64_t{c.n_kv_heads} * h;
    MT_CHECK(D > 0 && V > 0 && h > 0 && c.n_heads > 0 && c.n_kv_heads > 0 && c.n_layers >= 0,
             "model config has non-positive sizes (d_model ", D, ", vocab_size ", V, ", head_dim ",
             h, ")");
    Lister ls;
    ls.add("tok_emb.weight", {V, D});
    if (c.pos == PosKind::learned) ls.add("pos_emb.weight", {c.max_seq_len, D});
    for (int l = 0; l < c.n_layers; ++l) {
        const std::string p = "layers." + std::to_string(l);
        ls.norm(p + ".attn_norm", c);
        ls.linear(p + ".attn.wq", qdim, D, c.bias);
        ls.linear(p + ".attn.wk", kvdim, D, c.bias);
        ls.linear(p + ".attn.wv", kvdim, D, c.bias);
        ls.linear(p + ".attn.wo", D, qdim, c.bias);
        ls.norm(p + ".ffn_norm", c);
        if (!c.is_moe_layer(l)) {
            ls.dense_ffn(p + ".ffn", c, c.d_ff, c.bias);
            continue;
        }
        const MoeConfig& m = *c.moe;
        const int64_t E = m.n_experts, F = c.d_ff, El = E / shard.parts;
        MT_CHECK(shard.parts >= 1 && E % shard.parts == 0 && shard.index >= 0 &&
                     shard.index < shard.parts,
                 "expert block ", shard.index, " of ", shard.parts, " does not split ", E,
                 " experts");
        if (m.topk_router()) ls.add(p + ".moe.router.weight", {E, D});
        if (c.ffn == FfnKind::swiglu) ls.add(p + ".moe.experts.w_gate", {El, F, D});
        ls.add(p + ".moe.experts.w_up", {El, F, D});
        ls.add(p + ".moe.experts.w_down", {El, D, F});
        if (m.n_shared_experts > 0)
            ls.dense_ffn(p + ".moe.shared", c, int64_t{m.n_shared_experts} * F, false);
    }
    ls.norm("norm_f", c);
    if (!c.tie_embeddings) ls.add("lm_head.weight", {V, D});

    std::stable_partition(ls.list.begin(), ls.list.end(),
                          [](const ParamInfo& p) { return p.decay; });
    int64_t off = 0;
    for (auto& p : ls.list) {
        p.offset = off;
        off += p.numel();
    }
    return ls.list;
}

int64_t decayed_numel(const std::vector<ParamInfo>& layout) {
    int64_t n = 0;
    for (const auto& p : layout)
        if (p.decay) n = std::max(n, p.offset + p.numel());
    return n;
}

int64_t layout_numel(const std::vector<ParamInfo>& layout) {
    int64_t n = 0;
    for (const ParamInfo& p : layout) n += p.numel();
    return n;
}

ModelW bind_params(const ModelConfig& c, const std::vector<ParamInfo>& layout, const Tensor& flat) {
    std::map<std::string, const ParamInfo*> by_name;
    for (const auto& p : layout) by_name[p.name] = &p;
    auto get = [&](const std::string& name) -> Tensor {
        auto it = by_name.find(name);
        if (it == by_name.end()) return {};
        return flat.view(it->second->offset, it->second->shape);
    };
    auto linear = [&](const std::string& prefix, int64_t out, int64_t in) {
        return LinearW{get(prefix + ".weight"), get(prefix + ".bias"), out, in};
    };
    auto norm = [&](const std::string& prefix) {
        return NormW{get(prefix + ".weight"), get(prefix + ".bias")};
    };
    auto dense = [&](const std::string& prefix, int64_t F) {
        FfnW f;
        f.w_gate = get(prefix + ".w_gate.weight");
        f.w_up = get(prefix + ".w_up.weight");
        f.w_down = get(prefix + ".w_down.weight");
        f.b_gate = get(prefix + ".w_gate.bias");
        f.b_up = get(prefix + ".w_up.bias");
        f.b_down = get(prefix + ".w_down.bias");
        f.G = 1;
        f.F = F;
        f.D = c.d_model;
        return f;
    };

    const int64_t D = c.d_model, h = c.head_dim;
    const int64_t qdim = int64_t{c.n_heads} * h, kvdim = int64_t{c.n_kv_heads} * h;
    ModelW w;
    w.tok_emb = get("tok_emb.weight");
    w.pos_emb = get("pos_emb.weight");
    for (int l = 0; l < c.n_layers; ++l) {
        const std::string p = "layers." + std::to_string(l);
        LayerW lw;
        lw.attn_norm = norm(p + ".attn_norm");
        lw.ffn_norm = norm(p + ".ffn_norm");
        lw.attn = AttnW{linear(p + ".attn.wq", qdim, D), linear(p + ".attn.wk", kvdim, D),
                        linear(p + ".attn.wv", kvdim, D), linear(p + ".attn.wo", D, qdim)};
        lw.moe = c.is_moe_layer(l);
        if (!lw.moe) {
            lw.ffn = dense(p + ".ffn", c.d_ff);
        } else {
            const MoeConfig& m = *c.moe;
            lw.router = get(p + ".moe.router.weight");
            lw.experts.w_gate = get(p + ".moe.experts.w_gate");
            lw.experts.w_up = get(p + ".moe.experts.w_up");
            lw.experts.w_down = get(p + ".moe.experts.w_down");
            lw.experts.G = lw.experts.w_up.shape[0];  // E, or this rank's E / P
            lw.experts.F = c.d_ff;
            lw.experts.D = D;
            if (m.n_shared_experts > 0)
                lw.shared = dense(p + ".moe.shared", int64_t{m.n_shared_experts} * c.d_ff);
        }
        w.layers.push_back(lw);
    }
    w.norm_f = norm("norm_f");
    w.lm_head = c.tie_embeddings ? w.tok_emb : get("lm_head.weight");
    return w;
}

ModelW with_compute_matrices(const ModelW& w, const Tensor& lo) {
    auto swap = [&](Tensor& t) {
        if (!t) return;
        MT_CHECK(t.offset + t.numel() <= lo.numel(), "compute copy of ", t.numel(), " elements at ",
                 t.offset, " exceeds the 16-bit buffer of ", lo.numel());
        Tensor r = lo;
        r.offset = lo.offset + t.offset;
        r.shape = t.shape;
        t = r;
    };
    auto swap_ffn = [&](FfnW& f) {
        swap(f.w_gate);
        swap(f.w_up);
        swap(f.w_down);
    };
    ModelW out = w;
    for (LayerW& l : out.layers) {
        swap(l.attn.wq.w);
        swap(l.attn.wk.w);
        swap(l.attn.wv.w);
        swap(l.attn.wo.w);
        swap_ffn(l.ffn);
        swap_ffn(l.experts);
        swap_ffn(l.shared);
    }
    swap(out.lm_head);
    return out;
}

}  // namespace moetrain

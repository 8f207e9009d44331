// A parsed or preset ModelConfig checked by group of fields: each group is a tuple compared as
// one value, and doctest prints every field of both sides when a CHECK fails. Shared by the
// parse and preset tests.
#pragma once

#include <doctest/doctest.h>

#include <sstream>
#include <tuple>
#include <type_traits>

#include "moetrain/config.h"

namespace moetrain::testing {

// vocab_size, d_model, n_layers, n_heads, n_kv_heads, head_dim, max_seq_len, d_ff.
using ConfigSizes = std::tuple<int, int, int, int, int, int, int, int>;
inline ConfigSizes sizes_of(const ModelConfig& c) {
    return {c.vocab_size, c.d_model,  c.n_layers,    c.n_heads,
            c.n_kv_heads, c.head_dim, c.max_seq_len, c.d_ff};
}

// The kinds of block: norm, positions, FFN, biases, tied embeddings.
using ConfigKinds = std::tuple<NormKind, PosKind, FfnKind, bool, bool>;
inline ConfigKinds kinds_of(const ModelConfig& c) {
    return {c.norm, c.pos, c.ffn, c.bias, c.tie_embeddings};
}

// norm_eps, rope_theta, rope_ntk_alpha.
using ConfigNumbers = std::tuple<double, double, double>;
inline ConfigNumbers numbers_of(const ModelConfig& c) {
    return {c.norm_eps, c.rope_theta, c.rope_ntk_alpha};
}

// The MoE keys other than the v2 routing options (those have tests of their own): n_experts,
// top_k, router, norm_topk_prob, n_shared_experts, aux_loss_alpha, z_loss_alpha, first_layer.
using MoeBasics = std::tuple<int, int, RouterKind, bool, int, double, double, int>;
inline MoeBasics moe_basics_of(const MoeConfig& m) {
    return {m.n_experts,        m.top_k,          m.router,       m.norm_topk_prob,
            m.n_shared_experts, m.aux_loss_alpha, m.z_loss_alpha, m.first_layer};
}

}  // namespace moetrain::testing

// Prints a field group as {a, b, ...}, enums by name.
template <typename... T>
struct doctest::StringMaker<std::tuple<T...>> {
    static doctest::String convert(const std::tuple<T...>& t) {
        std::ostringstream os;
        const char* sep = "{";
        auto field = [&](const auto& v) {
            os << sep;
            sep = ", ";
            if constexpr (std::is_enum_v<std::decay_t<decltype(v)>>)
                os << moetrain::to_string(v);
            else
                os << v;
        };
        std::apply([&](const auto&... v) { (field(v), ...); }, t);
        os << "}";
        return os.str().c_str();
    }
};

// A parsed or preset ModelConfig checked by group of fields: each group compares as one value
// and prints every field of both sides when a CHECK fails. Shared by the parse and preset tests.
#pragma once

#include <ostream>

#include "moetrain/config.h"

namespace moetrain::testing {

struct ConfigSizes {
    int vocab_size, d_model, n_layers, n_heads, n_kv_heads, head_dim, max_seq_len, d_ff;
    bool operator==(const ConfigSizes&) const = default;
};

inline ConfigSizes sizes_of(const ModelConfig& c) {
    return {c.vocab_size, c.d_model,  c.n_layers,    c.n_heads,
            c.n_kv_heads, c.head_dim, c.max_seq_len, c.d_ff};
}

inline std::ostream& operator<<(std::ostream& os, const ConfigSizes& s) {
    return os << "{vocab_size " << s.vocab_size << ", d_model " << s.d_model << ", n_layers "
              << s.n_layers << ", n_heads " << s.n_heads << ", n_kv_heads " << s.n_kv_heads
              << ", head_dim " << s.head_dim << ", max_seq_len " << s.max_seq_len << ", d_ff "
              << s.d_ff << "}";
}

// The kinds of block: norm, positions, FFN, biases and tied embeddings.
struct ConfigKinds {
    NormKind norm;
    PosKind pos;
    FfnKind ffn;
    bool bias, tie_embeddings;
    bool operator==(const ConfigKinds&) const = default;
};

inline ConfigKinds kinds_of(const ModelConfig& c) {
    return {c.norm, c.pos, c.ffn, c.bias, c.tie_embeddings};
}

inline std::ostream& operator<<(std::ostream& os, const ConfigKinds& k) {
    return os << "{" << to_string(k.norm) << ", " << to_string(k.pos) << ", " << to_string(k.ffn)
              << ", bias " << k.bias << ", tie_embeddings " << k.tie_embeddings << "}";
}

}  // namespace moetrain::testing

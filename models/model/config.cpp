// ModelConfig JSON (MODEL.md section 1): parsing with defaults and strict key/type checks,
// validation of value consistency, and the canonical JSON form stored in checkpoints.
// Every error is one line that names the offending key, prefixed "config: ".
#include "moetrain/config.h"

#include <climits>
#include <cmath>
#include <fstream>
#include <sstream>

#include "io/file.h"
#include "io/json.h"
#include "moetrain/error.h"

namespace moetrain {

// The RoPE base with NTK scaling (MODEL.md 2).
double ModelConfig::rope_theta_eff() const {
    if (rope_ntk_alpha == 1.0) return rope_theta;
    const double h = head_dim;
    MT_CHECK(head_dim > 2, "rope_ntk_alpha != 1 needs head_dim > 2 (got head_dim ", head_dim, ")");
    return rope_theta * std::pow(rope_ntk_alpha, h / (h - 2.0));
}

namespace {

using io::json;

const std::vector<std::string> kNorms = {"rmsnorm", "layernorm"};
const std::vector<std::string> kPos = {"rope", "learned"};
const std::vector<std::string> kFfns = {"swiglu", "gelu", "relu"};
const std::vector<std::string> kRouters = {"softmax_topk", "hash", "sigmoid_topk"};

// Every key of the config JSON once, in the canonical order: `v(key, member, required)`.
// Parsing, the known-key lists and the canonical JSON are all driven by these two lists
// (MODEL.md 1); an optional key's default is the member's value in a default-made struct.
template <typename Moe, typename Visitor>
void each_moe_field(Moe& m, Visitor&& v) {
    v("n_experts", m.n_experts, true);
    v("top_k", m.top_k, false);
    v("router", m.router, false);
    v("norm_topk_prob", m.norm_topk_prob, false);
    v("n_shared_experts", m.n_shared_experts, false);
    v("aux_loss_alpha", m.aux_loss_alpha, false);
    v("z_loss_alpha", m.z_loss_alpha, false);
    v("first_layer", m.first_layer, false);
    v("routed_scaling", m.routed_scaling, false);
    v("bias_update_rate", m.bias_update_rate, false);
    v("capacity_factor", m.capacity_factor, false);
}

// The scalar keys of the top level; "moe" follows them.
template <typename Config, typename Visitor>
void each_model_field(Config& c, Visitor&& v) {
    v("vocab_size", c.vocab_size, true);
    v("d_model", c.d_model, true);
    v("n_layers", c.n_layers, true);
    v("n_heads", c.n_heads, true);
    v("n_kv_heads", c.n_kv_heads, false);
    v("head_dim", c.head_dim, false);
    v("max_seq_len", c.max_seq_len, true);
    v("norm", c.norm, false);
    v("norm_eps", c.norm_eps, false);
    v("pos", c.pos, false);
    v("rope_theta", c.rope_theta, false);
    v("rope_ntk_alpha", c.rope_ntk_alpha, false);
    v("ffn", c.ffn, false);
    v("d_ff", c.d_ff, true);
    v("bias", c.bias, false);
    v("tie_embeddings", c.tie_embeddings, false);
}

const std::vector<std::string>& names_of(NormKind) {
    return kNorms;
}
const std::vector<std::string>& names_of(PosKind) {
    return kPos;
}
const std::vector<std::string>& names_of(FfnKind) {
    return kFfns;
}
const std::vector<std::string>& names_of(RouterKind) {
    return kRouters;
}

// Collects the visited keys, in order.
struct KeyLister {
    std::vector<std::string>& keys;
    template <typename T>
    void operator()(const char* key, const T&, bool) const {
        keys.emplace_back(key);
    }
};

// Reads each visited key from `f` into its member: ints range-checked, doubles finite,
// enums one of their names; a missing optional key keeps the member's value.
struct FieldReader {
    const io::JsonFields& f;
    void operator()(const char* key, int& v, bool required) const {
        v = static_cast<int>(required ? f.integer(key, INT_MIN, INT_MAX)
                                      : f.integer(key, v, INT_MIN, INT_MAX));
    }
    void operator()(const char* key, double& v, bool required) const {
        v = required ? f.number(key) : f.number(key, v);
    }
    void operator()(const char* key, bool& v, bool required) const {
        v = required ? f.boolean(key) : f.boolean(key, v);
    }
    template <typename Enum>
    void operator()(const char* key, Enum& v, bool required) const {
        const std::vector<std::string>& names = names_of(v);
        v = static_cast<Enum>(required ? f.choice(key, names)
                                       : f.choice(key, names, static_cast<size_t>(v)));
    }
};

// Writes each visited member under its key; enums as their names.
struct FieldWriter {
    io::ordered_json& j;
    template <typename T>
    void operator()(const char* key, const T& v, bool) const {
        if constexpr (std::is_enum_v<T>)
            j[key] = to_string(v);
        else
            j[key] = v;
    }
};

std::vector<std::string> moe_keys() {
    std::vector<std::string> keys;
    const MoeConfig m;
    each_moe_field(m, KeyLister{keys});
    return keys;
}
std::vector<std::string> top_keys() {
    std::vector<std::string> keys;
    const ModelConfig c;
    each_model_field(c, KeyLister{keys});
    keys.emplace_back("moe");
    return keys;
}
const std::vector<std::string> kMoeKeys = moe_keys();
const std::vector<std::string> kTopKeys = top_keys();

// Largest parameter count accepted: keeps every tensor size and offset far from int64
// overflow (and no machine holds 2^50 floats anyway).
constexpr double kMaxParams = 1125899906842624.0;  // 2^50
constexpr int64_t kMaxLayers = 1024, kMaxHeads = 4096, kMaxExperts = 4096;
constexpr int64_t kMaxSeqLen = int64_t{1} << 20;

MoeConfig parse_moe(const json& j) {
    io::JsonFields f(j, "config", "moe.", kMoeKeys);
    MoeConfig m;
    each_moe_field(m, FieldReader{f});
    return m;
}

template <typename T>
void check_positive(const char* key, T value) {
    MT_CHECK(value > 0, "config: \"", key, "\" = ", value, " must be positive");
}

void check_non_negative(const char* key, double value) {
    MT_CHECK(value >= 0, "config: \"", key, "\" = ", value, " must be >= 0");
}

// The v2 routing options (MODEL.md 1-2): finite, in range, and only on the top-k routers.
void validate_routing_options(const MoeConfig& m) {
    MT_CHECK(std::isfinite(m.routed_scaling) && m.routed_scaling > 0,
             "config: \"moe.routed_scaling\" = ", m.routed_scaling, " must be positive");
    MT_CHECK(std::isfinite(m.bias_update_rate), "config: \"moe.bias_update_rate\" must be finite");
    check_non_negative("moe.bias_update_rate", m.bias_update_rate);
    MT_CHECK(std::isfinite(m.capacity_factor), "config: \"moe.capacity_factor\" must be finite");
    check_non_negative("moe.capacity_factor", m.capacity_factor);
    if (!m.topk_router()) {
        MT_CHECK(m.routed_scaling == 1.0, "config: \"moe.routed_scaling\" = ", m.routed_scaling,
                 " needs a top-k router (\"moe.router\" is \"hash\")");
        MT_CHECK(m.bias_update_rate == 0, "config: \"moe.bias_update_rate\" = ", m.bias_update_rate,
                 " needs a top-k router (\"moe.router\" is \"hash\")");
        MT_CHECK(m.capacity_factor == 0, "config: \"moe.capacity_factor\" = ", m.capacity_factor,
                 " needs a top-k router (\"moe.router\" is \"hash\")");
    }
    // c * k < 1 gives a capacity below the average first-choice load: first choices would be
    // dropped by design, so it is refused rather than warned about.
    MT_CHECK(
        m.capacity_factor == 0 || m.capacity_factor * m.top_k >= 1.0,
        "config: \"moe.capacity_factor\" = ", m.capacity_factor, " times \"moe.top_k\" = ", m.top_k,
        " is below 1 (capacity under the average load of first choices; use >= ", 1.0 / m.top_k,
        " or 0 for dropless)");
}

// Parameter count of the MODEL.md 6 tensor list, in double (overflow guard only).
double approx_param_count(const ModelConfig& c) {
    double D = c.d_model, F = c.d_ff, h = c.head_dim, L = c.n_layers;
    double mats = c.ffn == FfnKind::swiglu ? 3 : 2;
    double n = static_cast<double>(c.vocab_size) * D * (c.tie_embeddings ? 1 : 2);
    if (c.pos == PosKind::learned) n += c.max_seq_len * D;
    double attn = 2 * D * c.n_heads * h + 2 * D * c.n_kv_heads * h;
    double ffn = mats * F * D;
    if (c.moe)
        ffn += (c.moe->n_experts + c.moe->n_shared_experts) * mats * F * D + c.moe->n_experts * D;
    return n + L * (attn + ffn + 4 * D);
}

}  // namespace

std::string to_string(NormKind k) {
    return kNorms.at(static_cast<size_t>(k));
}
std::string to_string(PosKind k) {
    return kPos.at(static_cast<size_t>(k));
}
std::string to_string(FfnKind k) {
    return kFfns.at(static_cast<size_t>(k));
}
std::string to_string(RouterKind k) {
    return kRouters.at(static_cast<size_t>(k));
}

void validate_config(const ModelConfig& c) {
    check_positive("vocab_size", c.vocab_size);
    check_positive("d_model", c.d_model);
    check_positive("n_layers", c.n_layers);
    check_positive("n_heads", c.n_heads);
    check_positive("n_kv_heads", c.n_kv_heads);
    MT_CHECK(c.n_heads % c.n_kv_heads == 0, "config: \"n_heads\" = ", c.n_heads,
             " is not a multiple of \"n_kv_heads\" = ", c.n_kv_heads);
    MT_CHECK(c.head_dim > 0, "config: \"head_dim\" = ", c.head_dim,
             " must be positive (parse_config resolves 0 to d_model / n_heads)");
    check_positive("max_seq_len", c.max_seq_len);
    check_positive("d_ff", c.d_ff);
    MT_CHECK(std::isfinite(c.norm_eps) && c.norm_eps > 0, "config: \"norm_eps\" = ", c.norm_eps,
             " must be positive");
    MT_CHECK(std::isfinite(c.rope_theta) && c.rope_theta > 0,
             "config: \"rope_theta\" = ", c.rope_theta, " must be positive");
    MT_CHECK(std::isfinite(c.rope_ntk_alpha) && c.rope_ntk_alpha > 0,
             "config: \"rope_ntk_alpha\" = ", c.rope_ntk_alpha, " must be positive");
    if (c.pos == PosKind::rope) {
        MT_CHECK(c.head_dim % 2 == 0, "config: \"head_dim\" = ", c.head_dim,
                 " must be even with \"pos\" = \"rope\"");
        MT_CHECK(c.head_dim > 2 || c.rope_ntk_alpha == 1.0,
                 "config: \"rope_ntk_alpha\" = ", c.rope_ntk_alpha,
                 " needs \"head_dim\" > 2 (theta scale alpha^(h/(h-2)))");
    }
    if (c.moe) {
        const MoeConfig& m = *c.moe;
        check_positive("moe.n_experts", m.n_experts);
        if (m.topk_router()) check_positive("moe.top_k", m.top_k);
        MT_CHECK(m.router == RouterKind::hash || m.top_k <= m.n_experts,
                 "config: \"moe.top_k\" = ", m.top_k, " exceeds \"moe.n_experts\" = ", m.n_experts);
        MT_CHECK(m.n_shared_experts >= 0, "config: \"moe.n_shared_experts\" = ", m.n_shared_experts,
                 " must be >= 0");
        MT_CHECK(std::isfinite(m.aux_loss_alpha), "config: \"moe.aux_loss_alpha\" must be finite");
        MT_CHECK(std::isfinite(m.z_loss_alpha), "config: \"moe.z_loss_alpha\" must be finite");
        check_non_negative("moe.aux_loss_alpha", m.aux_loss_alpha);
        check_non_negative("moe.z_loss_alpha", m.z_loss_alpha);
        MT_CHECK(m.first_layer >= 0 && m.first_layer <= c.n_layers,
                 "config: \"moe.first_layer\" = ", m.first_layer,
                 " is outside [0, \"n_layers\" = ", c.n_layers, "]");
        validate_routing_options(m);
    }
    // Counts that size host-side structures (one entry per layer, expert or position) are
    // bounded too: a crafted config must fail here, not hang or allocate gigabytes while
    // the model is laid out.
    auto at_most = [](const char* key, int64_t v, int64_t limit) {
        MT_CHECK(v <= limit, "config: \"", key, "\" = ", v, " exceeds the limit of ", limit);
    };
    at_most("n_layers", c.n_layers, kMaxLayers);
    at_most("n_heads", c.n_heads, kMaxHeads);
    at_most("max_seq_len", c.max_seq_len, kMaxSeqLen);
    if (c.moe) {
        at_most("moe.n_experts", c.moe->n_experts, kMaxExperts);
        at_most("moe.n_shared_experts", c.moe->n_shared_experts, kMaxExperts);
    }
    double n = approx_param_count(c);
    MT_CHECK(n <= kMaxParams, "config: the model would have ", n,
             " parameters, more than the 2^50 limit (check \"d_model\", \"d_ff\", \"vocab_size\")");
}

ModelConfig parse_config(const std::string& json_text) {
    json j = io::parse_json_strict(json_text, "config");
    io::JsonFields f(j, "config", "", kTopKeys);
    ModelConfig c;
    each_model_field(c, FieldReader{f});
    if (f.has("moe") && !f.raw("moe").is_null()) {
        f.object("moe");
        c.moe = parse_moe(f.raw("moe"));
    }
    if (c.head_dim == 0 && c.d_model > 0 && c.n_heads > 0) {
        MT_CHECK(c.d_model % c.n_heads == 0, "config: \"d_model\" = ", c.d_model,
                 " is not divisible by \"n_heads\" = ", c.n_heads,
                 " (set \"head_dim\" explicitly)");
        c.head_dim = c.d_model / c.n_heads;
    }
    validate_config(c);
    return c;
}

int64_t moe_capacity_rows(const MoeConfig& m, int64_t N) {
    if (m.capacity_factor <= 0) return -1;
    const double c = ((m.capacity_factor * static_cast<double>(N)) * m.top_k) / m.n_experts;
    const int64_t all = N * m.top_k;  // a capacity of every selection never drops one
    return c >= static_cast<double>(all) ? all : static_cast<int64_t>(std::ceil(c));
}

ModelConfig load_config_file(const std::string& path) {
    const std::string text = io::read_file(path, io::kConfigFile);
    try {
        return parse_config(text);
    } catch (const Error& e) {
        fail("config file ", path, ": ", e.what());
    }
}

std::string config_to_json(const ModelConfig& c) {
    io::ordered_json j;
    each_model_field(c, FieldWriter{j});
    if (c.moe) {
        io::ordered_json jm;
        each_moe_field(*c.moe, FieldWriter{jm});
        j["moe"] = jm;
    } else {
        j["moe"] = nullptr;
    }
    return j.dump(2);
}

}  // namespace moetrain

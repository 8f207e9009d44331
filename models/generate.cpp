// Generation with a KV cache (generate.h): prefill the prompt once, then feed one token per
// step at its absolute position; logits of the last position are sampled on the device.
#include "moetrain/generate.h"

#include <cmath>

#include "model_impl.h"

namespace moetrain {
namespace {

void check_options(const GenerateOptions& o) {
    MT_CHECK(o.max_new_tokens >= 0, "max_new_tokens must be >= 0 (got ", o.max_new_tokens, ")");
    MT_CHECK(o.temperature >= 0 && std::isfinite(o.temperature),
             "temperature must be finite and >= 0 (got ", o.temperature, ")");
    MT_CHECK(o.top_k >= 0, "top_k must be >= 0 (got ", o.top_k, ")");
    MT_CHECK(o.top_p > 0 && o.top_p <= 1, "top_p must be in (0, 1] (got ", o.top_p, ")");
}

}  // namespace

std::vector<std::vector<int32_t>> generate_batch(Model& model,
                                                 const std::vector<std::vector<int32_t>>& prompts,
                                                 const GenerateOptions& opts,
                                                 const TokenCallback& on_step) {
    check_options(opts);
    ModelImpl& im = model.impl();
    const ModelConfig& c = im.cfg;
    Device& dev = im.dev;
    MT_CHECK(!prompts.empty(), "generation needs at least one prompt");
    const int B = static_cast<int>(prompts.size());
    const int T0 = static_cast<int>(prompts[0].size());
    MT_CHECK(T0 >= 1, "generation needs a prompt of at least one token");
    for (const auto& p : prompts)
        MT_CHECK(static_cast<int>(p.size()) == T0, "batched prompts must have equal lengths (", T0,
                 " vs ", p.size(), ")");
    const int64_t S = int64_t{T0} + opts.max_new_tokens;
    MT_CHECK(S <= c.max_seq_len, "prompt (", T0, " tokens) + max_new_tokens (", opts.max_new_tokens,
             ") = ", S, " exceeds max_seq_len ", c.max_seq_len);

    std::vector<std::vector<int32_t>> out(static_cast<size_t>(B));
    if (opts.max_new_tokens == 0) return out;
    const int64_t kv_row = int64_t{c.n_kv_heads} * c.head_dim;
    std::vector<KvSlot> cache(static_cast<size_t>(c.n_layers));
    for (auto& slot : cache) {
        slot.k = dev.alloc(DType::f32, {B, S, kv_row});
        slot.v = dev.alloc(DType::f32, {B, S, kv_row});
        slot.S = S;
    }
    const Tensor logits = dev.alloc(DType::f32, {B, c.vocab_size});
    const Tensor ids = dev.alloc(DType::i32, {B});

    std::vector<int32_t> x;
    for (const auto& p : prompts) x.insert(x.end(), p.begin(), p.end());
    auto run = [&](const int32_t* tokens, int T, int64_t pos0) {
        for (auto& slot : cache) slot.pos0 = pos0;
        im.forward_cached(tokens, B, T, pos0, cache, logits);
    };
    run(x.data(), T0, 0);

    std::vector<int32_t> tok(static_cast<size_t>(B));
    for (int i = 0; i < opts.max_new_tokens; ++i) {
        SampleArgs s;
        s.temperature = opts.temperature;
        s.top_k = opts.top_k;
        s.top_p = opts.top_p;
        s.seed = opts.seed;
        s.step = static_cast<uint64_t>(i);
        dev.sample(ids, logits, B, c.vocab_size, s);
        dev.download(tok.data(), ids);
        for (int b = 0; b < B; ++b)
            out[static_cast<size_t>(b)].push_back(tok[static_cast<size_t>(b)]);
        if (on_step && !on_step(i, tok)) break;
        if (i + 1 < opts.max_new_tokens) run(tok.data(), 1, T0 + i);
    }
    return out;
}

std::vector<int32_t> generate(Model& model, const std::vector<int32_t>& prompt,
                              const GenerateOptions& opts,
                              const std::function<bool(int32_t token)>& on_token) {
    TokenCallback cb;
    if (on_token) cb = [&](int64_t, std::span<const int32_t> t) { return on_token(t[0]); };
    return generate_batch(model, {prompt}, opts, cb)[0];
}

}  // namespace moetrain

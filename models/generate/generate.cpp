// Generation with a KV cache (generate.h): prefill the prompt once, then feed one token per
// step at its absolute position; logits of the last position are sampled on the device.
// Each decode step is one recorded step (Device::run_recorded, a CUDA Graph replay once warmed
// up): the host uploads the tokens and the step number j, and the ops read the position
// (T0 - 1 + j: RoPE, the KV-cache rows, the attention length) and the Philox step j from that
// device counter, so the queued work is identical at every step. The sampled ids are the one
// download per step.
#include "moetrain/generate.h"

#include <bit>
#include <cmath>
#include <sstream>

#include "model/decode_passes.h"
#include "model/workspace.h"  // next_buffer_generation

namespace moetrain {
namespace {

void check_options(const GenerateOptions& o) {
    MT_CHECK(o.max_new_tokens >= 0, "max_new_tokens must be >= 0 (got ", o.max_new_tokens, ")");
    MT_CHECK(o.temperature >= 0 && std::isfinite(o.temperature),
             "temperature must be finite and >= 0 (got ", o.temperature, ")");
    MT_CHECK(o.top_k >= 0, "top_k must be >= 0 (got ", o.top_k, ")");
    MT_CHECK(o.top_p > 0 && o.top_p <= 1, "top_p must be in (0, 1] (got ", o.top_p, ")");
}

// The run_recorded key of the decode steps of one generation: its buffers (a generation number
// for the cache, logits, ids and counter allocated together) and every argument of its ops.
std::string decode_key(uint64_t buffers, int B, int T0, int64_t S, const SampleArgs& s) {
    auto bits = [](float f) { return std::bit_cast<uint32_t>(f); };
    std::ostringstream key;
    key << "decode B" << B << " T0 " << T0 << " S" << S << " kv#" << buffers << std::hex
        << " temp=" << bits(s.temperature) << " top_p=" << bits(s.top_p) << std::dec
        << " top_k=" << s.top_k << " seed=" << s.seed;
    return key.str();
}

}  // namespace

std::vector<std::vector<int32_t>> generate_batch(Model& model,
                                                 const std::vector<std::vector<int32_t>>& prompts,
                                                 const GenerateOptions& opts,
                                                 const TokenCallback& on_step) {
    check_options(opts);
    DecodePasses passes(model);
    const ModelConfig& c = model.config();
    Device& dev = model.device();
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
        // Keys then values in one buffer: one kv_append stores both (attention_fwd).
        const Tensor kv = dev.alloc(DType::f32, {2, B, S, kv_row});
        slot.k = kv.view(0, {B, S, kv_row});
        slot.v = kv.view(int64_t{B} * S * kv_row, {B, S, kv_row});
        slot.S = S;
    }
    const Tensor logits = dev.alloc(DType::f32, {B, c.vocab_size});
    const Tensor ids = dev.alloc(DType::i32, {B});
    const Tensor counter = dev.alloc(DType::i32, {1});  // decode step j (device side)
    const uint64_t buffers = next_buffer_generation();

    SampleArgs s;
    s.temperature = opts.temperature;
    s.top_k = opts.top_k;
    s.top_p = opts.top_p;
    s.seed = opts.seed;

    // Prefill (eager): the prompt at positions 0 .. T0 - 1, then the first draw (step 0).
    std::vector<int32_t> x;
    for (const auto& p : prompts) x.insert(x.end(), p.begin(), p.end());
    passes.prefill(x.data(), B, T0, 0, cache, logits);
    dev.sample(ids, logits, B, c.vocab_size, s);

    // Decode step j >= 1: the token drawn at step j - 1 at position T0 - 1 + j, then draw j.
    for (auto& slot : cache) {
        slot.pos0 = T0 - 1;
        slot.pos_dev = counter;
    }
    s.step_dev = counter;
    const std::string key = decode_key(buffers, B, T0, S, s);
    std::vector<int32_t> tok(static_cast<size_t>(B));
    for (int i = 0; i < opts.max_new_tokens; ++i) {
        if (i > 0) {
            dev.upload(counter, &i);
            passes.decode_step(tok.data(), B, T0 - 1 + i, cache, logits, key,
                               [&] { dev.sample(ids, logits, B, c.vocab_size, s); });
        }
        dev.download(tok.data(), ids);
        for (int b = 0; b < B; ++b)
            out[static_cast<size_t>(b)].push_back(tok[static_cast<size_t>(b)]);
        if (on_step && !on_step(i, tok)) break;
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

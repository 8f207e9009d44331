// Generation with the KV cache: greedy tokens equal the argmax of a full forward recomputed
// at every step (dense, MoE softmax, MoE hash, rope and learned positions, batched prompts),
// seeded sampling, the per-token callback, the error cases, and one kv_append per layer and
// forward.
#include <doctest/doctest.h>

#include <algorithm>

#include "moetrain/generate.h"
#include "moetrain/profiling.h"
#include "op_test_util.h"
#include "reference_model.h"

using namespace moetrain;
namespace rm = moetrain::refmodel;

namespace {

std::vector<ModelConfig> gen_configs() {
    std::vector<ModelConfig> v;
    v.push_back(rm::small_config());
    ModelConfig moe = rm::with_moe(rm::small_config(), 4, 2, 1);
    moe.moe->n_shared_experts = 1;
    moe.pos = PosKind::learned;
    moe.norm = NormKind::layernorm;
    moe.bias = true;
    v.push_back(moe);
    ModelConfig hash = rm::with_moe(rm::small_config(), 3, 1, 0);
    hash.moe->router = RouterKind::hash;
    hash.n_kv_heads = 1;
    hash.rope_ntk_alpha = 2.0;
    v.push_back(hash);
    return v;
}

}  // namespace

TEST_CASE("generate: KV-cache greedy tokens equal the argmax of a full forward per step") {
    int config_no = 0;
    for (const ModelConfig& c : gen_configs()) {
        ++config_no;
        test::for_each_test_device([&](Device& dev) {
            CAPTURE(config_no);
            Model m(dev, c);
            rm::randomize_weights(m, 17);
            const int B = 2, T0 = 5, M = 9;
            const rm::Batch pb = rm::random_batch(c.vocab_size, B, T0, 31);
            std::vector<std::vector<int32_t>> prompts(B);
            for (int b = 0; b < B; ++b)
                prompts[b].assign(pb.x.begin() + b * T0, pb.x.begin() + (b + 1) * T0);
            GenerateOptions o;
            o.temperature = 0;
            o.max_new_tokens = M;
            const auto out = generate_batch(m, prompts, o);
            REQUIRE(out.size() == B);
            int checked = 0;
            for (int b = 0; b < B; ++b) {
                REQUIRE(out[b].size() == M);
                std::vector<int32_t> seq = prompts[b];
                for (int i = 0; i < M; ++i) {
                    const int len = static_cast<int>(seq.size());
                    const std::vector<float> lg = m.forward_logits(seq.data(), 1, len);
                    const float* last = lg.data() + static_cast<size_t>(len - 1) * c.vocab_size;
                    const int want =
                        static_cast<int>(std::max_element(last, last + c.vocab_size) - last);
                    std::vector<float> sorted(last, last + c.vocab_size);
                    std::sort(sorted.rbegin(), sorted.rend());
                    if (sorted[0] - sorted[1] > 1e-4f) {  // skip exact near-ties
                        CAPTURE(b);
                        CAPTURE(i);
                        CHECK(out[b][i] == want);
                        ++checked;
                    }
                    seq.push_back(out[b][i]);
                }
            }
            CHECK(checked >= B * M - 2);
        });
    }
}

TEST_CASE("generate: seeded sampling is reproducible; top_k = 1 is greedy; callback can stop") {
    const ModelConfig c = rm::with_moe(rm::small_config(), 4, 2, 1);
    test::for_each_test_device([&](Device& dev) {
        Model m(dev, c);
        rm::randomize_weights(m, 2);
        const std::vector<int32_t> prompt = {1, 2, 3};
        GenerateOptions o;
        o.max_new_tokens = 10;
        o.temperature = 1.0f;
        o.seed = 42;
        const auto a = generate(m, prompt, o);
        const auto b = generate(m, prompt, o);
        CHECK(a == b);
        o.seed = 43;
        const auto other = generate(m, prompt, o);
        o.seed = 44;
        const auto other2 = generate(m, prompt, o);
        CHECK((other != a || other2 != a));
        o.top_k = 1;
        const auto k1 = generate(m, prompt, o);
        o.top_k = 0;
        o.temperature = 0;
        CHECK(k1 == generate(m, prompt, o));

        std::vector<int32_t> streamed;
        const auto stopped = generate(m, prompt, o, [&](int32_t t) {
            streamed.push_back(t);
            return streamed.size() < 3;
        });
        CHECK(stopped.size() == 3);
        CHECK(streamed == stopped);
    });
}

TEST_CASE("generate: errors name the problem") {
    const ModelConfig c = rm::small_config();  // max_seq_len 16
    auto dev = open_device("cpu");
    Model m(*dev, c);
    m.init_weights(1);
    GenerateOptions o;
    o.max_new_tokens = 12;
    CHECK_THROWS_WITH_AS(generate(m, std::vector<int32_t>(5, 1), o),
                         doctest::Contains("exceeds max_seq_len 16"), Error);
    CHECK_THROWS_WITH_AS(generate(m, {}, o), doctest::Contains("at least one token"), Error);
    o.max_new_tokens = 2;
    CHECK_THROWS_WITH_AS(generate(m, {1, 99}, o), doctest::Contains("token id 99 at position 1"),
                         Error);
    o.top_p = 0;
    CHECK_THROWS_WITH_AS(generate(m, {1}, o), doctest::Contains("top_p"), Error);
    o.top_p = 1;
    CHECK_THROWS_WITH_AS(generate_batch(m, {{1, 2}, {3}}, o), doctest::Contains("equal lengths"),
                         Error);
}

// The keys and values of a layer are appended to its cache by one kv_append (the caches and the
// workspace's k / v rows lie back to back), for the prefill and every decode step: as many
// kv_append calls as attention forwards, with the tokens of the reference run.
TEST_CASE("generate: one kv_append per layer and forward stores both keys and values") {
    for (const ModelConfig& c : gen_configs()) {
        std::unique_ptr<Device> cpu = open_device("cpu");
        ProfilingDevice prof(*cpu);
        Model m(prof, c), ref(*cpu, c);
        m.init_weights(3);
        ref.init_weights(3);
        GenerateOptions o;
        o.max_new_tokens = 5;
        const std::vector<int32_t> prompt = {1, 2, 3, 4};
        const std::vector<int32_t> got = generate(m, prompt, o);
        CHECK(got == generate(ref, prompt, o));
        int64_t appends = 0, attentions = 0;
        for (const OpProfile& p : prof.table()) {
            if (p.op == "kv_append") appends += p.calls;
            if (p.op.rfind("attention_fwd", 0) == 0) attentions += p.calls;
        }
        CHECK(attentions >= c.n_layers);
        CHECK(appends == attentions);
    }
}

// A complete use of the public API: open the CPU device, build a tiny byte-level MoE model,
// train it for a few dozen AdamW steps on an embedded text, print the losses, then sample a
// few tokens with the KV cache. Exits non-zero if the loss did not fall.
//
//   build/train_tiny [steps]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "moetrain/backend.h"
#include "moetrain/generate.h"
#include "moetrain/model.h"
#include "moetrain/train.h"

namespace {

const char* kText =
    "The quick brown fox jumps over the lazy dog. A mixture of experts routes every token to "
    "a few small feed-forward networks, so the model can hold many parameters while each "
    "token only pays for the experts it visits. The router learns which expert fits which "
    "token; an auxiliary loss keeps the load balanced so no expert starves. ";

moetrain::ModelConfig tiny_moe() {
    // 256 byte tokens, d_model 64, 2 layers, 4 heads sharing 2 KV heads, d_ff 128, 64 positions.
    moetrain::ModelConfig c = moetrain::sized_config(256, 64, 2, 4, 2, 128, 64);
    moetrain::MoeConfig m;
    m.n_experts = 4;
    m.top_k = 2;
    m.n_shared_experts = 1;
    m.first_layer = 1;  // layer 0 dense, layer 1 MoE
    c.moe = m;
    return c;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const int steps = argc > 1 ? std::atoi(argv[1]) : 40;
        const int B = 4, T = 32;
        std::vector<int32_t> tokens;
        for (int rep = 0; rep < 8; ++rep)
            for (const char* p = kText; *p; ++p) tokens.push_back(static_cast<unsigned char>(*p));

        auto dev = moetrain::open_device("cpu");
        moetrain::Model model(*dev, tiny_moe());
        model.init_weights(1337);
        std::printf("device %s, %lld parameters\n", dev->name().c_str(),
                    static_cast<long long>(model.num_params()));

        moetrain::TrainOptions opts;
        opts.lr = 3e-3;
        opts.warmup = 5;
        opts.total_steps = steps;
        moetrain::Trainer trainer(model, opts);

        size_t pos = 0;
        std::vector<int32_t> x(B * T), y(B * T);
        double first = 0, last = 0;
        for (int s = 0; s < steps; ++s) {
            if (pos + B * T + 1 > tokens.size()) pos = 0;
            for (int i = 0; i < B * T; ++i) {
                x[i] = tokens[pos + i];
                y[i] = tokens[pos + i + 1];
            }
            pos += B * T;
            const moetrain::StepStats st = trainer.step(x.data(), y.data(), B, T);
            if (s == 0) first = st.loss.loss;
            last = st.loss.loss;
            std::printf("step %3lld  loss %.4f  ce %.4f  aux %.4f  z %.5f  lr %.2e  |g| %.3f\n",
                        static_cast<long long>(st.step), st.loss.loss, st.loss.ce, st.loss.aux,
                        st.loss.z, st.lr, st.grad_norm);
        }

        moetrain::GenerateOptions g;
        g.max_new_tokens = 24;
        g.temperature = 0.8f;
        g.top_k = 20;
        g.seed = 7;
        const std::string prompt = "The quick ";
        std::printf("sample: %s", prompt.c_str());
        moetrain::generate(model, std::vector<int32_t>(prompt.begin(), prompt.end()), g,
                           [](int32_t t) {
                               std::putchar(t >= 32 && t < 127 ? t : '?');
                               return true;
                           });
        std::printf("\n");

        if (!(last < first - 0.5)) {
            std::fprintf(stderr, "loss did not fall: %.4f -> %.4f\n", first, last);
            return 1;
        }
        std::printf("loss fell from %.4f to %.4f\n", first, last);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}

// Builds a tiny model with the installed library and trains two steps on the CPU.
#include <moetrain/moetrain.h>

#include <cstdio>
#include <vector>

int main() {
    auto dev = moetrain::open_device("cpu");
    moetrain::Model model(*dev, moetrain::preset_config("tiny"));
    model.init_weights(1);
    moetrain::TrainOptions opts;
    opts.total_steps = 2;
    moetrain::Trainer trainer(model, opts);
    std::vector<int32_t> x(2 * 8), y(2 * 8);
    for (size_t i = 0; i < x.size(); ++i) {
        x[i] = static_cast<int32_t>(i % 50);
        y[i] = static_cast<int32_t>((i + 1) % 50);
    }
    for (int s = 0; s < 2; ++s) {
        auto st = trainer.step(x.data(), y.data(), 2, 8);
        std::printf("step %lld loss %.4f\n", static_cast<long long>(st.step), st.loss.loss);
    }
    for (const auto& b : moetrain::list_backends())
        std::printf("backend %s: %s\n", b.name.c_str(), b.reason.empty() ? "ok" : b.reason.c_str());
    return 0;
}

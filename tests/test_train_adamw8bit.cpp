// Training with the 8-bit AdamW optimizer: its state is 2 bytes per parameter plus 8 bytes
// per 256; its updates stay within 6% of fp32 AdamW's over ten steps; over 200 steps on a
// learnable token stream (tiny preset and a small MoE model) it ends within 2% of fp32
// AdamW's loss, on cpu and on opencl.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "moetrain/train.h"
#include "op_test_util.h"
#include "reference_model.h"

using namespace moetrain;
namespace rm = moetrain::refmodel;

namespace {

// A learnable stream: a Markov chain whose next token is a fixed function of the previous one
// 3 times in 4 (else uniform), so the loss falls fast but has a floor well above 0.
std::vector<int32_t> markov_tokens(int vocab, int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> next(static_cast<size_t>(vocab));
    for (auto& t : next) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
    std::vector<int32_t> s = {0};
    while (static_cast<int64_t>(s.size()) < n)
        s.push_back(rng() % 4 != 0 ? next[static_cast<size_t>(s.back())]
                                   : static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab)));
    return s;
}

// Losses of `steps` optimizer steps on consecutive windows of the stream.
std::vector<double> train_losses(Device& dev, const ModelConfig& c, OptimizerKind kind, int steps,
                                 int B, int T) {
    Model m(dev, c);
    m.init_weights(7);
    TrainOptions o;
    o.optimizer = kind;
    o.lr = 3e-3;
    o.warmup = 10;
    o.total_steps = steps;
    Trainer tr(m, o);
    const std::vector<int32_t> data = markov_tokens(c.vocab_size, 50000, 3);
    std::vector<double> losses;
    int64_t pos = 0;
    for (int s = 0; s < steps; ++s) {
        if (pos + B * T + 1 > static_cast<int64_t>(data.size())) pos = 0;
        std::vector<int32_t> x(data.begin() + pos, data.begin() + pos + B * T);
        std::vector<int32_t> y(data.begin() + pos + 1, data.begin() + pos + B * T + 1);
        losses.push_back(tr.step(x.data(), y.data(), B, T).loss.loss);
        pos += B * T;
    }
    return losses;
}

double mean_tail(const std::vector<double>& v, size_t k) {
    double s = 0;
    for (size_t i = v.size() - k; i < v.size(); ++i) s += v[i];
    return s / static_cast<double>(k);
}

}  // namespace

TEST_CASE("train: adamw8bit state is 2 bytes per parameter plus 8 per 256") {
    const ModelConfig c = preset_config("tiny");
    auto dev = open_device("cpu");
    Model m(*dev, c);
    TrainOptions o;
    o.optimizer = OptimizerKind::adamw8bit;
    Trainer tr(m, o);
    CHECK(tr.moment1().empty());
    REQUIRE(tr.quantized_moments().size() == 2);
    int64_t bytes = 0, covered = 0;
    for (const QuantizedMoments& q : tr.quantized_moments()) {
        CHECK(q.offset == covered);
        covered += q.n;
        CHECK(q.m_codes.dtype == DType::u8);
        CHECK(q.m_absmax.numel() == (q.n + kAdamW8bitBlock - 1) / kAdamW8bitBlock);
        for (const Tensor* t : {&q.m_codes, &q.v_codes, &q.m_absmax, &q.v_absmax})
            bytes += static_cast<int64_t>(t->bytes());
    }
    CHECK(tr.quantized_moments()[0].range == "decay");
    CHECK(covered == m.num_params());
    const int64_t n = m.num_params();
    MESSAGE("tiny: " << n << " parameters, adamw8bit state " << bytes << " bytes, fp32 AdamW "
                     << 8 * n << " bytes");
    CHECK(bytes <= 2 * n + 8 * (n / 256 + 2));
}

TEST_CASE("train: adamw8bit takes fp32 AdamW's first step and stays within 6% after ten") {
    // Both trainers see the same gradients (the 8-bit model is reset to the fp32 weights before
    // each step), so the updates differ only through the quantised moments. The first step
    // (zero state) is the same (ops: adamw8bit from a zero state ...; the cpu backend's fp32
    // adamw is FMA-contracted, so equal to ~1 ulp here). Afterwards each stored moment carries
    // the dynamic map's rounding: rms 1.9% of a value within the top decade of its block, 3.8%
    // in the next (signed map, log-uniform values), and the moving averages accumulate it up to
    // ~1 / sqrt(1 - b1^2) times one step's. Measured on this model (norm of the difference of
    // the updates over the norm of the fp32 update): 2.8% at the second step, 3.9% at the
    // tenth, levelling off at ~5% by step 40.
    const ModelConfig c = rm::with_moe(rm::small_config(), 4, 2, 1);
    for (auto& d : test::test_devices()) {
        CAPTURE(d.id);
        Model m8(*d.dev, c), m32(*d.dev, c);
        rm::randomize_weights(m8, 4);
        rm::randomize_weights(m32, 4);
        TrainOptions o;
        o.lr = 1e-2;
        o.min_lr = 1e-2;
        o.total_steps = 10;
        Trainer t32(m32, o);
        o.optimizer = OptimizerKind::adamw8bit;
        Trainer t8(m8, o);
        std::vector<float> prev = m32.get_flat(m32.params_flat());
        double worst = 0;
        for (int s = 0; s < 10; ++s) {
            // Both models take the same gradient: m8 is reset to m32's weights every step.
            m8.set_flat(m8.params_flat(), prev);
            const rm::Batch b = rm::random_batch(c.vocab_size, 2, 8, 100 + s);
            t8.step(b.x.data(), b.y.data(), 2, 8);
            t32.step(b.x.data(), b.y.data(), 2, 8);
            const std::vector<float> p8 = m8.get_flat(m8.params_flat()),
                                     p32 = m32.get_flat(m32.params_flat());
            double diff = 0, norm = 0;
            for (size_t i = 0; i < p32.size(); ++i) {
                const double u32 = double{p32[i]} - prev[i], u8 = double{p8[i]} - prev[i];
                diff += (u8 - u32) * (u8 - u32);
                norm += u32 * u32;
            }
            const double rel = std::sqrt(diff / norm);
            if (s == 0) CHECK(rel < 1e-6);  // identical up to FMA contraction of adamw on cpu
            worst = std::max(worst, rel);
            prev = p32;
        }
        MESSAGE(d.id << ": adamw8bit vs fp32 AdamW, worst relative update error over 10 steps: "
                     << worst);
        CHECK(worst < 0.06);
    }
}

namespace {
// fp32 AdamW and adamw8bit from the same start on the same stream: the mean loss of the last
// 10 of `steps` steps must agree within 2% (tiny preset and a small MoE model).
void check_final_losses(Device& dev, const std::string& id, int steps) {
    struct Net {
        std::string name;
        ModelConfig config;
        int B, T;
    };
    const Net nets[] = {{"tiny", preset_config("tiny"), 4, 32},
                        {"small moe", rm::with_moe(rm::small_config(), 4, 2, 1), 4, 16}};
    for (const Net& net : nets) {
        CAPTURE(net.name);
        const auto l32 = train_losses(dev, net.config, OptimizerKind::adamw, steps, net.B, net.T);
        const auto l8 =
            train_losses(dev, net.config, OptimizerKind::adamw8bit, steps, net.B, net.T);
        const double f32 = mean_tail(l32, 10), f8 = mean_tail(l8, 10);
        MESSAGE(id << " " << net.name << ": loss " << l32.front() << " -> " << f32
                   << " (fp32 AdamW), " << l8.front() << " -> " << f8 << " (adamw8bit), " << steps
                   << " steps");
        CHECK(f32 < l32.front() - 0.5);  // the run learned something
        CHECK(std::fabs(f8 - f32) <= 0.02 * f32);
    }
}
}  // namespace

TEST_CASE("train: adamw8bit ends within 2% of fp32 AdamW's loss after 200 steps (cpu)") {
    bool cpu = false;
    for (auto& d : test::test_devices()) cpu = cpu || d.dev->backend_name() == "cpu";
    if (!cpu) return;
    // One OpenMP thread: two gain little on models this small, and on a busy machine (ctest -j2
    // under nice) two threads that meet at every op's barrier ran 7x slower than one.
    DeviceOptions one;
    one.threads = 1;
    check_final_losses(*open_device("cpu", one), "cpu (1 thread)", 200);
    DeviceOptions all;
    const char* env = std::getenv("OMP_NUM_THREADS");
    all.threads = env ? std::max(1, std::atoi(env))
                      : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    open_device("cpu", all);  // restores the process-wide OpenMP setting
}

TEST_CASE("train: adamw8bit ends within 2% of fp32 AdamW's loss after 200 steps (opencl)") {
    // A case of its own: PoCL runs these small models ~4x slower per step than the cpu backend
    // (~20 s for the 200 steps under ctest -j2 here). (The CUDA simulator is far slower still
    // and runs the ten-step case above instead.)
    for (auto& d : test::test_devices())
        if (d.dev->backend_name() == "opencl") check_final_losses(*d.dev, d.id, 200);
}

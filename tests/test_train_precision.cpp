// Mixed precision on every test device: bf16 / fp16 training curves against fp32,
// proof that the 16-bit path really rounds (and refreshes its weight copy when the master
// weights change), fp16 dynamic loss scaling (a forced overflow skips the step, halves the
// scale and changes nothing else; the scale doubles after the window of clean steps) and
// the scale state surviving a checkpoint round trip; the opt-in 16-bit attention.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "moetrain/checkpoint.h"
#include "moetrain/profiling.h"
#include "moetrain/train.h"
#include "test_checkpoint_util.h"
#include "test_xbackend_util.h"

using namespace moetrain;
namespace xb = moetrain::xbackend;

namespace {

constexpr int kSteps = 200;

// Mean loss of the last 10 of kSteps steps on the learnable stream.
double final_loss(Device& dev, const ModelConfig& c, Precision p) {
    Model m(dev, c);
    m.set_precision(p);
    m.init_weights(7);
    TrainOptions o = xb::curve_options(kSteps);
    o.lr = 3e-3;
    Trainer tr(m, o);
    const std::vector<int32_t> stream = xb::token_stream(c.vocab_size, 8192, 3);
    const auto rec = xb::train_steps(tr, stream, 0, kSteps);
    double s = 0;
    for (int i = kSteps - 10; i < kSteps; ++i) s += rec[static_cast<size_t>(i)].loss;
    CHECK(tr.skipped_steps() == 0);
    return s / 10;
}

void check_curves_within_2pct(const xb::NamedConfig& nc) {
    for (auto& d : test::test_devices()) {
        CAPTURE(d.id);
        CAPTURE(nc.name);
        const double f32 = final_loss(*d.dev, nc.cfg, Precision::fp32);
        const double b16 = final_loss(*d.dev, nc.cfg, Precision::bf16);
        const double f16 = final_loss(*d.dev, nc.cfg, Precision::fp16);
        MESSAGE(d.id, " ", nc.name, ": loss after ", kSteps, " steps fp32 ", f32, ", bf16 ", b16,
                ", fp16 ", f16);
        CHECK(f32 < 3.0);  // it learned (uniform over 64 tokens is 4.16)
        CHECK(std::abs(b16 - f32) / f32 < 0.02);
        CHECK(std::abs(f16 - f32) / f32 < 0.02);
    }
}

LossStats loss_of(Model& m, const xb::Batch& b) {
    return m.forward_loss(b.x.data(), b.y.data(), xb::kTrainB, xb::kTrainT);
}

}  // namespace

TEST_CASE("precision: bf16 and fp16 training of a dense model end within 2% of fp32") {
    check_curves_within_2pct(xb::config_dense());
}

TEST_CASE("precision: bf16 and fp16 training of an MoE model end within 2% of fp32") {
    check_curves_within_2pct(xb::config_moe_softmax());
}

TEST_CASE("precision: 16-bit products round their operands, and follow weight updates") {
    const ModelConfig c = xb::config_moe_softmax().cfg;
    const xb::Batch b =
        xb::batch_at(xb::token_stream(c.vocab_size, 4096, 5), 0, xb::kTrainB, xb::kTrainT);
    test::for_each_test_device([&](Device& dev) {
        Model m32(dev, c), m16(dev, c);
        m32.init_weights(11);
        m16.set_precision(Precision::bf16);
        m16.init_weights(11);
        const double l32 = loss_of(m32, b).ce, l16 = loss_of(m16, b).ce;
        // bf16 keeps 8 significant bits: the losses differ, but only a little.
        CHECK(l16 != l32);
        CHECK(std::abs(l16 - l32) / l32 < 1e-2);
        // New master weights reach the 16-bit copy: the same change in both models moves
        // the bf16 loss the way it moves the fp32 one.
        const std::string name = "lm_head.weight";
        std::vector<float> w = m32.get_param(name);
        for (float& v : w) v *= 3.0f;
        m32.set_param(name, w);
        m16.set_param(name, w);
        const double l32b = loss_of(m32, b).ce, l16b = loss_of(m16, b).ce;
        CHECK(l32b != l32);
        CHECK(std::abs(l16b - l32b) / l32b < 1e-2);
        CHECK(std::abs(l16b - l32b) < std::abs(l32b - l32));
        // Back to fp32: exactly the fp32 model again.
        m16.set_precision(Precision::fp32);
        CHECK(loss_of(m16, b).ce == l32b);
    });
}

TEST_CASE("precision: an fp16 overflow skips the step, halves the scale, changes nothing else") {
    const ModelConfig c = xb::config_dense().cfg;
    const std::vector<int32_t> stream = xb::token_stream(c.vocab_size, 4096, 9);
    const xb::Batch b0 = xb::batch_at(stream, 0, xb::kTrainB, xb::kTrainT);
    const xb::Batch b1 = xb::batch_at(stream, 1, xb::kTrainB, xb::kTrainT);
    test::for_each_test_device([&](Device& dev) {
        TrainOptions o = xb::curve_options(10);
        o.loss_scale_init = std::ldexp(1.0, 40);  // loss gradients far beyond fp16's 65504
        Model a(dev, c), ref(dev, c);
        for (Model* m : {&a, &ref}) {
            m->set_precision(Precision::fp16);
            m->init_weights(5);
        }
        Trainer ta(a, o), tref(ref, o);
        const std::vector<float> p0 = a.get_flat(a.params_flat());

        const StepStats s = ta.step(b0.x.data(), b0.y.data(), xb::kTrainB, xb::kTrainT);
        CHECK(s.skipped);
        CHECK(std::isfinite(s.loss.loss));
        CHECK(s.loss_scale == std::ldexp(1.0, 40));
        CHECK(ta.loss_scale() == std::ldexp(1.0, 39));
        CHECK(ta.skipped_steps() == 1);
        CHECK(ta.steps_done() == 0);
        const std::vector<float> p1 = a.get_flat(a.params_flat());
        CHECK(std::memcmp(p0.data(), p1.data(), p0.size() * sizeof(float)) == 0);
        for (const Tensor& mom : {ta.moment1(), ta.moment2()})
            for (float v : a.get_flat(mom)) REQUIRE(v == 0.0f);

        // Continuing at a sane scale is exactly a run that never overflowed.
        ta.set_loss_scale_state(1024, 0, ta.skipped_steps());
        tref.set_loss_scale_state(1024, 0, 0);
        const StepStats sa = ta.step(b1.x.data(), b1.y.data(), xb::kTrainB, xb::kTrainT);
        const StepStats sr = tref.step(b1.x.data(), b1.y.data(), xb::kTrainB, xb::kTrainT);
        CHECK_FALSE(sa.skipped);
        CHECK(sa.step == 1);
        CHECK(sa.loss.loss == sr.loss.loss);
        const std::vector<float> pa = a.get_flat(a.params_flat());
        const std::vector<float> pr = ref.get_flat(ref.params_flat());
        CHECK(std::memcmp(pa.data(), pr.data(), pa.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(pa.data(), p0.data(), pa.size() * sizeof(float)) != 0);
    });
}

TEST_CASE("precision: the fp16 loss scale doubles after its window and survives a checkpoint") {
    const ModelConfig c = xb::config_dense().cfg;
    const std::vector<int32_t> stream = xb::token_stream(c.vocab_size, 4096, 4);
    const auto devices = test::test_devices();
    const auto& d = devices.front();
    TrainOptions o = xb::curve_options(20);
    o.loss_scale_init = 256;
    o.loss_scale_window = 3;
    Model m(*d.dev, c);
    m.set_precision(Precision::fp16);
    m.init_weights(3);
    Trainer tr(m, o);
    xb::train_steps(tr, stream, 0, 2);
    CHECK(tr.loss_scale() == 256);
    CHECK(tr.clean_steps() == 2);
    xb::train_steps(tr, stream, 2, 1);
    CHECK(tr.loss_scale() == 512);
    CHECK(tr.clean_steps() == 0);
    xb::train_steps(tr, stream, 3, 1);

    testing::TempDir dir;
    const std::string ck = dir.file("step");
    save_checkpoint(ck, m, &tr, TrainState{});
    const CheckpointInfo info = read_checkpoint_info(ck);
    CHECK(info.state.precision == "fp16");
    CHECK(info.state.loss_scale == 512);
    CHECK(info.state.loss_scale_clean == 1);

    Model m2(*d.dev, c);
    m2.set_precision(Precision::fp16);
    load_weights(ck, m2);
    Trainer tr2(m2, o);
    load_optimizer(ck, tr2);
    CHECK(tr2.loss_scale() == 512);
    CHECK(tr2.clean_steps() == 1);
    // The resumed run continues bit-identically, scale changes included.
    const auto want = xb::train_steps(tr, stream, 4, 3);
    const auto got = xb::train_steps(tr2, stream, 4, 3);
    for (size_t i = 0; i < want.size(); ++i) CHECK(got[i].loss == want[i].loss);
    CHECK(tr2.loss_scale() == tr.loss_scale());
    CHECK(tr.loss_scale() == 1024);
}

// Model::set_attention16 (--attention16): with bf16 the model asks for 16-bit attention
// (AttnDims::compute). A device with 16-bit attention (cuda: cuDNN's fused attention or the
// tensor-core kernels) runs it — booked as attention_fwd[cudnn] / attention_fwd[wmma] — and its
// loss moves a little; every other device computes attention in fp32 and gives the same bits
// as without the option. Off again: the bits of before.
TEST_CASE("precision: --attention16 runs 16-bit attention where a device has it, fp32 elsewhere") {
    const ModelConfig c = sized_config(64, 128, 1, 2, 1, 64, 32);  // head_dim 64, MQA
    const xb::Batch b =
        xb::batch_at(xb::token_stream(c.vocab_size, 4096, 9), 0, xb::kTrainB, xb::kTrainT);
    test::for_each_test_device([&](Device& dev) {
        ProfilingDevice prof(dev);
        Model m(prof, c);
        m.set_precision(Precision::bf16);
        m.init_weights(5);
        const double plain = loss_of(m, b).ce;
        CHECK_FALSE(m.attention16());
        m.set_attention16(true);
        CHECK(m.attention16());
        prof.reset();
        const double a16 = loss_of(m, b).ce;
        AttnDims d{xb::kTrainB, xb::kTrainT, xb::kTrainT, xb::kTrainT, 2, 1, 64};
        d.compute = DType::bf16;
        const std::string variant = dev.attention_kernel(d);
        bool booked = false;
        for (const OpProfile& p : prof.table())
            booked = booked ||
                     p.op == (variant.empty() ? "attention_fwd" : "attention_fwd[" + variant + "]");
        CHECK(booked);
        if (variant == "wmma" || variant == "cudnn") {
            CHECK(a16 != plain);
            CHECK(std::abs(a16 - plain) / plain < 1e-2);
        } else {
            CHECK(a16 == plain);
        }
        m.set_attention16(false);
        CHECK(loss_of(m, b).ce == plain);
    });
}

// Checkpoints of the 8-bit AdamW optimizer: optimizer.safetensors holds the u8 codes and f32
// block absmax of each parameter range exactly (docs/CHECKPOINTS.md), so a resumed run is
// bit-identical to the uninterrupted one (cpu), and a cpu checkpoint resumes on opencl with
// the very same optimizer state; mismatched optimizers, a foreign layout, missing tensors and
// corrupt absmax values are refused in one line without touching the trainer.
#include <doctest/doctest.h>

#include <functional>
#include <map>
#include <memory>
#include <random>

#include "io/checkpoint_tensors.h"
#include "moetrain/backend.h"
#include "moetrain/checkpoint.h"
#include "moetrain/safetensors.h"
#include "moetrain/train.h"
#include "checkpoint_run.h"
#include "op_test_util.h"
#include "test_checkpoint_util.h"

using namespace moetrain;
using namespace moetrain::testing;

namespace {

TrainOptions adamw8bit_options() {
    TrainOptions o;
    o.optimizer = OptimizerKind::adamw8bit;
    o.lr = 1e-2;
    o.total_steps = 10;
    o.warmup = 2;
    return o;
}

// A TrainedRun of the tiny preset; state() is the optimizer state on the host, range by range.
struct Run8 : TrainedRun {
    Run8(Device& dev, const TrainOptions& o, uint64_t seed, int steps)
        : TrainedRun(dev, preset_config("tiny"), o, seed, steps) {}
    std::vector<io::QuantizedHost> state() const {
        return io::download_quantized(model.device(), trainer.quantized_moments());
    }
};

bool same_state(const std::vector<io::QuantizedHost>& a, const std::vector<io::QuantizedHost>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].range != b[i].range || a[i].m_codes != b[i].m_codes ||
            a[i].v_codes != b[i].v_codes || a[i].m_absmax != b[i].m_absmax ||
            a[i].v_absmax != b[i].v_absmax)
            return false;
    return true;
}

TrainState sample_state() {
    TrainState st;
    st.batch = kB;
    st.seq = kT;
    st.data_path = "corpus.txt";
    return st;
}

using Meta = std::map<std::string, std::string>;

// Rewrites <dir>/optimizer.safetensors from `state` and `meta` after `edit` changed them.
void write_optimizer(const std::string& dir, std::vector<io::QuantizedHost> state, Meta meta,
                     const std::function<void(std::vector<io::QuantizedHost>&, Meta&)>& edit) {
    edit(state, meta);
    SafetensorsWriter w;
    io::add_quantized_tensors(w, state);
    for (const auto& [k, v] : meta)
        if (k != kSafetensorsChecksumKey) w.set_metadata(k, v);
    w.add_checksums();  // consistent checksums: the checks behind them are what is tested
    w.write(dir + "/optimizer.safetensors");
    reseal_checkpoint(dir);
}

}  // namespace

TEST_CASE("checkpoint: adamw8bit state round trip is exact and the resume bit-identical") {
    auto dev = open_device("cpu");
    TempDir tmp;
    const std::string ck = tmp.file(step_dir_name(3));
    Run8 a(*dev, adamw8bit_options(), 1, 3);
    save_checkpoint(ck, a.model, &a.trainer, sample_state());

    // The file: codes U8 [n] and absmax F32 [ceil(n/256)] per range, and what they belong to.
    SafetensorsFile of(ck + "/optimizer.safetensors");
    CHECK(of.metadata_at("optimizer") == "adamw8bit");
    CHECK(of.metadata_at("block_size") == "256");
    CHECK(of.metadata_at("layout") == io::flat_layout(a.model.params()));
    CHECK(of.tensors().size() == 8);
    uint64_t data_bytes = 0;
    for (const QuantizedMoments& q : a.trainer.quantized_moments()) {
        const SafetensorsEntry* codes = of.find("v_codes." + q.range);
        const SafetensorsEntry* absmax = of.find("m_absmax." + q.range);
        REQUIRE(codes);
        REQUIRE(absmax);
        CHECK(codes->dtype == DType::u8);
        CHECK(codes->shape == std::vector<int64_t>{q.n});
        CHECK(absmax->dtype == DType::f32);
        CHECK(absmax->shape == std::vector<int64_t>{(q.n + 255) / 256});
    }
    for (const SafetensorsEntry& e : of.tensors()) data_bytes += e.end - e.begin;
    const int64_t n = a.model.num_params();
    MESSAGE("tiny adamw8bit optimizer.safetensors data: "
            << data_bytes << " bytes for " << n << " parameters (fp32 AdamW: " << 8 * n << ")");
    CHECK(data_bytes <= static_cast<uint64_t>(2 * n + 8 * (n / 256 + 2)));
    const CheckpointInfo info = read_checkpoint_info(ck);
    CHECK(info.optimizer == OptimizerState::adamw8bit);
    CHECK(info.state.options.optimizer == OptimizerKind::adamw8bit);
    CHECK(slurp(ck + "/state.json").find("\"adamw8bit_moments\"") != std::string::npos);

    // Loading restores every byte of the state; the next steps match the uninterrupted run.
    Run8 b(*dev, adamw8bit_options(), 99, 0);
    load_weights(ck, b.model);
    load_optimizer(ck, b.trainer);
    CHECK(b.trainer.steps_done() == 3);
    CHECK(same_state(b.state(), a.state()));
    for (uint32_t s = 3; s < 6; ++s) CHECK(b.step(s) == a.step(s));
    CHECK(b.weights() == a.weights());
    CHECK(same_state(b.state(), a.state()));
}

TEST_CASE("checkpoint: adamw8bit load errors are one line and leave the trainer untouched") {
    auto dev = open_device("cpu");
    TempDir tmp;
    const std::string ck = tmp.file("ck"), ck32 = tmp.file("ck32");
    Run8 a(*dev, adamw8bit_options(), 1, 2);
    save_checkpoint(ck, a.model, &a.trainer, sample_state());
    TrainOptions fp32 = adamw8bit_options();
    fp32.optimizer = OptimizerKind::adamw;
    Run8 a32(*dev, fp32, 1, 1);
    save_checkpoint(ck32, a32.model, &a32.trainer, sample_state());

    Run8 b(*dev, adamw8bit_options(), 5, 1);
    const auto before = b.state();
    CHECK(error_of([&] {
              load_optimizer(ck, a32.trainer);
          }).find("was trained with adamw8bit, the trainer uses adamw") != std::string::npos);
    CHECK(error_of([&] {
              load_optimizer(ck32, b.trainer);
          }).find("was trained with adamw, the trainer uses adamw8bit") != std::string::npos);

    const auto expect = [&](const std::string& what, const std::string& message) {
        CAPTURE(what);
        const std::string e = error_of([&] { load_optimizer(ck, b.trainer); });
        CHECK(e.find(message) != std::string::npos);
        CHECK(e.find('\n') == std::string::npos);
        CHECK(same_state(b.state(), before));
        CHECK(b.trainer.steps_done() == 1);
    };
    const auto state = a.state();
    const Meta meta = SafetensorsFile(ck + "/optimizer.safetensors").metadata();
    write_optimizer(ck, state, meta, [](auto& s, Meta&) { s[1].v_absmax[0] = -1.0f; });
    expect("negative absmax", "\"v_absmax.no_decay\" holds -1 at block 0 (corrupt file)");
    write_optimizer(ck, state, meta, [](auto& s, Meta&) { s[0].m_absmax.back() = NAN; });
    expect("NaN absmax", "\"m_absmax.decay\" holds nan");
    write_optimizer(ck, state, meta, [](auto& s, Meta&) { s.pop_back(); });
    expect("missing range", "missing tensor \"m_codes.no_decay\"");
    write_optimizer(ck, state, meta, [](auto& s, Meta&) {
        s[0].m_codes.pop_back();
        s[0].v_codes.pop_back();
    });
    expect("short codes", "tensor \"m_codes.decay\" has shape");
    write_optimizer(ck, state, meta, [](auto& s, Meta&) {
        io::QuantizedHost extra = s[0];
        extra.range = "x";
        s.push_back(extra);
    });
    expect("extra tensor", "unexpected tensor \"m_codes.x\"");
    write_optimizer(ck, state, meta, [](auto&, Meta& m) { m["layout"] = "w:0:1"; });
    expect("foreign layout", "metadata \"layout\" does not match this trainer");
    write_optimizer(ck, state, meta, [](auto&, Meta& m) { m["block_size"] = "128"; });
    expect("block size", "metadata \"block_size\" does not match this trainer (128)");
    write_optimizer(ck, state, meta, [](auto&, Meta& m) { m.erase("optimizer"); });
    expect("no optimizer metadata", "metadata has no \"optimizer\"");

    write_optimizer(ck, state, meta, [](auto&, Meta&) {});  // intact again: loads
    load_optimizer(ck, b.trainer);
    CHECK(same_state(b.state(), state));
}

TEST_CASE("checkpoint: adamw8bit checkpoint from cpu resumes on opencl with the same state") {
    Device* cl = nullptr;
    for (auto& d : test::test_devices())
        if (d.dev->backend_name() == "opencl") cl = d.dev.get();
    if (!cl) {
        MESSAGE("no opencl device: cross-backend adamw8bit resume not run");
        return;
    }
    auto cpu = open_device("cpu");
    TempDir tmp;
    Run8 a(*cpu, adamw8bit_options(), 1, 2);
    save_checkpoint(tmp.file("ck"), a.model, &a.trainer, sample_state());
    Run8 b(*cl, adamw8bit_options(), 9, 0);
    load_weights(tmp.file("ck"), b.model);
    load_optimizer(tmp.file("ck"), b.trainer);
    CHECK(same_state(b.state(), a.state()));
    const double la = a.step(2), lb = b.step(2);
    CHECK(lb == doctest::Approx(la).epsilon(1e-5));
    // Gradients differ in the last bits between backends; the state stays close: the codes of
    // the two runs agree almost everywhere.
    const auto sa = a.state(), sb = b.state();
    int64_t differ = 0, total = 0;
    for (size_t r = 0; r < sa.size(); ++r)
        for (size_t i = 0; i < sa[r].m_codes.size(); ++i, ++total)
            differ +=
                (sa[r].m_codes[i] != sb[r].m_codes[i]) + (sa[r].v_codes[i] != sb[r].v_codes[i]);
    MESSAGE("cpu vs opencl after one resumed step: " << differ << " of " << 2 * total
                                                     << " codes differ");
    CHECK(differ * 100 < 2 * total);
}

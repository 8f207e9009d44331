// Device::run_recorded: the run modes a backend reports for repeated calls of one key (cpu /
// opencl: always eager; cuda and the cudasim test module: eager twice, captured, then replayed
// without running the record), and a record that breaks the rules (downloads) still doing its
// work exactly once per call.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "op_test_util.h"

using namespace moetrain;

TEST_CASE("ops: run_recorded replays the same work, and falls back when it cannot capture") {
    for (auto& d : test::test_devices()) {
        CAPTURE(d.id);
        Device& dev = *d.dev;
        const int64_t n = 37;
        std::vector<float> xs(n);
        for (int64_t i = 0; i < n; ++i) xs[static_cast<size_t>(i)] = static_cast<float>(i) - 3.0f;
        Tensor x = dev.alloc(DType::f32, {n}), y = dev.alloc(DType::f32, {n});
        dev.upload(x, xs.data());
        const std::string key =
            "test y += x " + std::to_string(reinterpret_cast<uintptr_t>(y.buf.get()));
        std::vector<StepRun> runs;
        runs.reserve(5);
        for (int i = 0; i < 5; ++i)
            runs.push_back(dev.run_recorded(key, [&] { dev.axpby(y, 1.0f, x, 1.0f, n); }));
        std::vector<float> ys(n);
        dev.download(ys.data(), y);
        for (int64_t i = 0; i < n; ++i)
            CHECK(ys[static_cast<size_t>(i)] == 5 * xs[static_cast<size_t>(i)]);
        if (test::records_graphs(dev))
            CHECK(runs == std::vector<StepRun>{StepRun::eager, StepRun::eager, StepRun::captured,
                                               StepRun::replayed, StepRun::replayed});
        else
            CHECK(runs == std::vector<StepRun>(5, StepRun::eager));

        // A record that downloads cannot be captured: every call still does its work once.
        float seen = 0;
        for (int i = 0; i < 4; ++i) {
            const StepRun r = dev.run_recorded(key + " with download", [&] {
                dev.axpby(y, 1.0f, x, 1.0f, n);
                dev.download(&seen, y.view(4, {1}));
            });
            CHECK(r == StepRun::eager);
        }
        CHECK(seen == 9 * xs[4]);
        dev.download(ys.data(), y);
        for (int64_t i = 0; i < n; ++i)
            CHECK(ys[static_cast<size_t>(i)] == 9 * xs[static_cast<size_t>(i)]);
    }
}

TEST_CASE("ops: run_recorded graphs keep their op scratch when a later op needs more") {
    for (auto& d : test::test_devices()) {
        CAPTURE(d.id);
        Device& dev = *d.dev;
        const int64_t n = 1000;
        Tensor x = dev.alloc(DType::f32, {4 * n + 1});
        const std::string key =
            "test scratch " + std::to_string(reinterpret_cast<uintptr_t>(x.buf.get()));
        // An overlapping copy goes through the backend's op scratch (n floats).
        auto shift = [&] { dev.copy(x.view(1, {n}), x.view(0, {n})); };
        for (int i = 0; i < 3; ++i) dev.run_recorded(key, shift);  // captured on cuda
        // A larger overlapping copy outside the graph grows the scratch; then a new buffer of
        // the old scratch's size is allocated and filled.
        dev.copy(x.view(1, {4 * n}), x.view(0, {4 * n}));
        Tensor victim = dev.alloc(DType::f32, {n});
        dev.fill(victim, 7.0f);
        dev.run_recorded(key, shift);  // replays the graph: must not write into `victim`
        std::vector<float> v(n);
        dev.download(v.data(), victim);
        int64_t changed = 0;
        for (float f : v) changed += f != 7.0f;
        CHECK(changed == 0);
    }
}

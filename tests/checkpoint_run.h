// The subject of the checkpoint save / load / resume tests: a model and its trainer after some
// optimizer steps on reproducible random batches, on a given device or on a cpu device of its
// own.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "moetrain/backend.h"
#include "moetrain/model.h"
#include "moetrain/train.h"

namespace moetrain::testing {

constexpr int kB = 2, kT = 16;  // the batch and sequence length of every step

// A model + trainer on `dev` after `steps` optimizer steps on batches 0..steps-1; batch s holds
// kB x kT token ids and targets below 256 drawn from mt19937(s).
struct TrainedRun {
    Model model;
    Trainer trainer;
    TrainedRun(Device& dev, const ModelConfig& c, const TrainOptions& o, uint64_t seed, int steps)
        : model(dev, c), trainer(model, o) {
        model.init_weights(seed);
        for (int s = 0; s < steps; ++s) step(static_cast<uint32_t>(s));
    }
    double step(uint32_t batch) {
        std::mt19937 rng(batch);
        std::vector<int32_t> x, y;
        for (int i = 0; i < kB * kT; ++i) {
            x.push_back(static_cast<int32_t>(rng() % 256));
            y.push_back(static_cast<int32_t>(rng() % 256));
        }
        return trainer.step(x.data(), y.data(), kB, kT).loss.loss;
    }
    std::vector<float> weights() const { return model.get_flat(model.params_flat()); }
};

// The cpu device a CpuRun owns, made before its model.
struct OwnCpuDevice {
    std::unique_ptr<Device> dev = open_device("cpu");
};

// A TrainedRun on a cpu device of its own.
struct CpuRun : OwnCpuDevice, TrainedRun {
    CpuRun(const ModelConfig& c, const TrainOptions& o, uint64_t seed, int steps)
        : TrainedRun(*dev, c, o, seed, steps) {}
};

}  // namespace moetrain::testing

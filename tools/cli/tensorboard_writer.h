// TensorBoard event files (`train --tensorboard DIR`): TFRecord records (length, masked
// CRC-32C of the length, payload, masked CRC-32C of the payload) holding hand-encoded
// tensorflow.Event protobufs whose Summary carries simple (float) values. Read back by the
// tensorboard package's own reader in tests/cli/tensorboard_tests.py.
#pragma once

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace moetrain::cli {

class TensorBoardWriter {
  public:
    // Creates DIR and a new events.out.tfevents.<time>.<host>.<pid> file in it (a resumed run
    // adds a file; TensorBoard reads every file of the directory).
    explicit TensorBoardWriter(const std::string& dir);
    // One Event at `step` whose Summary holds every (tag, value) as a simple value.
    void scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values);
    // The scalars of one --log-json step record: train/{loss,ce,aux,z,lr,grad_norm,
    // tokens_per_s,loss_scale} and, for MoE models, expert_load/layer_L/{min_share,max_share,
    // empty_experts,dropped,bias_min,bias_max}.
    void step_record(const nlohmann::json& step);
    // An evaluation record: <split>/{loss,ce,aux,z}.
    void eval_record(const nlohmann::json& eval);
    const std::string& path() const { return path_; }

  private:
    void write_event(const std::string& event);
    std::string path_;
    std::ofstream out_;
};

}  // namespace moetrain::cli

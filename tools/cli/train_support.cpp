// Evaluation, progress output and config comparison for the training CLI.
#include "train_support.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "common.h"
#include "moetrain/data.h"

namespace moetrain::cli {

Evaluator::Evaluator(Model& model, TokenStream tokens, int batch, int seq, int batches,
                     std::function<int()> stop)
    : model_(model),
      tokens_(std::move(tokens)),
      batch_(batch),
      seq_(seq),
      batches_(batches),
      stop_(std::move(stop)) {}

LossStats Evaluator::run() {
    BatchLoader loader(tokens_, batch_, seq_, "val");
    const int64_t n = static_cast<int64_t>(batch_) * seq_;
    std::vector<int32_t> x(n), y(n);
    LossStats mean;
    for (int i = 0; i < batches_; ++i) {
        if (const int sig = stop_(); sig != 0)
            throw Stopped(sig, "during the evaluation (batch " + std::to_string(i + 1) + " of " +
                                   std::to_string(batches_) + ")");
        loader.next(x.data(), y.data());
        LossStats s = model_.forward_loss(x.data(), y.data(), batch_, seq_);
        mean.ce += s.ce / batches_;
        mean.aux += s.aux / batches_;
        mean.z += s.z / batches_;
        mean.loss += s.loss / batches_;
        mean.tokens += s.tokens;
    }
    return mean;
}

nlohmann::json evaluation_json(const LossStats& s, int64_t step, const std::string& split,
                               int batches) {
    nlohmann::json e;
    e["split"] = split;
    e["batches"] = batches;
    e["ce"] = s.ce;
    e["aux"] = s.aux;
    e["z"] = s.z;
    e["loss"] = s.loss;
    e["tokens"] = s.tokens;
    nlohmann::json j;
    j["step"] = step;
    j["eval"] = e;
    return j;
}

ProgressPrinter::ProgressPrinter(int64_t total_steps, int64_t start_step, int64_t tokens_per_step,
                                 bool quiet)
    : total_(total_steps), start_(start_step), tokens_per_step_(tokens_per_step), quiet_(quiet) {
    t0_ = last_ = std::chrono::steady_clock::now();
    last_step_ = start_step;
}

nlohmann::json ProgressPrinter::step(const StepStats& s, const std::vector<ExpertLoad>& load) {
    auto now = std::chrono::steady_clock::now();
    double elapsed = std::chrono::duration<double>(now - t0_).count();
    double dt = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    last_loss_ = s.loss.loss;
    last_step_ = s.step;
    double tps = dt > 0 ? tokens_per_step_ / dt : 0;
    int64_t done = s.step - start_;
    double eta = done > 0 ? elapsed / done * (total_ - s.step) : 0;

    nlohmann::json j;
    j["step"] = s.step;
    j["total"] = total_;
    j["loss"] = s.loss.loss;
    j["ce"] = s.loss.ce;
    j["aux"] = s.loss.aux;
    j["z"] = s.loss.z;
    j["lr"] = s.lr;
    j["grad_norm"] = s.grad_norm;
    j["tokens_per_s"] = tps;
    j["elapsed_s"] = elapsed;
    j["eta_s"] = eta;
    j["loss_scale"] = s.loss_scale;
    j["tokens_seen"] = s.step * tokens_per_step_;
    if (s.skipped) {  // fp16 overflow: logged always, even with --quiet
        j["skipped"] = true;
        std::printf(
            "step %lld skipped: fp16 gradients overflowed at loss scale %g (now %g); "
            "no update applied\n",
            static_cast<long long>(s.step) + 1, s.loss_scale, s.loss_scale / 2);
        return j;
    }
    std::string load_text;
    if (!load.empty()) {
        nlohmann::json layers = nlohmann::json::array();
        for (const auto& l : load) {
            int64_t total = 0;
            for (int32_t c : l.counts) total += c;
            auto [mn, mx] = std::minmax_element(l.counts.begin(), l.counts.end());
            int empty = static_cast<int>(std::count(l.counts.begin(), l.counts.end(), 0));
            double smin = total ? static_cast<double>(*mn) / total : 0;
            double smax = total ? static_cast<double>(*mx) / total : 0;
            // MODEL.md 2: the share of selections a capacity dropped, the expert bias range.
            const double dropped = total ? static_cast<double>(l.dropped) / total : 0;
            layers.push_back({{"layer", l.layer},
                              {"min_share", smin},
                              {"max_share", smax},
                              {"empty", empty},
                              {"counts", l.counts},
                              {"dropped", dropped},
                              {"bias_min", l.bias_min},
                              {"bias_max", l.bias_max}});
            char buf[160];
            int len =
                std::snprintf(buf, sizeof buf, " L%d %.3f/%.3f/%d", l.layer, smin, smax, empty);
            if (l.dropped > 0)
                len += std::snprintf(buf + len, sizeof buf - static_cast<size_t>(len),
                                     " dropped %.3f", dropped);
            if (l.bias_min != 0 || l.bias_max != 0)
                std::snprintf(buf + len, sizeof buf - static_cast<size_t>(len), " bias %.4g..%.4g",
                              l.bias_min, l.bias_max);
            load_text += buf;
        }
        j["expert_load"] = layers;
    }
    if (!quiet_) {
        std::printf(
            "step %lld/%lld | loss %.4f | ce %.4f | aux %.4f | z %.5f | lr %.2e | "
            "gnorm %.3f | %.0f tok/s | %s elapsed | ETA %s\n",
            static_cast<long long>(s.step), static_cast<long long>(total_), s.loss.loss, s.loss.ce,
            s.loss.aux, s.loss.z, s.lr, s.grad_norm, tps, format_duration(elapsed).c_str(),
            format_duration(eta).c_str());
        if (!load_text.empty())
            std::printf("  expert load min/max share/empty:%s\n", load_text.c_str());
    }
    return j;
}

void ProgressPrinter::finish() {
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    std::printf("done: step %lld, loss %.4f, %s\n", static_cast<long long>(last_step_), last_loss_,
                format_duration(elapsed).c_str());
}

std::string describe_config_difference(const ModelConfig& have, const ModelConfig& want) {
    auto a = nlohmann::json::parse(config_to_json(have));
    auto b = nlohmann::json::parse(config_to_json(want));
    auto patch = nlohmann::json::diff(a, b);
    if (patch.empty()) return "identical";
    std::string path = patch[0].value("path", "");
    std::string key = path.empty() ? "?" : path.substr(1);
    std::replace(key.begin(), key.end(), '/', '.');
    nlohmann::json::json_pointer ptr(path);
    std::string va = a.contains(ptr) ? a.at(ptr).dump() : "absent";
    std::string vb = b.contains(ptr) ? b.at(ptr).dump() : "absent";
    return "\"" + key + "\" is " + va + " in the checkpoint but " + vb + " requested";
}

}  // namespace moetrain::cli

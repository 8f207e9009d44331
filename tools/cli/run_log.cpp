// Reading a --log-json file back (moetrain report).
#include "run_log.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "moetrain/error.h"

namespace moetrain::cli {

namespace {
LoggedStep parse_step(const nlohmann::json& j) {
    LoggedStep s;
    s.step = j.at("step").get<int64_t>();
    s.loss = j.at("loss").get<double>();
    s.ce = j.value("ce", 0.0);
    s.aux = j.value("aux", 0.0);
    s.z = j.value("z", 0.0);
    s.lr = j.value("lr", 0.0);
    s.grad_norm = j.value("grad_norm", 0.0);
    s.tokens_per_s = j.value("tokens_per_s", 0.0);
    s.loss_scale = j.value("loss_scale", 1.0);
    s.tokens_seen = j.value("tokens_seen", int64_t{-1});
    s.skipped = j.value("skipped", false);
    if (j.contains("expert_load"))
        for (const auto& l : j.at("expert_load")) {
            LoggedLayerLoad ll;
            ll.layer = l.at("layer").get<int>();
            ll.min_share = l.at("min_share").get<double>();
            ll.max_share = l.at("max_share").get<double>();
            ll.empty = l.at("empty").get<int>();
            if (l.contains("counts")) ll.counts = l.at("counts").get<std::vector<int64_t>>();
            ll.dropped = l.value("dropped", 0.0);
            ll.bias_min = l.value("bias_min", 0.0);
            ll.bias_max = l.value("bias_max", 0.0);
            s.expert_load.push_back(std::move(ll));
        }
    return s;
}
}  // namespace

RunLog read_run_log(const std::string& path) {
    std::ifstream in(path);
    MT_CHECK(in.good(), "cannot read the training log ", path);
    std::map<int64_t, LoggedStep> steps;
    std::map<std::pair<int64_t, std::string>, LoggedEval> evals;
    std::string line;
    for (int64_t n = 1; std::getline(in, line); ++n) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        try {
            nlohmann::json j = nlohmann::json::parse(line);
            if (j.contains("eval")) {
                const auto& e = j.at("eval");
                LoggedEval ev{j.at("step").get<int64_t>(), e.value("split", std::string("val")),
                              e.at("loss").get<double>(), e.value("ce", 0.0)};
                evals[{ev.step, ev.split}] = ev;
            } else {
                LoggedStep s = parse_step(j);
                if (!s.skipped) steps[s.step] = std::move(s);
            }
        } catch (const nlohmann::json::exception& e) {
            fail(path, " line ", n, " is not a --log-json record (", e.what(), ")");
        }
    }
    RunLog log;
    for (auto& [k, s] : steps) log.steps.push_back(std::move(s));
    for (auto& [k, e] : evals) log.evals.push_back(std::move(e));
    MT_CHECK(!log.steps.empty(), path, " holds no training steps");
    return log;
}

}  // namespace moetrain::cli

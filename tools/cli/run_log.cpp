// Reading a --log-json file back (moetrain report).
#include "run_log.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "io/file.h"
#include "moetrain/error.h"

namespace moetrain::cli {

namespace {

// The lines of a --log-json file, read in 1 MiB pieces through the bounded reader; a line
// longer than any record (a log with no newlines, or not a log at all) is refused.
class LogLines {
  public:
    explicit LogLines(const std::string& path) : in_(path, io::kRunLogFile) {}
    bool next(std::string& line) {
        for (;;) {
            const size_t nl = buf_.find('\n', std::max(at_, scanned_));
            if (nl != std::string::npos) {
                line.assign(buf_, at_, nl - at_);
                at_ = scanned_ = nl + 1;
                ++lines_;
                return true;
            }
            buf_.erase(0, at_);
            at_ = 0;
            scanned_ = buf_.size();  // holds no newline
            if (buf_.size() > kMaxLine)
                in_.fail_read("line " + std::to_string(lines_ + 1) + " is longer than " +
                              std::to_string(kMaxLine >> 20) + " MiB: not a --log-json file");
            const size_t old = buf_.size();
            buf_.resize(old + kPiece);
            buf_.resize(old + in_.read_next(buf_.data() + old, kPiece));
            if (buf_.size() == old) {  // end of file: the last line may lack its newline
                if (buf_.empty()) return false;
                line.swap(buf_);
                buf_.clear();
                ++lines_;
                return true;
            }
        }
    }

  private:
    static constexpr size_t kPiece = size_t{1} << 20, kMaxLine = size_t{64} << 20;
    io::InputFile in_;
    std::string buf_;
    size_t at_ = 0, scanned_ = 0;
    int64_t lines_ = 0;
};

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
    LogLines in(path);
    std::map<int64_t, LoggedStep> steps;
    std::map<std::pair<int64_t, std::string>, LoggedEval> evals;
    std::string line;
    for (int64_t n = 1; in.next(line); ++n) {
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

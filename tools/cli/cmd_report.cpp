// `moetrain report RUNDIR --out report.html`: one self-contained HTML page (inline SVG, no
// script, no network) with the run's loss against steps and tokens, lr, gradient norm,
// throughput and, for MoE models, a heatmap per layer of each expert's share of the routed
// rows over the steps, so that a collapsing router shows at a glance.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "commands.h"
#include "io/file.h"
#include "common.h"
#include "moetrain/checkpoint.h"
#include "moetrain/model.h"
#include "run_guards.h"
#include "run_log.h"
#include "svg_plot.h"

namespace moetrain::cli {
namespace {

struct ReportArgs {
    std::string run_dir, out, log;
};

constexpr const char* kTrain = "#1f77b4";
constexpr const char* kVal = "#d62728";
constexpr int kMaxColumns = 240;  // heatmap columns; longer runs average steps into bins

std::string fmt(const char* f, double v) {
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return b;
}

// Each expert's share of layer `li`'s routed rows per step, averaged into at most
// kMaxColumns bins of consecutive steps.
Heatmap expert_heatmap(const RunLog& log, size_t li) {
    Heatmap h;
    const LoggedLayerLoad& first = log.steps.front().expert_load[li];
    const bool counts = !first.counts.empty();
    const size_t rows = counts ? first.counts.size() : 2;
    h.title = "Expert load, layer " + std::to_string(first.layer);
    h.x_label = "step";
    h.y_label = counts ? "expert" : "";
    for (size_t e = 0; e < rows; ++e)
        h.row_names.push_back(counts ? std::to_string(e) : (e == 0 ? "max share" : "min share"));
    const size_t n = log.steps.size();
    const size_t cols = std::min<size_t>(n, kMaxColumns);
    h.values.assign(rows, std::vector<double>(cols, 0.0));
    std::vector<int> in_bin(cols, 0);
    std::vector<double> x(cols, 0.0);
    for (size_t i = 0; i < n; ++i) {
        const size_t c = i * cols / n;
        const LoggedLayerLoad& l = log.steps[i].expert_load[li];
        x[c] += static_cast<double>(log.steps[i].step);
        ++in_bin[c];
        if (!counts) {
            h.values[0][c] += l.max_share;
            h.values[1][c] += l.min_share;
            continue;
        }
        int64_t total = 0;
        for (int64_t v : l.counts) total += v;
        for (size_t e = 0; e < rows && e < l.counts.size(); ++e)
            h.values[e][c] += total ? static_cast<double>(l.counts[e]) / total : 0.0;
    }
    for (size_t c = 0; c < cols; ++c) {
        h.column_x.push_back(x[c] / std::max(1, in_bin[c]));
        for (size_t r = 0; r < rows; ++r) h.values[r][c] /= std::max(1, in_bin[c]);
    }
    // Uniform routing is 1/E; the scale saturates at 3/E so that both a starved expert
    // (white) and one taking most rows (dark red) stand out.
    h.vmax = counts ? std::min(1.0, 3.0 / static_cast<double>(rows)) : 1.0;
    h.value_label = "share of rows";
    return h;
}

std::string page(const std::string& title, const std::string& summary,
                 const std::vector<std::string>& figures, const std::string& note) {
    std::string o =
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        "<link rel=\"icon\" href=\"data:,\">"
        "<title>" +
        xml_escape(title) +
        "</title><style>"
        "body{font-family:system-ui,sans-serif;margin:24px;color:#222;background:#f6f6f6}"
        "h1{font-size:20px;margin:0 0 8px}table{border-collapse:collapse;margin:8px 0 16px}"
        "td{padding:2px 12px 2px 0;font-size:14px}td:first-child{color:#666}"
        ".grid-wrap{display:flex;flex-wrap:wrap;gap:12px}"
        ".fig{background:#fff;border:1px solid #ddd;padding:4px}"
        ".title{font-size:14px;font-weight:600}.label{font-size:12px;fill:#444}"
        ".tick{font-size:10px;fill:#555}.legend{font-size:11px}"
        "line.grid{stroke:#eee}p.note{font-size:13px;color:#666}"
        "</style></head><body>\n<h1>" +
        xml_escape(title) + "</h1>\n" + summary + "\n<div class=\"grid-wrap\">\n";
    for (const std::string& f : figures) o += "<div class=\"fig\">" + f + "</div>\n";
    o += "</div>\n";
    if (!note.empty()) o += "<p class=\"note\">" + xml_escape(note) + "</p>\n";
    return o + "</body></html>\n";
}

void run_report(const ReportArgs& a) {
    stop_cooperatively();  // bounded work: a stop takes effect once --out is complete
    namespace fs = std::filesystem;
    std::error_code ec;
    MT_CHECK(fs::is_directory(a.run_dir, ec), "run directory ", a.run_dir, " does not exist");
    const std::string log_path =
        a.log.empty() ? (fs::path(a.run_dir) / "log.jsonl").string() : a.log;
    MT_CHECK(fs::exists(log_path, ec), "no training log ", log_path, " (train with --log-json ",
             log_path, ", or name the log with --log)");
    // The checkpoint read below and the log are inputs: --out may be neither, nor lie inside
    // a checkpoint (guard_output), and is resolved before it is checked.
    std::string ckpt_dir;
    try {
        ckpt_dir = resolve_checkpoint(a.run_dir);
    } catch (const Error&) {
        ckpt_dir.clear();  // a log without checkpoints still makes a report
    }
    const std::string out_path = guard_output(
        {"--out", a.out}, {{"--log", log_path}, {"checkpoint", ckpt_dir}}, OutputKind::file);
    RunLog log = read_run_log(log_path);

    // The newest checkpoint, when there is one, gives the model and the tokens per step.
    std::optional<CheckpointInfo> ck;
    try {
        if (!ckpt_dir.empty()) ck = read_checkpoint_info(ckpt_dir);
    } catch (const Error&) {
        ck.reset();  // a damaged checkpoint: the report is made from the log alone
    }
    int64_t tokens_per_step = 0;
    if (ck)
        tokens_per_step =
            static_cast<int64_t>(ck->state.batch) * ck->state.seq * ck->state.options.accum;

    Series train_loss{"train loss", kTrain, {}, {}, false},
        val_loss{"val loss", kVal, {}, {}, true};
    Series train_tok = train_loss, val_tok = val_loss;
    Series lr{"lr", kTrain, {}, {}, false}, gnorm{"grad norm", kTrain, {}, {}, false};
    Series tps{"tokens/s", kTrain, {}, {}, false};
    auto tokens_at = [&](int64_t step, int64_t logged) -> double {
        if (logged >= 0) return static_cast<double>(logged);
        return tokens_per_step > 0 ? static_cast<double>(step * tokens_per_step) : NAN;
    };
    for (const LoggedStep& s : log.steps) {
        const double x = static_cast<double>(s.step);
        train_loss.x.push_back(x);
        train_loss.y.push_back(s.loss);
        train_tok.x.push_back(tokens_at(s.step, s.tokens_seen));
        train_tok.y.push_back(s.loss);
        lr.x.push_back(x);
        lr.y.push_back(s.lr);
        gnorm.x.push_back(x);
        gnorm.y.push_back(s.grad_norm);
        if (s.step > log.steps.front().step) {  // the first step's rate includes warm-up
            tps.x.push_back(x);
            tps.y.push_back(s.tokens_per_s);
        }
    }
    auto step_tokens = [&](int64_t step) {
        auto it = std::find_if(log.steps.begin(), log.steps.end(),
                               [&](const LoggedStep& s) { return s.step == step; });
        return tokens_at(step, it != log.steps.end() ? it->tokens_seen : -1);
    };
    for (const LoggedEval& e : log.evals) {
        val_loss.x.push_back(static_cast<double>(e.step));
        val_loss.y.push_back(e.loss);
        val_tok.x.push_back(step_tokens(e.step));
        val_tok.y.push_back(e.loss);
    }
    std::vector<std::string> figures;
    figures.push_back(
        render_line_plot({"Loss", "step", "loss (nats/token)", {train_loss, val_loss}}));
    const bool have_tokens = std::isfinite(train_tok.x.back());
    if (have_tokens)
        figures.push_back(render_line_plot(
            {"Loss against tokens seen", "tokens", "loss (nats/token)", {train_tok, val_tok}}));
    figures.push_back(render_line_plot({"Learning rate", "step", "lr", {lr}}));
    figures.push_back(
        render_line_plot({"Gradient norm (before clipping)", "step", "global norm", {gnorm}}));
    figures.push_back(render_line_plot({"Throughput", "step", "tokens/s", {tps}}));
    const size_t moe_layers = log.steps.front().expert_load.size();
    bool consistent = true;
    for (const LoggedStep& s : log.steps)
        consistent = consistent && s.expert_load.size() == moe_layers;
    if (consistent)
        for (size_t li = 0; li < moe_layers; ++li)
            figures.push_back(render_heatmap(expert_heatmap(log, li)));

    // Summary table.
    const LoggedStep& last = log.steps.back();
    std::vector<double> rates = tps.y;
    std::sort(rates.begin(), rates.end());
    std::string rows;
    auto row = [&](const std::string& k, const std::string& v) {
        rows += "<tr><td>" + xml_escape(k) + "</td><td>" + xml_escape(v) + "</td></tr>";
    };
    row("run", a.run_dir);
    if (ck) {
        const ModelConfig& c = ck->config;
        row("model", fmt("%.2fM parameters", model_cost(c).total_params / 1e6) + ", " +
                         std::to_string(c.n_layers) + " layers, d_model " +
                         std::to_string(c.d_model) +
                         (c.moe ? ", " + std::to_string(c.moe->n_experts) + " experts top-" +
                                      std::to_string(c.moe->active_k())
                                : ", dense"));
        row("batch", "B=" + std::to_string(ck->state.batch) +
                         " T=" + std::to_string(ck->state.seq) +
                         " accum=" + std::to_string(ck->state.options.accum) + ", " +
                         optimizer_name(ck->state.options.optimizer) + ", " + ck->state.precision);
    }
    row("steps", std::to_string(log.steps.front().step) + " .. " + std::to_string(last.step));
    row("final train loss", fmt("%.4f", last.loss) + " (ce " + fmt("%.4f", last.ce) + ")");
    if (!log.evals.empty()) {
        auto best = std::min_element(
            log.evals.begin(), log.evals.end(),
            [](const LoggedEval& x, const LoggedEval& y) { return x.loss < y.loss; });
        row("last val loss", fmt("%.4f", log.evals.back().loss) + " at step " +
                                 std::to_string(log.evals.back().step));
        row("best val loss", fmt("%.4f", best->loss) + " at step " + std::to_string(best->step));
    }
    if (!rates.empty()) row("median throughput", fmt("%.0f tokens/s", rates[rates.size() / 2]));
    std::string note;
    if (!have_tokens)
        note =
            "Loss against tokens seen is left out: the log has no tokens_seen and the run "
            "directory no checkpoint to take B, T and accum from. ";
    if (moe_layers > 0 && log.steps.front().expert_load.front().counts.empty())
        note +=
            "This log has no per-expert counts; the heatmaps show each layer's min and max expert "
            "share.";
    const std::string html = page("moetrain run report: " + fs::path(a.run_dir).filename().string(),
                                  "<table>" + rows + "</table>", figures, note);

    io::write_file_atomic(out_path, html, "--out");
    std::printf("report: %s (%zu steps, %zu evaluations, %zu plots)\n", a.out.c_str(),
                log.steps.size(), log.evals.size(), figures.size());
}

}  // namespace

void add_report_command(CLI::App& app, int& exit_code) {
    const auto [a, cmd] =
        add_command<ReportArgs>(app, "report", "write an HTML report with plots of a training run");
    cmd->add_option("RUNDIR", a->run_dir, "run directory (train --out), holding log.jsonl")
        ->required();
    cmd->add_option("--out", a->out, "HTML file to write")->required();
    cmd->add_option("--log", a->log, "the run's --log-json file (default RUNDIR/log.jsonl)");
    on_run(cmd, exit_code, [a] { run_report(*a); });
}

}  // namespace moetrain::cli

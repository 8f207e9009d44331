// `moetrain generate`: sample text from a checkpoint with the KV cache; sampling runs on the
// device. The prompt is encoded and the sample decoded with the checkpoint's tokenizer (or
// --tokenizer). Text streams to stdout; with --json stdout holds only the object
// {"tokens":[...],"text":"..."}.
// Outputs longer than the model's max_seq_len slide the context window.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "number_options.h"
#include "moetrain/checkpoint.h"
#include "moetrain/data.h"
#include "moetrain/generate.h"
#include "moetrain/stop.h"
#include "saved_model.h"
#include "tokenizer_choice.h"

namespace moetrain::cli {
namespace {

struct GenerateArgs : SavedModelArgs {
    std::string prompt;
    int max_new = 0;
    double temperature = 1.0, top_p = 1.0;
    int top_k = 0;
    uint64_t seed = 1337;
    bool json = false;
};

void run_generate(const GenerateArgs& a) {
    std::string dir = resolve_checkpoint(a.checkpoint);
    CheckpointInfo info = read_checkpoint_info(dir);
    auto tok = checkpoint_or_given_tokenizer(a.tokenizer, a.tokenizer_given, info);
    check_tokenizer(*tok, a.tokenizer_given ? a.tokenizer.spec : info.state.tokenizer, info.config);
    {  // weights, one window of forward activations, and the KV cache of every layer
        const ModelConfig& c = info.config;
        const double kv = 2.0 * c.n_layers * c.max_seq_len * c.n_kv_heads * c.head_dim * 4;
        check_forward_fits(a, c, 1, c.max_seq_len, kv, "generating from this model");
    }
    const LoadedModel loaded = load_saved_model(a, dir, info.config);
    Model& model = *loaded.model;

    // An empty prompt starts from the end-of-text id (a document start), else from a newline.
    std::vector<int32_t> prompt = tok->encode(a.prompt);
    if (prompt.empty()) {
        if (auto eot = tok->eot_id())
            prompt.push_back(*eot);
        else
            prompt = tok->encode("\n");
    }

    GenerateOptions g;
    g.max_new_tokens = a.max_new;
    g.temperature = static_cast<float>(a.temperature);
    g.top_k = a.top_k;
    g.top_p = static_cast<float>(a.top_p);
    g.seed = a.seed;
    if (!a.json) std::fwrite(a.prompt.data(), 1, a.prompt.size(), stdout);
    // Streaming prints the new bytes of the decoded sample after each token.
    std::vector<int32_t> sampled;
    size_t printed = 0;
    // Up to max_seq_len positions the KV cache holds everything. Longer outputs slide the
    // window: the last half window is prefilled again and generation continues from it (each
    // window draws with its own seed derived from --seed, so draws never repeat).
    const int64_t window = info.config.max_seq_len;
    MT_CHECK(window >= 2, "max_seq_len ", window, " is too short to generate");
    if (static_cast<int64_t>(prompt.size()) >= window)
        prompt.erase(prompt.begin(), prompt.end() - window / 2);
    std::vector<int32_t> context = prompt, out;
    stop_cooperatively();  // a stop ends the generation before its next token
    size_t produced = 0;   // tokens handed to the output so far
    auto check = [&](size_t done) {
        if (const int sig = stop_requested(); sig != 0)
            throw Stopped(
                sig, "during generate after " + std::to_string(done) + " of " +
                         std::to_string(a.max_new) + " tokens; " +
                         (a.json ? "no JSON result was printed" : "the text so far is on stdout"));
    };
    for (uint64_t chunk = 0; static_cast<int64_t>(out.size()) < a.max_new; ++chunk) {
        GenerateOptions gc = g;
        gc.max_new_tokens =
            static_cast<int>(std::min<int64_t>(a.max_new - static_cast<int64_t>(out.size()),
                                               window - static_cast<int64_t>(context.size())));
        gc.seed = chunk == 0 ? g.seed : g.seed ^ (0x9E3779B97F4A7C15ull * chunk);
        std::vector<int32_t> got = generate(model, context, gc, [&](int32_t id) {
            check(produced++);
            if (a.json) return true;
            sampled.push_back(id);
            std::string text = tok->decode(sampled);
            if (text.size() > printed) {
                std::fwrite(text.data() + printed, 1, text.size() - printed, stdout);
                printed = text.size();
            }
            std::fflush(stdout);
            return true;
        });
        out.insert(out.end(), got.begin(), got.end());
        context.insert(context.end(), got.begin(), got.end());
        if (static_cast<int64_t>(context.size()) >= window)
            context.erase(context.begin(), context.end() - window / 2);
    }
    if (!a.json) std::printf("\n");
    if (a.json) {
        nlohmann::json j;
        j["tokens"] = out;
        j["text"] = tok->decode(out);
        std::printf("%s\n",
                    j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    }
}

}  // namespace

void add_generate_command(CLI::App& app, int& exit_code) {
    const auto [a, cmd] =
        add_command<GenerateArgs>(app, "generate", "sample text from a checkpoint");
    add_saved_model_options(cmd, *a);
    cmd->add_option("--prompt", a->prompt, "text to continue (default: a newline)");
    add_int_option(cmd, "--max-new", a->max_new, "tokens to generate", 1)->required();
    add_real_option(cmd, "--temperature", a->temperature, "0 = greedy", non_negative_real())
        ->capture_default_str();
    add_int_option(cmd, "--top-k", a->top_k, "keep the k most probable tokens (0 = off)", 0)
        ->capture_default_str();
    add_real_option(cmd, "--top-p", a->top_p, "nucleus sampling threshold (1 = off)",
                    non_negative_real(1.0))
        ->capture_default_str();
    add_int_option(cmd, "--seed", a->seed, "sampling seed", uint64_t{0})->capture_default_str();
    a->dev.add_options(cmd);
    cmd->add_flag("--json", a->json, "print only a JSON object with the sampled ids and text");
    a->tokenizer.add_options(cmd);
    on_run(cmd, exit_code, [a, cmd] {
        a->tokenizer_given = cmd->count("--tokenizer") > 0;
        run_generate(*a);
    });
}

}  // namespace moetrain::cli

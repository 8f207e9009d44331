// import_hf: a transformers model directory (config.json + safetensors weights) as a
// weights-only moetrain checkpoint. Each transformers tensor is checked (present, shape),
// widened to fp32 and scattered into the MODEL.md tensors by the inverse of the export
// mapping; tensors the mapping does not know are refused, never dropped.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "io/checkpoint_write.h"
#include "io/file.h"
#include "io/hf_mapping.h"
#include "io/hf_weights.h"
#include "io/out_path.h"
#include "model/param_layout.h"
#include "moetrain/error.h"
#include "moetrain/hf.h"
#include "moetrain/stop.h"
#include "moetrain/tokenizer.h"

namespace fs = std::filesystem;

namespace moetrain {

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
    return out + "]";
}

// GPT-2 checkpoints on the Hub name the base model's tensors without "transformer.".
std::string file_name_of(io::HfFamily f, const std::string& name, const io::HfWeights& w) {
    if (f != io::HfFamily::gpt2 || w.find(name)) return name;
    const std::string prefix = "transformer.";
    if (name.rfind(prefix, 0) == 0 && w.find(name.substr(prefix.size())))
        return name.substr(prefix.size());
    return name;
}

// Scatter one transformers tensor into the flat MODEL.md buffer (inverse of the export).
void scatter(const io::HfTensor& t, const std::vector<float>& hf,
             const std::map<std::string, const ParamInfo*>& by_name, std::vector<float>& flat) {
    std::vector<float> cat(hf.size());
    if (t.transpose) {
        const int64_t rows = t.shape[0], cols = t.shape[1];
        for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < cols; ++j) cat[j * rows + i] = hf[i * cols + j];
    } else {
        cat = hf;
    }
    for (float& v : cat) v /= t.scale;  // a power of two: exact
    size_t at = 0;
    for (const io::HfPart& p : t.parts) {
        const ParamInfo* info = by_name.at(p.name);
        std::memcpy(flat.data() + info->offset + p.offset, cat.data() + at,
                    static_cast<size_t>(p.numel) * sizeof(float));
        at += static_cast<size_t>(p.numel);
    }
}

// Every tensor that config.json implies is in the files with its shape and a dtype that widens
// to fp32, and every tensor of the files is one of them: checked from the safetensors headers
// alone, before the model is allocated. A config.json that claims a larger model than the files
// hold fails naming the first mismatch, with the memory of a few headers.
void check_tensors(const std::string& hf_dir, const io::HfImportedConfig& hc,
                   const io::HfWeights& weights) {
    const ModelConfig& c = hc.config;
    std::set<std::string> used;
    io::for_each_hf_tensor(hc.family, c, [&](const io::HfTensor& t) {
        const std::string name = file_name_of(hc.family, t.name, weights);
        const SafetensorsEntry* e = weights.find(name);
        MT_CHECK(e, "import: ", hf_dir, " has no tensor \"", t.name, "\" (",
                 io::hf_architecture(hc.family), " with this config.json needs it)");
        MT_CHECK(e->shape == t.shape, weights.where(name), ": tensor \"", name, "\" has shape ",
                 e->shape_str(), ", config.json implies ", shape_str(t.shape));
        weights.check_dtype(name);
        used.insert(name);
    });
    for (const std::string& name : weights.names()) {
        if (used.count(name) || io::hf_ignored_tensor(name)) continue;
        if (name == "lm_head.weight" && c.tie_embeddings) {
            const std::vector<int64_t> want{c.vocab_size, c.d_model};
            const SafetensorsEntry* e = weights.find(name);
            MT_CHECK(e->shape == want, weights.where(name), ": tensor \"", name, "\" has shape ",
                     e->shape_str(), ", config.json implies ", shape_str(want),
                     " (the tied embedding's)");
            weights.check_dtype(name);
            continue;
        }
        fail("import: ", weights.where(name), ": unexpected tensor \"", name, "\" (",
             io::hf_architecture(hc.family), " as moetrain maps it has no such tensor)");
    }
}

}  // namespace

HfResult import_hf(const std::string& hf_dir, const std::string& out_arg,
                   const HfImportOptions& options) {
    // Resolved before the check, so that the directory checked is the one written.
    const std::string checkpoint_dir = io::resolve_path(out_arg, "import: --out");
    std::error_code ec;
    MT_CHECK(fs::is_directory(hf_dir, ec), "import: --from ", hf_dir, " is not a directory");
    MT_CHECK(!fs::exists(checkpoint_dir, ec) ||
                 (fs::is_directory(checkpoint_dir, ec) && fs::is_empty(checkpoint_dir, ec)),
             "import: --out ", checkpoint_dir,
             " already exists and is not an empty directory; choose a new directory");
    const std::string config_path = (fs::path(hf_dir) / "config.json").string();
    const io::HfImportedConfig hc =
        io::hf_config_from_json(io::read_file(config_path, io::kConfigFile), config_path);
    const ModelConfig& c = hc.config;
    const io::HfWeights weights(hf_dir);
    check_tensors(hf_dir, hc, weights);

    const std::vector<ParamInfo> params = build_param_layout(c);
    std::map<std::string, const ParamInfo*> by_name;
    int64_t n_flat = 0;
    for (const ParamInfo& p : params) {
        by_name[p.name] = &p;
        n_flat = std::max(n_flat, p.offset + p.numel());
    }
    std::vector<float> flat(static_cast<size_t>(n_flat), 0.0f);
    io::for_each_hf_tensor(hc.family, c, [&](const io::HfTensor& t) {
        // A stop request (moetrain/stop.h) ends the import between two tensors, before the
        // checkpoint directory is begun.
        if (const int sig = stop_requested(); sig != 0)
            throw Stopped(sig, "during import at tensor " + t.name + "; nothing was written to " +
                                   checkpoint_dir);
        const std::string name = file_name_of(hc.family, t.name, weights);
        const std::vector<float> v = weights.read_f32(name);
        for (size_t i = 0; i < v.size(); ++i)
            MT_CHECK(std::isfinite(v[i]), weights.where(name), ": tensor \"", name,
                     "\" holds a non-finite value at element ", i);
        if (t.parts.empty()) {
            for (size_t i = 0; i < v.size(); ++i)
                MT_CHECK(v[i] == 0.0f, "import: tensor \"", name, "\" is not zero (element ", i,
                         " = ", v[i], "): MODEL.md cannot represent ", t.zero_reason);
            return;
        }
        scatter(t, v, by_name, flat);
    });
    if (c.tie_embeddings && weights.find("lm_head.weight")) {
        // Some files store the tied head; accept it only when it is the embedding.
        const std::vector<float> head = weights.read_f32("lm_head.weight");
        const ParamInfo& emb = *by_name.at("tok_emb.weight");
        MT_CHECK(head.size() == static_cast<size_t>(emb.numel()) &&
                     std::memcmp(head.data(), flat.data() + emb.offset,
                                 head.size() * sizeof(float)) == 0,
                 "import: lm_head.weight differs from the embedding although config.json "
                 "ties them (tie_word_embeddings)");
    }

    io::CheckpointBuffers b;
    b.params = &params;
    b.weights = &flat;
    b.config_json = config_to_json(c);
    // A tokenizer.json beside the weights becomes the checkpoint's tokenizer (stored as `train
    // --tokenizer` stores it), once it loads and its ids fit the embedding.
    TrainState state;
    const std::string tok_path = (fs::path(hf_dir) / "tokenizer.json").string();
    const bool has_tokenizer = fs::exists(tok_path, ec);
    if (has_tokenizer && options.tokenizer) {
        std::string bytes = io::read_file(tok_path, io::kTokenizerFile);
        std::shared_ptr<const Tokenizer> tok;
        try {
            tok = load_tokenizer_bytes(tok_path, bytes);
        } catch (const Error& e) {
            fail("import: ", e.what(), " (--no-tokenizer imports the weights without it)");
        }
        MT_CHECK(tok->vocab_size() <= c.vocab_size, "import: ", tok_path, " has ids up to ",
                 tok->vocab_size() - 1, ", beyond config.json's vocab_size ", c.vocab_size,
                 " (--no-tokenizer imports the weights without it)");
        state.tokenizer = tok_path;
        state.tokenizer_sha256 = tokenizer_file_sha256(bytes);
        state.tokenizer_file = std::move(bytes);
    }
    io::write_checkpoint_dir(checkpoint_dir, b, state, OptimizerState::none);
    HfResult result{io::hf_architecture(hc.family), c, weights.files(), {}};
    if (!state.tokenizer_file.empty()) result.files.push_back("tokenizer.json");
    if (has_tokenizer && !options.tokenizer)
        result.notes.push_back(
            "tokenizer.json left out (--no-tokenizer): the checkpoint "
            "records the bytes tokenizer; pass --tokenizer to use it");
    if (c.moe)
        result.notes.push_back("moe.aux_loss_alpha = router_aux_loss_coef " +
                               std::to_string(c.moe->aux_loss_alpha) +
                               " (MODEL.md's per-layer load-balancing loss, not transformers')");
    return result;
}

}  // namespace moetrain

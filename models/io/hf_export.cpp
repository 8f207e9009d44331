// export_hf: a checkpoint's fp32 weights rearranged into the transformers layout of the family
// that computes the same function, written with config.json and generation_config.json into
// a directory that replaces `out_dir` atomically.
#include <cstdio>
#include <filesystem>
#include <map>

#include "io/atomic_dir.h"
#include "io/checkpoint_tensors.h"
#include "io/file.h"
#include "io/hf_mapping.h"
#include "io/json.h"
#include "io/out_manifest.h"
#include "io/out_path.h"
#include "model/param_layout.h"
#include "moetrain/checkpoint.h"
#include "moetrain/error.h"
#include "moetrain/hf.h"
#include "moetrain/safetensors.h"
#include "moetrain/stop.h"

namespace fs = std::filesystem;

namespace moetrain {

namespace {

// The values of one transformers tensor from the moetrain tensors.
std::vector<float> gather(const io::HfTensor& t,
                          const std::map<std::string, std::vector<float>>& mt) {
    std::vector<float> cat;
    cat.reserve(static_cast<size_t>(t.numel()));
    for (const io::HfPart& p : t.parts) {
        const std::vector<float>& src = mt.at(p.name);
        cat.insert(cat.end(), src.begin() + p.offset, src.begin() + p.offset + p.numel);
    }
    if (t.parts.empty()) cat.assign(static_cast<size_t>(t.numel()), 0.0f);
    std::vector<float> out = cat;
    if (t.transpose) {  // cat is [shape[1], shape[0]]
        const int64_t rows = t.shape[0], cols = t.shape[1];
        for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < cols; ++j) out[i * cols + j] = cat[j * rows + i];
    }
    for (float& v : out) v *= t.scale;
    return out;
}

std::string shard_name(size_t i, size_t n) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
    return buf;
}

}  // namespace

HfResult export_hf(const std::string& checkpoint_dir, const std::string& out_arg,
                   const HfExportOptions& options) {
    MT_CHECK(options.max_shard_bytes > 0, "export: the shard size must be > 0");
    const CheckpointInfo info = read_checkpoint_info(checkpoint_dir);
    const ModelConfig& c = info.config;
    const io::HfFamily family = io::hf_family_for_export(c);
    io::hf_check_round_trip(family, c);
    // An existing --out may only hold what an earlier export wrote and listed in its
    // manifest, unchanged since: it is replaced as a whole; anything else is refused.
    const std::string out_dir = io::resolve_path(out_arg, "export: --out");
    const io::EarlierOutput earlier = io::read_earlier_output(out_dir, "export", "export: --out");

    const SafetensorsFile file((fs::path(checkpoint_dir) / "model.safetensors").string());
    const std::vector<ParamInfo> params = build_param_layout(c);
    io::check_tensors(file, params, {""});
    // A stop request (moetrain/stop.h) ends the export between two tensors or shards; the
    // temporary directory goes with the AtomicDirWriter, so nothing is left under out_dir.
    std::string tmp_dir;  // the temporary directory once it exists
    auto stop_point = [&](const std::string& at) {
        if (const int sig = stop_requested(); sig != 0)
            throw Stopped(sig,
                          "during export at " + at + "; nothing was written to " + out_dir +
                              (tmp_dir.empty() ? std::string()
                                               : " (its temporary " + tmp_dir + " was removed)"));
    };
    std::map<std::string, std::vector<float>> mt;
    for (const ParamInfo& p : params) {
        stop_point("tensor " + p.name);
        mt[p.name] = file.read_f32(p.name);
    }

    const std::vector<io::HfTensor> map = io::hf_tensor_map(family, c);
    std::vector<std::vector<float>> values;
    values.reserve(map.size());
    for (const io::HfTensor& t : map) {
        stop_point("tensor " + t.name);
        values.push_back(gather(t, mt));
    }

    // Greedy sharding in tensor order; a tensor larger than the limit gets a shard of its own.
    std::vector<size_t> shard_of(map.size());
    size_t n_shards = 0;
    int64_t in_shard = 0, total = 0;
    for (size_t i = 0; i < map.size(); ++i) {
        const int64_t bytes = map[i].numel() * 4;
        if (n_shards == 0 || (in_shard > 0 && in_shard + bytes > options.max_shard_bytes)) {
            ++n_shards;
            in_shard = 0;
        }
        shard_of[i] = n_shards - 1;
        in_shard += bytes;
        total += bytes;
    }

    HfResult result{io::hf_architecture(family), c, {}, io::hf_export_notes(family, c)};
    io::AtomicDirWriter out(out_dir);
    tmp_dir = out.tmp_dir();
    if (const int stale = io::remove_stale_tmp_dirs(out.parent_dir()); stale > 0)
        result.notes.push_back("removed " + std::to_string(stale) +
                               " temporary directories of interrupted runs from " +
                               out.parent_dir());
    io::OrderedObject weight_map;
    for (size_t s = 0; s < n_shards; ++s) {
        const std::string name = n_shards == 1 ? "model.safetensors" : shard_name(s, n_shards);
        stop_point(name);
        SafetensorsWriter w;
        w.set_metadata("format", "pt");  // transformers refuses safetensors without it
        for (size_t i = 0; i < map.size(); ++i) {
            if (shard_of[i] != s) continue;
            w.add(map[i].name, DType::f32, map[i].shape, values[i].data());
            weight_map.set(map[i].name, name);
        }
        w.write(out.file(name));
        result.files.push_back(name);
    }
    if (n_shards > 1) {
        io::ordered_json index;
        index["metadata"] = {{"total_size", total}};
        index["weight_map"] = weight_map.take();
        io::write_file_synced(out.file("model.safetensors.index.json"), index.dump(2) + "\n");
        result.files.push_back("model.safetensors.index.json");
    }
    // The tokenizer travels along when transformers can read it: a Hugging Face tokenizer.json,
    // byte for byte the checkpoint's copy (load_checkpoint_tokenizer checks its SHA-256), with a
    // tokenizer_config.json that makes AutoTokenizer use it as is (PreTrainedTokenizerFast adds
    // no BOS token of its own, as LlamaTokenizerFast would).
    if (tokenizer_copy_name(info.state.tokenizer) == "tokenizer.json") {
        const std::shared_ptr<const Tokenizer> tok = load_checkpoint_tokenizer(info);
        MT_CHECK(tok->vocab_size() <= c.vocab_size, "export: the checkpoint's tokenizer has ",
                 tok->vocab_size(), " tokens, more than the model's vocab_size ", c.vocab_size);
        const std::string path = (fs::path(checkpoint_dir) / "tokenizer.json").string();
        io::write_file_synced(out.file("tokenizer.json"),
                              io::read_file(path, io::kCheckpointTokenizerFile));
        io::ordered_json tc;
        tc["tokenizer_class"] = "PreTrainedTokenizerFast";
        tc["model_max_length"] = c.max_seq_len;
        io::write_file_synced(out.file("tokenizer_config.json"), tc.dump(2) + "\n");
        result.files.push_back("tokenizer.json");
        result.files.push_back("tokenizer_config.json");
    } else {
        result.notes.push_back(
            "no tokenizer.json written: the checkpoint's tokenizer is " +
            (info.state.tokenizer == "bytes"
                 ? std::string("bytes (token id = byte value)")
                 : info.state.tokenizer + ", not a Hugging Face tokenizer.json"));
    }
    io::write_file_synced(out.file("config.json"), io::hf_config_json(family, c));
    io::write_file_synced(out.file("generation_config.json"), io::hf_generation_config_json(c));
    result.files.push_back("config.json");
    result.files.push_back("generation_config.json");
    std::vector<io::ManifestEntry> entries;
    entries.reserve(result.files.size());
    for (const std::string& f : result.files)
        entries.push_back(io::manifest_entry(out.tmp_dir(), f));
    io::write_output_manifest(out.tmp_dir(), "export", {{"checkpoint", checkpoint_dir}}, entries,
                              true);
    out.commit();
    if (!earlier.files.empty())
        result.notes.push_back("replaced the earlier export in " + out_dir + " (" +
                               io::describe_files(earlier.files) + ")");
    return result;
}

}  // namespace moetrain

// Whole-file and per-tensor CRC32C checks of a checkpoint directory.
#include "io/checkpoint_integrity.h"

#include <vector>

#include "io/checkpoint_meta.h"
#include "io/crc32c.h"
#include "io/file.h"
#include "io/json.h"
#include "moetrain/error.h"
#include "moetrain/safetensors.h"

namespace moetrain::io {
namespace {

constexpr const char* kChecksums = "checksums";

// CRC32C of the state with checksums["state.json"] removed, dumped with sorted keys.
uint32_t canonical_state_crc(json state) {
    if (state.contains(kChecksums) && state[kChecksums].is_object())
        state[kChecksums].erase(kStateFile);
    return crc32c(state.dump().data(), state.dump().size());
}

// CRC32C of a whole file, read in 1 MiB pieces.
uint32_t file_crc(const std::string& path, uint64_t* bytes) {
    InputFile in(path, kCheckpointDataFile);
    std::vector<char> buf(1 << 20);
    uint32_t crc = 0;
    while (size_t n = in.read_next(buf.data(), buf.size())) {
        crc = crc32c(buf.data(), n, crc);
        *bytes += n;
    }
    return crc;
}

// A safetensors file whose whole-file checksum failed: name the damaged tensor when the
// damage lies in one (its own checksum fails), else the header.
[[noreturn]] void report_damage(const std::string& path, uint32_t want, uint32_t got) {
    const std::string mismatch =
        "checksum mismatch (stored " + crc32c_text(want) + ", file has " + crc32c_text(got) + ")";
    std::vector<char> buf;
    try {
        SafetensorsFile f(path);
        for (const SafetensorsEntry& e : f.tensors()) {
            buf.resize(e.end - e.begin);
            f.read(e, buf.data());
        }
    } catch (const Error& e) {
        const std::string what = e.what();
        if (what.find("checksum mismatch") != std::string::npos) throw;
        fail(what, " [", mismatch, "]");
    }
    fail("checkpoint file ", path, ": ", mismatch,
         " in its header or metadata: the file is corrupt; nothing was loaded from it");
}

}  // namespace

std::string add_state_checksums(const std::string& state_text,
                                const std::map<std::string, uint32_t>& files) {
    ordered_json j = ordered_json::parse(state_text);
    ordered_json sums = ordered_json::object();
    for (const auto& [name, crc] : files) sums[name] = crc32c_text(crc);
    j[kChecksums] = sums;
    j[kChecksums][kStateFile] = crc32c_text(canonical_state_crc(json::parse(j.dump())));
    return j.dump(2) + "\n";
}

IntegrityReport verify_checkpoint_integrity(const std::string& dir) {
    IntegrityReport r;
    const std::string state_path = dir + "/" + kStateFile;
    const std::string text = read_file(state_path, kCheckpointStateFile);
    r.bytes += text.size();
    const json state = parse_json_strict(text, state_path);
    if (!state.is_object() || !state.contains(kChecksums)) return r;  // an older checkpoint
    r.checksummed = true;
    const json& sums = state.at(kChecksums);
    MT_CHECK(sums.is_object(), state_path, ": \"checksums\" must be a JSON object");
    auto stored = [&](const std::string& name) {
        MT_CHECK(sums.contains(name) && sums.at(name).is_string(), state_path,
                 ": \"checksums\" has no valid entry for ", name, " (corrupt file)");
        const std::string v = sums.at(name).get<std::string>();
        const uint32_t crc = parse_crc32c_text(v);
        MT_CHECK(crc32c_text(crc) == v, state_path, ": \"checksums\" entry of ", name,
                 " is not crc32c:<8 hex digits> (corrupt file)");
        return crc;
    };
    const uint32_t want_state = stored(kStateFile);
    const uint32_t got_state = canonical_state_crc(state);
    MT_CHECK(want_state == got_state, "checkpoint file ", state_path,
             ": checksum mismatch (stored ", crc32c_text(want_state), ", contents have ",
             crc32c_text(got_state), "): the file is corrupt; nothing was loaded from it");
    ++r.files;
    for (const auto& item : sums.items()) {
        const std::string& name = item.key();
        if (name == kStateFile) continue;
        MT_CHECK(name == kModelFile || name == kOptimizerFile, state_path,
                 ": \"checksums\" names an unknown file \"", name, "\"");
        const std::string path = dir + "/" + name;
        const uint32_t want = stored(name);
        const uint32_t got = file_crc(path, &r.bytes);
        if (want != got) report_damage(path, want, got);
        ++r.files;
    }
    MT_CHECK(sums.contains(kModelFile), state_path, ": \"checksums\" has no entry for ", kModelFile,
             " (corrupt file)");
    return r;
}

}  // namespace moetrain::io

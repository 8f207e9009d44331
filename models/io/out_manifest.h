// The manifest a command writes beside its outputs (".moetrain-output.json": the writer,
// its settings, and each file's name, size and CRC32C), so that a later run deletes or
// replaces only files it wrote itself and that are still as it wrote them. A directory
// holding anything else is refused, never cleaned.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/json.h"

namespace moetrain::io {

inline constexpr const char* kOutputManifestName = ".moetrain-output.json";

struct ManifestEntry {
    std::string name;  // a plain file name inside the directory
    uint64_t bytes = 0;
    std::string crc;  // crc32c_text of the contents
};

// The entry of the regular file `dir/name` as it is now.
ManifestEntry manifest_entry(const std::string& dir, const std::string& name);

// Writes dir/.moetrain-output.json (atomically): `writer` ("export", "tokenize"), `settings`
// (any JSON, compared by later runs), the files, and whether the output is complete.
void write_output_manifest(const std::string& dir, const std::string& writer,
                           const ordered_json& settings, const std::vector<ManifestEntry>& files,
                           bool complete);

// What an earlier run of `writer` left in `dir`.
struct EarlierOutput {
    std::vector<std::string> files;  // its files still present (the manifest not included)
    ordered_json settings;           // null when there is no manifest
    bool complete = false;
    bool has_manifest = false;
};

// `dir` missing or empty: nothing. Otherwise every entry of `dir` must be the manifest of
// `writer` or a regular file it lists with the same size and CRC32C; anything else (a file
// it does not list or that changed since, a directory, a link, another writer's manifest)
// throws "<what> DIR holds NAME, ...; choose a new or empty directory", naming the entry.
EarlierOutput read_earlier_output(const std::string& dir, const std::string& writer,
                                  const std::string& what);

// Deletes the files of `earlier` in `dir`, then its manifest. Only ever called with what
// read_earlier_output returned for that directory.
void remove_earlier_output(const std::string& dir, const EarlierOutput& earlier);

// "N files: a, b, c" (at most the first 8 names), for "replaces ..." messages.
std::string describe_files(const std::vector<std::string>& files);

}  // namespace moetrain::io

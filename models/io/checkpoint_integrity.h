// Checkpoint integrity (docs/CHECKPOINTS.md, "Checksums"): state.json's "checksums" holds
// the CRC32C of every other file of the checkpoint and of its own canonical contents; each
// safetensors file also holds the CRC32C of every tensor, so that damage is reported naming
// the file and the tensor. Checkpoints written before checksums existed have neither and
// load with a warning.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace moetrain::io {

// `state_text` (the JSON state_to_json wrote) with "checksums" added: `files` (file name ->
// CRC32C of the whole file) and "state.json", the CRC32C of the canonical dump of the state
// without that one entry (so whitespace and key order do not matter, every value does).
std::string add_state_checksums(const std::string& state_text,
                                const std::map<std::string, uint32_t>& files);

struct IntegrityReport {
    bool checksummed = false;  // false: an older checkpoint without checksums
    int files = 0;             // files whose checksum was verified (state.json included)
    uint64_t bytes = 0;        // bytes read to verify them
};

// Verify every checksum of the checkpoint directory `dir`; throws one line naming the file
// (and the tensor, when the damage lies in one) on the first mismatch.
IntegrityReport verify_checkpoint_integrity(const std::string& dir);

}  // namespace moetrain::io

// The input of `tokenize` and `tokenizer bench` cut into byte ranges that are encoded on their
// own, in parallel: a text file at next_line_cut() positions (moetrain/tokenizer.h) when the
// tokenizer encodes such pieces apart with the same ids, else whole; a JSONL file after any
// newline (its documents are lines). Pieces are read with pread, so memory stays bounded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moetrain::cli {

struct TextPiece {
    size_t file;           // index into the file list
    uint64_t begin, end;   // byte range
    bool starts_document;  // the first piece of a text file: the end-of-text id goes before it
    bool jsonl;
};

// Pieces of about `piece_bytes` (a piece ends at the first allowed cut after that many bytes).
// Empty files give none. Errors (a missing, unreadable or non-regular file) read
// "--data file PATH: REASON".
std::vector<TextPiece> plan_text_pieces(const std::vector<std::string>& files, bool cut_text_files,
                                        uint64_t piece_bytes);

// The bytes of a piece.
std::string read_text_piece(const std::string& path, const TextPiece& piece);

// The 1-based line number of byte `offset` of a file (for the error messages of JSONL pieces).
int64_t line_number_at(const std::string& path, uint64_t offset);

}  // namespace moetrain::cli

#include "text_pieces.h"

#include <algorithm>
#include <filesystem>

#include "io/file.h"
#include "moetrain/tokenizer.h"

namespace moetrain::cli {
namespace {

io::InputFile open_text(const std::string& path) {
    return io::InputFile(path, io::kTextPiecesFile);
}

// The first allowed cut at or after `from` (the file's size when there is none), reading the
// file in windows from two bytes before `from` (next_line_cut looks back two bytes).
uint64_t find_cut(const io::InputFile& f, uint64_t from, bool jsonl) {
    constexpr uint64_t kWindow = 64 << 10;
    for (uint64_t at = from; at < f.size(); at += kWindow) {
        const uint64_t start = at >= 2 ? at - 2 : 0;
        std::string w = f.read_range(start, at + kWindow);
        const size_t local = static_cast<size_t>(at - start);
        size_t p;
        if (jsonl) {
            // After any newline at or after `at` (a cut at `at` needs the newline at at-1).
            size_t nl = w.find('\n', local == 0 ? 0 : local - 1);
            p = nl == std::string::npos ? w.size() : nl + 1;
        } else {
            p = next_line_cut(w, local);
        }
        // A cut found at the window's end may be an artifact of the window: only accept it
        // when it is inside, or the window reached the end of the file.
        if (p < w.size() || start + w.size() >= f.size()) return std::min(start + p, f.size());
    }
    return f.size();
}

}  // namespace

std::vector<TextPiece> plan_text_pieces(const std::vector<std::string>& files, bool cut_text_files,
                                        uint64_t piece_bytes) {
    std::vector<TextPiece> pieces;
    piece_bytes = std::max<uint64_t>(piece_bytes, 1);
    for (size_t i = 0; i < files.size(); ++i) {
        const io::InputFile f = open_text(files[i]);
        const bool jsonl = std::filesystem::path(files[i]).extension() == ".jsonl";
        const bool cut = jsonl || cut_text_files;
        uint64_t begin = 0;
        while (begin < f.size()) {
            uint64_t end = cut && f.size() - begin > piece_bytes
                               ? find_cut(f, begin + piece_bytes, jsonl)
                               : f.size();
            pieces.push_back({i, begin, end, begin == 0 && !jsonl, jsonl});
            begin = end;
        }
    }
    return pieces;
}

std::string read_text_piece(const std::string& path, const TextPiece& piece) {
    return open_text(path).read_range(piece.begin, piece.end);
}

int64_t line_number_at(const std::string& path, uint64_t offset) {
    const io::InputFile f = open_text(path);
    int64_t line = 1;
    for (uint64_t at = 0; at < offset; at += 1 << 20) {
        std::string w = f.read_range(at, std::min(offset, at + (1 << 20)));
        line += std::count(w.begin(), w.end(), '\n');
    }
    return line;
}

}  // namespace moetrain::cli

#include "tokenizer/byte_level_bpe.h"

#include <algorithm>
#include <atomic>

#include "tokenizer/nfc.h"

namespace moetrain::tok {

uint64_t ByteLevelBpe::next_instance() {
    static std::atomic<uint64_t> counter{0};
    return ++counter;
}

// Natural text repeats its words, so each thread keeps the ids of the short pieces it has
// already merged (per tokenizer instance; emptied when half full).
void ByteLevelBpe::encode_cached(std::string_view piece, std::vector<int32_t>& out) const {
    thread_local PieceCache cache;
    if (piece.size() > PieceCache::kMaxPiece || piece.size() < 2) {
        ranks.encode_piece(piece, out);
        return;
    }
    if (cache.owner != instance_) {
        cache.clear();
        cache.owner = instance_;
    }
    const uint64_t hash = bytes_hash(piece);
    uint32_t n = 0;
    if (const int32_t* ids = cache.find(piece, hash, n)) {
        out.insert(out.end(), ids, ids + n);
        return;
    }
    const size_t start = out.size();
    ranks.encode_piece(piece, out);
    cache.insert(piece, hash, out.data() + start, static_cast<uint32_t>(out.size() - start));
}

int64_t ByteLevelBpe::vocab_size() const {
    return std::max<int64_t>(static_cast<int64_t>(id_bytes.size()), specials.max_id() + 1);
}

void ByteLevelBpe::set_id_bytes(int32_t id, std::string bytes) {
    if (static_cast<size_t>(id) >= id_bytes.size()) {
        id_bytes.resize(static_cast<size_t>(id) + 1);
        id_known.resize(static_cast<size_t>(id) + 1, false);
    }
    id_bytes[static_cast<size_t>(id)] = std::move(bytes);
    id_known[static_cast<size_t>(id)] = true;
}

void ByteLevelBpe::pick_eot() {
    for (const char* c : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<|im_end|>"}) {
        int32_t id = -1;
        if (specials.find_id(c, id)) {
            eot = id;
            return;
        }
    }
}

void ByteLevelBpe::encode_ordinary(std::string_view text, std::vector<int32_t>& out) const {
    thread_local std::string normalized;
    if (nfc) {
        nfc_normalize(text, normalized);
        text = normalized;
    }
    thread_local std::string prefixed;
    if (add_prefix_space && !text.empty() && text[0] != ' ') {
        prefixed.assign(" ");
        prefixed.append(text);
        text = prefixed;
    }
    thread_local std::vector<uint32_t> ends;
    split_pieces(pattern, text, ends);
    uint32_t begin = 0;
    for (uint32_t end : ends) {
        encode_cached(text.substr(begin, end - begin), out);
        begin = end;
    }
}

void ByteLevelBpe::encode(std::string_view text, std::vector<int32_t>& out) const {
    if (specials.empty()) {
        encode_ordinary(text, out);
        return;
    }
    specials.encode(text, out, [&](std::string_view part) { encode_ordinary(part, out); });
}

std::string ByteLevelBpe::decode(std::span<const int32_t> ids) const {
    std::string text;
    for (int32_t id : ids) {
        if (id >= 0 && static_cast<size_t>(id) < id_bytes.size() &&
            id_known[static_cast<size_t>(id)]) {
            text += id_bytes[static_cast<size_t>(id)];
        } else {
            text += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
        }
    }
    return text;
}

}  // namespace moetrain::tok

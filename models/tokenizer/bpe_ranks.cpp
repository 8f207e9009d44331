// Rank-ordered BPE merging: a scan of an array of pair ranks for short pieces, a binary heap over
// adjacent pairs for long ones (so they stay O(n log n)).
#include "tokenizer/bpe_ranks.h"

#include <algorithm>
#include <climits>
#include <queue>

namespace moetrain::tok {

void BpeRanks::add_merge(int32_t left, int32_t right, int32_t rank, int32_t merged) {
    merges_.add(left, right, PairTable::Value{rank, merged});
}

namespace {
// The ids of the piece being merged (one per byte to start with), shared by both merge loops.
thread_local std::vector<int32_t> piece_ids;
constexpr size_t kShortPiece = 64;
constexpr int32_t kNoRank = INT32_MAX;
}  // namespace

void BpeRanks::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
    const size_t n = piece.size();
    if (n == 0) return;
    if (n == 1) {
        out.push_back(byte_id_[static_cast<unsigned char>(piece[0])]);
        return;
    }
    if (use_whole_) {
        thread_local std::string probe;
        probe.assign(piece);
        if (auto it = whole_.find(probe); it != whole_.end()) {
            out.push_back(it->second);
            return;
        }
    }
    piece_ids.resize(n);
    for (size_t i = 0; i < n; ++i) piece_ids[i] = byte_id_[static_cast<unsigned char>(piece[i])];
    if (n <= kShortPiece)
        merge_short(n, out);
    else
        merge_long(n, out);
}

// Short pieces: the ranks of the adjacent pairs in an array, scanned for the lowest (leftmost
// on ties) before each merge; O(n^2) but without a heap's bookkeeping.
void BpeRanks::merge_short(size_t n, std::vector<int32_t>& out) const {
    int32_t* id = piece_ids.data();
    PairTable::Value pair[kShortPiece];
    auto rate = [&](size_t i) {
        const PairTable::Value* m = merges_.find(id[i], id[i + 1]);
        pair[i] = m ? *m : PairTable::Value{kNoRank, -1};
    };
    for (size_t i = 0; i + 1 < n; ++i) rate(i);
    while (n > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < n; ++i)
            if (pair[i].rank < pair[best].rank) best = i;
        if (pair[best].rank == kNoRank) break;
        id[best] = pair[best].merged;
        for (size_t i = best + 1; i + 1 < n; ++i) id[i] = id[i + 1];
        for (size_t i = best + 1; i + 2 < n; ++i) pair[i] = pair[i + 1];
        --n;
        if (best > 0) rate(best - 1);
        if (best + 1 < n) rate(best);
    }
    out.insert(out.end(), id, id + n);
}

// Long pieces: a binary heap over adjacent pairs (O(n log n)); stale heap entries are
// recognised by the ids they were pushed with.
void BpeRanks::merge_long(size_t n, std::vector<int32_t>& out) const {
    std::vector<int32_t>& id = piece_ids;
    thread_local std::vector<int32_t> next;  // index of the next live symbol, n = none
    thread_local std::vector<int32_t> prev;  // -1 = none
    next.resize(n);
    prev.resize(n);
    for (size_t i = 0; i < n; ++i) {
        next[i] = static_cast<int32_t>(i + 1);
        prev[i] = static_cast<int32_t>(i) - 1;
    }
    struct Cand {
        int32_t rank, pos, left, right, merged;
        bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    thread_local std::vector<Cand> heap_storage;
    heap_storage.clear();
    std::priority_queue<Cand, std::vector<Cand>, std::greater<>> heap(std::greater<>{},
                                                                      std::move(heap_storage));
    auto push = [&](int32_t p) {
        int32_t q = next[p];
        if (q >= static_cast<int32_t>(n)) return;
        if (const PairTable::Value* m = merges_.find(id[p], id[q]))
            heap.push({m->rank, p, id[p], id[q], m->merged});
    };
    for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
    while (!heap.empty()) {
        Cand c = heap.top();
        heap.pop();
        const int32_t p = c.pos;
        if (id[p] != c.left) continue;  // p was merged into its left neighbour or changed
        const int32_t q = next[p];
        if (q >= static_cast<int32_t>(n) || id[q] != c.right) continue;
        id[p] = c.merged;
        id[q] = -1;  // dead
        next[p] = next[q];
        if (next[q] < static_cast<int32_t>(n)) prev[next[q]] = p;
        if (prev[p] >= 0) push(prev[p]);
        push(p);
    }
    for (int32_t p = 0; p < static_cast<int32_t>(n); p = next[p]) out.push_back(id[p]);
}

const std::vector<std::string>& byte_to_unicode() {
    static const std::vector<std::string> table = [] {
        std::vector<std::string> t(256);
        auto utf8 = [](uint32_t cp) {
            std::string s;
            if (cp < 0x80) {
                s += static_cast<char>(cp);
            } else {
                s += static_cast<char>(0xC0 | (cp >> 6));
                s += static_cast<char>(0x80 | (cp & 0x3F));
            }
            return s;
        };
        uint32_t extra = 0;
        for (uint32_t b = 0; b < 256; ++b) {
            bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
            t[b] = utf8(printable ? b : 256 + extra++);
        }
        return t;
    }();
    return table;
}

bool unicode_to_bytes(std::string_view token, std::string& bytes) {
    static const std::unordered_map<std::string, uint8_t> inverse = [] {
        std::unordered_map<std::string, uint8_t> m;
        for (int b = 0; b < 256; ++b) m.emplace(byte_to_unicode()[b], static_cast<uint8_t>(b));
        return m;
    }();
    bytes.clear();
    size_t i = 0;
    while (i < token.size()) {
        size_t len = (static_cast<unsigned char>(token[i]) & 0xE0) == 0xC0 ? 2 : 1;
        if (i + len > token.size()) return false;
        auto it = inverse.find(std::string(token.substr(i, len)));
        if (it == inverse.end()) return false;
        bytes += static_cast<char>(it->second);
        i += len;
    }
    return true;
}

}  // namespace moetrain::tok

// Training a byte-level BPE (GPT-2 split regex) and writing it as a Hugging Face tokenizer.json.
// Counting: each file is read whole and cut into pieces at line cuts (next_line_cut, where the
// split regex gives the same pieces), which are split and counted on all threads. Merging keeps
// the count of every adjacent pair and the words each pair occurs in; a merge rewrites only
// those words and applies the change of their pair counts, and a max-heap with lazy deletion
// picks the next pair: the most frequent, ties broken by the smaller pair of ids, so the same
// input always gives the same file whatever the thread count.
#include <algorithm>
#include <atomic>
#include <nlohmann/json.hpp>
#include <queue>
#include <thread>
#include <unordered_map>

#include "io/file.h"
#include "io/json.h"
#include "moetrain/error.h"
#include "moetrain/stop.h"
#include "moetrain/tokenizer.h"
#include "tokenizer/bpe_ranks.h"
#include "tokenizer/split_pattern.h"

namespace moetrain {
namespace {

using Counts = std::unordered_map<std::string, int64_t>;

void count_text(std::string_view text, Counts& counts) {
    std::vector<uint32_t> ends;
    tok::split_pieces(tok::SplitPattern::gpt2, text, ends);
    uint32_t begin = 0;
    for (uint32_t end : ends) {
        ++counts[std::string(text.substr(begin, end - begin))];
        begin = end;
    }
}

Counts count_pieces(const std::vector<std::string>& files, int threads) {
    constexpr size_t kPiece = 4 << 20;
    const int n_threads = std::max(1, threads);
    std::vector<Counts> partial(static_cast<size_t>(n_threads));
    for (const std::string& file : files) {
        const std::string text = io::read_file(file, io::kTrainerTextFile);
        std::vector<std::string_view> pieces;
        for (size_t begin = 0; begin < text.size();) {
            size_t end =
                text.size() - begin > kPiece ? next_line_cut(text, begin + kPiece) : text.size();
            pieces.push_back(std::string_view(text).substr(begin, end - begin));
            begin = end;
        }
        std::atomic<size_t> next{0};
        std::vector<std::thread> pool;
        pool.reserve(static_cast<size_t>(n_threads));
        for (int t = 0; t < n_threads; ++t) {
            pool.emplace_back([&, t] {
                for (size_t i; !stop_requested() && (i = next++) < pieces.size();)
                    count_text(pieces[i], partial[static_cast<size_t>(t)]);
            });
        }
        for (auto& th : pool) th.join();
        check_stop("tokenizer train while counting " + file + "; nothing was written");
    }
    Counts all = std::move(partial[0]);
    for (size_t t = 1; t < partial.size(); ++t)
        for (auto& [piece, n] : partial[t]) all[piece] += n;
    return all;
}

uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

// The merge loop over the distinct pieces ("words") and their counts.
class PairMerger {
  public:
    struct Word {
        std::vector<int32_t> syms;
        int64_t count;
    };
    explicit PairMerger(std::vector<Word> words) : words_(std::move(words)) {
        for (uint32_t w = 0; w < words_.size(); ++w) {
            const Word& word = words_[w];
            for (size_t i = 0; i + 1 < word.syms.size(); ++i) {
                const uint64_t k = pair_key(word.syms[i], word.syms[i + 1]);
                count_[k] += word.count;
                auto& list = where_[k];
                if (list.empty() || list.back() != w) list.push_back(w);
            }
        }
        for (const auto& [k, n] : count_) heap_.push({n, k});
        seen_.assign(words_.size(), 0);
    }

    // The most frequent pair (ties: the smaller pair of ids); false when no pair is left.
    bool best(uint64_t& key) {
        while (!heap_.empty()) {
            Entry e = heap_.top();
            heap_.pop();
            auto it = count_.find(e.key);
            const int64_t now = it == count_.end() ? 0 : it->second;
            if (now == e.count && now > 0) {
                key = e.key;
                return true;
            }
            if (now > 0 && now < e.count) heap_.push({now, e.key});  // a stale, higher count
        }
        return false;
    }

    // Replace every (a, b) by m in the words holding it, left to right without overlaps.
    void merge(uint64_t key, int32_t m) {
        const auto a = static_cast<int32_t>(key >> 32), b = static_cast<int32_t>(key & 0xFFFFFFFF);
        std::vector<uint32_t> list = std::move(where_[key]);
        where_.erase(key);
        ++stamp_;
        std::unordered_map<uint64_t, int64_t> delta;
        for (uint32_t w : list) {
            if (seen_[w] == stamp_) continue;
            seen_[w] = stamp_;
            Word& word = words_[w];
            std::vector<int32_t>& s = word.syms;
            bool found = false;
            for (size_t i = 0; i + 1 < s.size() && !found; ++i) found = s[i] == a && s[i + 1] == b;
            if (!found) continue;  // an old entry: the pair left this word in an earlier merge
            for (size_t i = 0; i + 1 < s.size(); ++i) delta[pair_key(s[i], s[i + 1])] -= word.count;
            size_t out = 0;
            for (size_t i = 0; i < s.size(); ++i) {
                if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
                    s[out++] = m;
                    ++i;
                } else {
                    s[out++] = s[i];
                }
            }
            s.resize(out);
            for (size_t i = 0; i + 1 < s.size(); ++i) {
                const uint64_t k = pair_key(s[i], s[i + 1]);
                delta[k] += word.count;
                if (s[i] == m || s[i + 1] == m) {
                    auto& l = where_[k];
                    if (l.empty() || l.back() != w) l.push_back(w);
                }
            }
        }
        for (const auto& [k, d] : delta) {
            if (d == 0) continue;
            int64_t& c = count_[k];
            c += d;
            if (d > 0) heap_.push({c, k});
            if (c == 0) count_.erase(k);
        }
    }

  private:
    struct Entry {
        int64_t count;
        uint64_t key;
        bool operator<(const Entry& o) const {  // the heap's top: highest count, smallest key
            return count != o.count ? count < o.count : key > o.key;
        }
    };
    std::vector<Word> words_;
    std::unordered_map<uint64_t, int64_t> count_;
    std::unordered_map<uint64_t, std::vector<uint32_t>> where_;
    std::priority_queue<Entry> heap_;
    std::vector<uint32_t> seen_;
    uint32_t stamp_ = 0;
};

}  // namespace

std::string train_byte_level_bpe(const std::vector<std::string>& files,
                                 const BpeTrainOptions& options) {
    const auto& b2u = tok::byte_to_unicode();
    const int64_t base = static_cast<int64_t>(options.specials.size()) + 256;
    MT_CHECK(options.vocab_size >= base, "--vocab-size ", options.vocab_size,
             " is below the 256 bytes plus ", options.specials.size(), " special tokens");
    Counts counts = count_pieces(files, options.threads);
    MT_CHECK(!counts.empty(), "empty corpus: the --data files hold no text");
    if (options.progress) options.progress("counted " + std::to_string(counts.size()) + " pieces");

    // Pieces in a fixed order (sorted by bytes) so that the result does not depend on hashing.
    std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());
    counts.clear();
    std::sort(sorted.begin(), sorted.end());
    const int32_t first_byte = static_cast<int32_t>(options.specials.size());
    std::vector<std::string> token_bytes;  // bytes of every id
    token_bytes.reserve(options.specials.size() + 256);
    for (const std::string& s : options.specials) token_bytes.push_back(s);
    for (int b = 0; b < 256; ++b) token_bytes.emplace_back(1, static_cast<char>(b));
    std::unordered_map<std::string, int32_t> id_of;
    for (int32_t i = first_byte; i < static_cast<int32_t>(token_bytes.size()); ++i)
        id_of.emplace(token_bytes[static_cast<size_t>(i)], i);
    std::vector<PairMerger::Word> words;
    words.reserve(sorted.size());
    for (const auto& [piece, n] : sorted) {
        PairMerger::Word w{{}, n};
        for (char c : piece) w.syms.push_back(first_byte + static_cast<unsigned char>(c));
        words.push_back(std::move(w));
    }
    sorted.clear();
    PairMerger merger(std::move(words));
    std::vector<std::pair<int32_t, int32_t>> merges;
    const int64_t want = options.vocab_size - base;
    uint64_t best = 0;
    while (static_cast<int64_t>(merges.size()) < want && merger.best(best)) {
        const auto a = static_cast<int32_t>(best >> 32),
                   b = static_cast<int32_t>(best & 0xFFFFFFFF);
        std::string merged =
            token_bytes[static_cast<size_t>(a)] + token_bytes[static_cast<size_t>(b)];
        auto [it, fresh] = id_of.emplace(merged, static_cast<int32_t>(token_bytes.size()));
        if (fresh) token_bytes.push_back(merged);
        merger.merge(best, it->second);
        merges.emplace_back(a, b);
        if (merges.size() % 64 == 0)
            check_stop("tokenizer train after " + std::to_string(merges.size()) +
                       " merges; nothing was written");
        if (options.progress && merges.size() % 1000 == 0)
            options.progress("merges: " + std::to_string(merges.size()) + " / " +
                             std::to_string(want));
    }

    auto unicode = [&](int32_t id) {
        std::string s;
        for (unsigned char c : token_bytes[static_cast<size_t>(id)]) s += b2u[c];
        return s;
    };
    io::OrderedObject vocab;
    for (int32_t i = 0; i < static_cast<int32_t>(token_bytes.size()); ++i)
        vocab.set(i < first_byte ? token_bytes[static_cast<size_t>(i)] : unicode(i), i);
    nlohmann::ordered_json merge_list = nlohmann::ordered_json::array();
    for (const auto& [a, b] : merges) merge_list.push_back(unicode(a) + " " + unicode(b));
    nlohmann::ordered_json added = nlohmann::ordered_json::array();
    for (size_t i = 0; i < options.specials.size(); ++i)
        added.push_back({{"id", i},
                         {"content", options.specials[i]},
                         {"single_word", false},
                         {"lstrip", false},
                         {"rstrip", false},
                         {"normalized", false},
                         {"special", true}});
    nlohmann::ordered_json byte_level = {{"type", "ByteLevel"},
                                         {"add_prefix_space", false},
                                         {"trim_offsets", true},
                                         {"use_regex", true}};
    nlohmann::ordered_json j = {{"version", "1.0"},
                                {"truncation", nullptr},
                                {"padding", nullptr},
                                {"added_tokens", added},
                                {"normalizer", nullptr},
                                {"pre_tokenizer", byte_level},
                                {"post_processor", byte_level},
                                {"decoder", byte_level},
                                {"model",
                                 {{"type", "BPE"},
                                  {"dropout", nullptr},
                                  {"unk_token", nullptr},
                                  {"continuing_subword_prefix", nullptr},
                                  {"end_of_word_suffix", nullptr},
                                  {"fuse_unk", false},
                                  {"byte_fallback", false},
                                  {"vocab", vocab.take()},
                                  {"merges", merge_list}}}};
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::strict) + "\n";
}

}  // namespace moetrain

// Training a byte-level BPE (GPT-2 split regex) and writing it as a Hugging Face tokenizer.json.
// Piece counting runs in parallel over the files; merging then repeatedly picks the most frequent
// adjacent pair over the counted pieces (ties: the smallest pair of ids), so the same input
// always gives the same file. Each merge recounts the pairs: simple, and fast enough for the
// vocabularies of small corpora (the incremental pair index of large trainers is not done).
#include <algorithm>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>

#include "io/file.h"
#include "moetrain/error.h"
#include "moetrain/tokenizer.h"
#include "tokenizer/bpe_ranks.h"
#include "tokenizer/split_pattern.h"

namespace moetrain {
namespace {

using Counts = std::unordered_map<std::string, int64_t>;

Counts count_pieces(const std::vector<std::string>& files, int threads) {
    std::vector<Counts> partial(files.size());
    std::vector<std::string> errors(files.size());
    std::vector<std::thread> pool;
    std::atomic<size_t> next{0};
    for (int t = 0; t < std::max(1, threads); ++t) {
        pool.emplace_back([&] {
            std::vector<uint32_t> ends;
            for (size_t i; (i = next++) < files.size();) {
                try {
                    std::string text = io::read_file(files[i], "--data file");
                    tok::split_pieces(tok::SplitPattern::gpt2, text, ends);
                    uint32_t begin = 0;
                    for (uint32_t end : ends) {
                        ++partial[i][text.substr(begin, end - begin)];
                        begin = end;
                    }
                } catch (const Error& e) {
                    errors[i] = e.what();
                }
            }
        });
    }
    for (auto& th : pool) th.join();
    Counts all;
    for (size_t i = 0; i < files.size(); ++i) {
        MT_CHECK(errors[i].empty(), errors[i]);
        for (auto& [piece, n] : partial[i]) all[piece] += n;
    }
    return all;
}

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
    std::sort(sorted.begin(), sorted.end());
    const int32_t first_byte = static_cast<int32_t>(options.specials.size());
    std::vector<std::string> token_bytes;  // bytes of every id
    for (const std::string& s : options.specials) token_bytes.push_back(s);
    for (int b = 0; b < 256; ++b) token_bytes.emplace_back(1, static_cast<char>(b));
    std::unordered_map<std::string, int32_t> id_of;
    for (int32_t i = first_byte; i < static_cast<int32_t>(token_bytes.size()); ++i)
        id_of.emplace(token_bytes[static_cast<size_t>(i)], i);
    struct Word {
        std::vector<int32_t> syms;
        int64_t count;
    };
    std::vector<Word> words;
    for (const auto& [piece, n] : sorted) {
        Word w{{}, n};
        for (char c : piece) w.syms.push_back(first_byte + static_cast<unsigned char>(c));
        words.push_back(std::move(w));
    }
    std::vector<std::pair<int32_t, int32_t>> merges;
    const int64_t want = options.vocab_size - base;
    while (static_cast<int64_t>(merges.size()) < want) {
        std::unordered_map<uint64_t, int64_t> pairs;
        for (const Word& w : words)
            for (size_t i = 0; i + 1 < w.syms.size(); ++i)
                pairs[(static_cast<uint64_t>(w.syms[i]) << 32) |
                      static_cast<uint32_t>(w.syms[i + 1])] += w.count;
        if (pairs.empty()) break;
        uint64_t best = 0;
        int64_t best_n = -1;
        for (const auto& [p, n] : pairs)
            if (n > best_n || (n == best_n && p < best)) best = p, best_n = n;
        const auto a = static_cast<int32_t>(best >> 32),
                   b = static_cast<int32_t>(best & 0xFFFFFFFF);
        std::string merged =
            token_bytes[static_cast<size_t>(a)] + token_bytes[static_cast<size_t>(b)];
        auto [it, fresh] = id_of.emplace(merged, static_cast<int32_t>(token_bytes.size()));
        if (fresh) token_bytes.push_back(merged);
        const int32_t m = it->second;
        for (Word& w : words) {
            size_t out = 0;
            for (size_t i = 0; i < w.syms.size(); ++i) {
                if (i + 1 < w.syms.size() && w.syms[i] == a && w.syms[i + 1] == b) {
                    w.syms[out++] = m;
                    ++i;
                } else {
                    w.syms[out++] = w.syms[i];
                }
            }
            w.syms.resize(out);
        }
        merges.emplace_back(a, b);
        if (options.progress && merges.size() % 1000 == 0)
            options.progress("merges: " + std::to_string(merges.size()) + " / " +
                             std::to_string(want));
    }

    auto unicode = [&](int32_t id) {
        std::string s;
        for (unsigned char c : token_bytes[static_cast<size_t>(id)]) s += b2u[c];
        return s;
    };
    nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
    for (int32_t i = 0; i < static_cast<int32_t>(token_bytes.size()); ++i)
        vocab[i < first_byte ? token_bytes[static_cast<size_t>(i)] : unicode(i)] = i;
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
                                  {"vocab", vocab},
                                  {"merges", merge_list}}}};
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::strict) + "\n";
}

}  // namespace moetrain

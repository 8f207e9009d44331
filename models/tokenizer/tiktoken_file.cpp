// tiktoken rank files: one "<base64 token> <rank>" per line; the rank is the token id and the
// merge priority. A pair of tokens merges when their concatenation has a rank, so every split
// of every token into two ranked halves becomes a merge. Special tokens are not in the file:
// the split pattern's standard set is used when the file has the standard size, else
// <|endoftext|> takes the id after the last rank (docs/DATA.md).
#include <string>

#include "moetrain/error.h"
#include "tokenizer/byte_level_bpe.h"

namespace moetrain {
namespace {

constexpr const char* kWhere = "tiktoken file";

int base64_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

bool base64_decode(std::string_view in, std::string& out) {
    out.clear();
    if (in.empty() || in.size() % 4 != 0) return false;
    size_t pad = 0;
    while (pad < 2 && in[in.size() - 1 - pad] == '=') ++pad;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < in.size() - pad; ++i) {
        int v = base64_value(in[i]);
        if (v < 0) return false;
        acc = (acc << 6) | static_cast<uint32_t>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += static_cast<char>((acc >> bits) & 0xFF);
        }
    }
    return !out.empty();
}

struct StandardSpecials {
    tok::SplitPattern pattern;
    size_t ranks;
    std::vector<std::pair<const char*, int32_t>> tokens;
};

const std::vector<StandardSpecials>& standard_specials() {
    static const std::vector<StandardSpecials> table = {
        {tok::SplitPattern::gpt2, 50256, {{"<|endoftext|>", 50256}}},
        {tok::SplitPattern::cl100k,
         100256,
         {{"<|endoftext|>", 100257},
          {"<|fim_prefix|>", 100258},
          {"<|fim_middle|>", 100259},
          {"<|fim_suffix|>", 100260},
          {"<|endofprompt|>", 100276}}},
        {tok::SplitPattern::o200k,
         199998,
         {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}}},
    };
    return table;
}

}  // namespace

std::shared_ptr<const Tokenizer> parse_tiktoken(std::string_view text, const std::string& pattern) {
    MT_CHECK(!pattern.empty(), "a tiktoken rank file needs a split pattern ",
             "(--tokenizer-pattern gpt2|cl100k|o200k)");
    auto t = std::make_shared<tok::ByteLevelBpe>();
    t->kind_name = "tiktoken";
    t->pattern = tok::split_pattern_by_name(pattern);
    t->ranks.set_use_whole(true);  // tiktoken looks a whole piece up before merging
    std::unordered_map<std::string, int32_t> rank_of;
    size_t pos = 0, line_no = 0;
    std::string bytes;
    while (pos < text.size()) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string_view::npos) eol = text.size();
        std::string_view line = text.substr(pos, eol - pos);
        pos = eol + 1;
        ++line_no;
        if (line.empty()) continue;
        size_t sp = line.find(' ');
        MT_CHECK(sp != std::string_view::npos, kWhere, " line ", line_no,
                 ": expected \"<base64 token> <rank>\"");
        MT_CHECK(base64_decode(line.substr(0, sp), bytes), kWhere, " line ", line_no,
                 ": the token is not valid base64");
        std::string_view num = line.substr(sp + 1);
        int64_t rank = 0;
        MT_CHECK(!num.empty() && num.size() <= 10, kWhere, " line ", line_no,
                 ": the rank is not a number");
        for (char c : num) {
            MT_CHECK(c >= '0' && c <= '9', kWhere, " line ", line_no, ": the rank is not a number");
            rank = rank * 10 + (c - '0');
        }
        MT_CHECK(rank < (1LL << 31) - 1, kWhere, " line ", line_no, ": rank ", rank,
                 " is too large");
        MT_CHECK(rank_of.emplace(bytes, static_cast<int32_t>(rank)).second, kWhere, " line ",
                 line_no, ": the token appears twice");
    }
    MT_CHECK(!rank_of.empty(), kWhere, ": no ranks");
    // Ranks are the ids 0..n-1, each once (checked before any table is sized by them).
    std::vector<bool> seen(rank_of.size(), false);
    for (const auto& [token, rank] : rank_of) {
        MT_CHECK(static_cast<size_t>(rank) < seen.size() && !seen[static_cast<size_t>(rank)],
                 kWhere, ": the ranks are not 0..", rank_of.size() - 1,
                 " (two tokens share a rank, or ranks are missing)");
        seen[static_cast<size_t>(rank)] = true;
    }
    for (const auto& [token, rank] : rank_of) t->set_id_bytes(rank, token);
    for (int b = 0; b < 256; ++b) {
        auto it = rank_of.find(std::string(1, static_cast<char>(b)));
        MT_CHECK(it != rank_of.end(), kWhere, ": byte ", b,
                 " has no rank (a byte-level vocabulary needs all 256)");
        t->ranks.set_byte_id(static_cast<uint8_t>(b), it->second);
    }
    for (const auto& [token, rank] : rank_of) {
        t->ranks.add_whole(token, rank);
        for (size_t cut = 1; cut < token.size(); ++cut) {
            auto a = rank_of.find(token.substr(0, cut));
            if (a == rank_of.end()) continue;
            auto b = rank_of.find(token.substr(cut));
            if (b != rank_of.end()) t->ranks.add_merge(a->second, b->second, rank, rank);
        }
    }
    const auto n_ranks = static_cast<int32_t>(rank_of.size());
    bool standard = false;
    for (const StandardSpecials& s : standard_specials()) {
        if (s.pattern != t->pattern || s.ranks != rank_of.size()) continue;
        for (const auto& [content, id] : s.tokens) {
            t->specials.add(content, id);
            t->set_id_bytes(id, content);
        }
        standard = true;
    }
    if (!standard) {
        t->specials.add("<|endoftext|>", n_ranks);
        t->set_id_bytes(n_ranks, "<|endoftext|>");
    }
    t->pick_eot();
    return t;
}

}  // namespace moetrain

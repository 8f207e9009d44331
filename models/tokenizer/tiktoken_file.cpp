// tiktoken rank files: one "<base64 token> <rank>" per line; the rank is the token id and the
// merge priority. A pair of tokens merges when their concatenation has a rank, so every split
// of every token into two ranked halves becomes a merge. Special tokens are not in the file:
// the split pattern's standard set is used when the file has the standard size, else
// <|endoftext|> takes the id after the last rank (docs/DATA.md).
#include <string>
#include <unordered_map>
#include <vector>

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

// Polynomial hashes of byte strings modulo the prime 2^61 - 1: the hash of every prefix of a
// token follows from the previous one, and that of every suffix from two prefixes, so all the
// splits of a token of L bytes are looked up in O(L) instead of O(L^2).
constexpr uint64_t kHashMod = (uint64_t{1} << 61) - 1;
constexpr uint64_t kHashBase = 0x1D8E4E27C47D124FULL % kHashMod;

uint64_t mul_mod(uint64_t a, uint64_t b) {
    const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
    const uint64_t r = static_cast<uint64_t>(p & kHashMod) + static_cast<uint64_t>(p >> 61);
    return r >= kHashMod ? r - kHashMod : r;
}

uint64_t add_mod(uint64_t a, uint64_t b) {
    const uint64_t r = a + b;
    return r >= kHashMod ? r - kHashMod : r;
}

// hash[k] of the first k bytes, pow[k] = base^k, for k = 0..size.
void prefix_hashes(std::string_view s, std::vector<uint64_t>& hash, std::vector<uint64_t>& pow) {
    hash.assign(s.size() + 1, 0);
    pow.assign(s.size() + 1, 1);
    for (size_t i = 0; i < s.size(); ++i) {
        hash[i + 1] = add_mod(mul_mod(hash[i], kHashBase), static_cast<unsigned char>(s[i]) + 1u);
        pow[i + 1] = mul_mod(pow[i], kHashBase);
    }
}

// Every split of a token into two tokens becomes a merge with the token's rank. Tokens are
// found by hash and length; a file with two tokens of the same hash (a 2^-61 chance for each
// pair) is refused rather than guessed between.
void add_split_merges(const std::unordered_map<std::string, int32_t>& rank_of,
                      tok::BpeRanks& ranks) {
    std::unordered_map<uint64_t, int32_t> by_hash;
    std::vector<uint32_t> length(rank_of.size());
    by_hash.reserve(rank_of.size());
    std::vector<uint64_t> hash, pow;
    for (const auto& [token, rank] : rank_of) {
        prefix_hashes(token, hash, pow);
        MT_CHECK(by_hash.emplace(hash.back(), rank).second, kWhere,
                 ": two tokens have the same 61-bit hash (rank ", rank, ")");
        length[static_cast<size_t>(rank)] = static_cast<uint32_t>(token.size());
    }
    auto find = [&](uint64_t h, size_t len) {
        auto it = by_hash.find(h);
        return it != by_hash.end() && length[static_cast<size_t>(it->second)] == len ? it->second
                                                                                     : -1;
    };
    for (const auto& [token, rank] : rank_of) {
        const size_t n = token.size();
        prefix_hashes(token, hash, pow);
        for (size_t cut = 1; cut < n; ++cut) {
            const int32_t a = find(hash[cut], cut);
            if (a < 0) continue;
            const uint64_t tail = add_mod(hash[n], kHashMod - mul_mod(hash[cut], pow[n - cut]));
            const int32_t b = find(tail, n - cut);
            if (b >= 0) ranks.add_merge(a, b, rank, rank);
        }
    }
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
    for (const auto& [token, rank] : rank_of) t->ranks.add_whole(token, rank);
    add_split_merges(rank_of, t->ranks);
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

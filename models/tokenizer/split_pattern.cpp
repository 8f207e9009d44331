// Hand-written matchers for the split regexes. Each one is called at a character index i of the
// decoded text and returns the end of the match there, trying the regex's alternatives in
// order and reproducing its greedy / backtracking choices; every character is matched by some
// alternative, so the pieces cover the text.
#include "tokenizer/split_pattern.h"

#include <thread>

#include "moetrain/error.h"
#include "tokenizer/unicode_class.h"

namespace moetrain::tok {
namespace {

constexpr uint8_t kLN = kLetter | kNumber;

// [^\s\p{L}\p{N}]: not a letter, number or white space (invalid bytes included).
inline bool is_other(const Char& c) {
    return (c.cls & (kLN | kSpace)) == 0;
}
inline bool is_space(const Char& c) {
    return (c.cls & kSpace) != 0;
}
inline bool is_letter(const Char& c) {
    return (c.cls & kLetter) != 0;
}
inline bool is_number(const Char& c) {
    return (c.cls & kNumber) != 0;
}
inline uint32_t lower_ascii(uint32_t cp) {
    return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
}

// Length in characters of a contraction at i ('s 't 're 've 'm 'll 'd), 0 if none.
size_t contraction(const Char* c, size_t i, size_t n, bool any_case) {
    if (c[i].cp != '\'' || i + 1 >= n) return 0;
    auto at = [&](size_t k) { return any_case ? lower_ascii(c[k].cp) : c[k].cp; };
    uint32_t a = at(i + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 >= n) return 0;
    uint32_t b = at(i + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

template <typename Pred>
size_t run(const Char* c, size_t i, size_t n, Pred pred) {
    while (i < n && pred(c[i])) ++i;
    return i;
}

// White space at i: the shared tail of every pattern. `newline_rule`: \s*[\r\n]+ first.
// `end_whole`: \s++$ first (tiktoken's cl100k).
size_t match_space(const Char* c, size_t i, size_t n, bool newline_rule, bool end_whole) {
    size_t k = run(c, i, n, is_space);
    if (end_whole && k == n) return n;
    if (newline_rule) {
        for (size_t p = k; p > i; --p)
            if (c[p - 1].cls & kNewline) return p;
    }
    if (k == n) return n;          // \s+(?!\S) at the end of the text
    if (k - i >= 2) return k - 1;  // \s+(?!\S) leaves the last space to the next piece
    return k;                      // \s+ (or \s)
}

size_t match_gpt2(const Char* c, size_t i, size_t n) {
    if (size_t len = contraction(c, i, n, false)) return i + len;
    size_t j = c[i].cp == ' ' && i + 1 < n ? i + 1 : i;
    for (size_t s : {j, i}) {  // " ?" prefers the space
        if (is_letter(c[s])) return run(c, s, n, is_letter);
        if (is_number(c[s])) return run(c, s, n, is_number);
        if (is_other(c[s])) return run(c, s, n, is_other);
        if (s == i) break;
    }
    return match_space(c, i, n, false, false);
}

// cl100k / llama3 / qwen2.
size_t match_cl100k(const Char* c, size_t i, size_t n, size_t max_digits, bool end_whole) {
    if (size_t len = contraction(c, i, n, true)) return i + len;
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!(c[i].cls & (kLN | kNewline)) && i + 1 < n && is_letter(c[i + 1]))
        return run(c, i + 1, n, is_letter);
    if (is_letter(c[i])) return run(c, i, n, is_letter);
    if (is_number(c[i])) {
        size_t k = i;
        while (k < n && k - i < max_digits && is_number(c[k])) ++k;
        return k;
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
    size_t j = c[i].cp == ' ' && i + 1 < n && is_other(c[i + 1]) ? i + 1 : i;
    if (is_other(c[j])) {
        size_t k = run(c, j, n, is_other);
        return run(c, k, n, [](const Char& ch) { return (ch.cls & kNewline) != 0; });
    }
    return match_space(c, i, n, true, end_whole);
}

// o200k: the letter alternatives with optional prefix, case classes and contraction suffix.
constexpr auto is_up = [](const Char& ch) { return (ch.cls & kUpperish) != 0; };
constexpr auto is_low = [](const Char& ch) { return (ch.cls & kLowerish) != 0; };

size_t o200k_letters(const Char* c, size_t i, size_t n) {
    const bool prefix = !(c[i].cls & (kLN | kNewline)) && i + 1 < n;
    // [^\r\n\p{L}\p{N}]?[U]*[Lw]+('s|...)? : the longest [U]* that leaves one [Lw] after it.
    for (size_t s : {prefix ? i + 1 : i, i}) {
        size_t u = run(c, s, n, is_up);
        for (size_t e = u + 1; e-- > s;) {
            if (e < n && is_low(c[e])) {
                size_t f = run(c, e, n, is_low);
                return f + (f < n ? contraction(c, f, n, true) : 0);
            }
        }
        if (s == i) break;
    }
    // [^\r\n\p{L}\p{N}]?[U]+[Lw]*('s|...)?
    for (size_t s : {prefix ? i + 1 : i, i}) {
        if (s < n && is_up(c[s])) {
            size_t f = run(c, run(c, s, n, is_up), n, is_low);
            return f + (f < n ? contraction(c, f, n, true) : 0);
        }
        if (s == i) break;
    }
    return i;
}

size_t match_o200k(const Char* c, size_t i, size_t n) {
    if (size_t e = o200k_letters(c, i, n); e > i) return e;
    if (is_number(c[i])) {
        size_t k = i;
        while (k < n && k - i < 3 && is_number(c[k])) ++k;
        return k;
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
    size_t j = c[i].cp == ' ' && i + 1 < n && is_other(c[i + 1]) ? i + 1 : i;
    if (is_other(c[j])) {
        size_t k = run(c, j, n, is_other);
        return run(c, k, n,
                   [](const Char& ch) { return (ch.cls & kNewline) != 0 || ch.cp == '/'; });
    }
    return match_space(c, i, n, true, false);
}

}  // namespace

SplitPattern split_pattern_by_name(const std::string& name) {
    if (name == "gpt2") return SplitPattern::gpt2;
    if (name == "cl100k") return SplitPattern::cl100k;
    if (name == "o200k") return SplitPattern::o200k;
    fail("unknown split pattern \"", name, "\" (known: gpt2, cl100k, o200k)");
}

SplitPattern split_pattern_by_regex(const std::string& regex) {
    struct Known {
        const char* regex;
        SplitPattern pattern;
    };
    static const Known known[] = {
        {R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
         SplitPattern::gpt2},
        {R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s)",
         SplitPattern::cl100k},
        {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
         SplitPattern::llama3},
        {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
         SplitPattern::qwen2},
        {R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
         SplitPattern::o200k},
    };
    for (const Known& k : known)
        if (regex == k.regex) return k.pattern;
    std::string shown = regex.size() > 60 ? regex.substr(0, 60) + "..." : regex;
    fail("unsupported split regex \"", shown,
         "\" (moetrain implements the GPT-2, cl100k, Llama-3, Qwen2 and o200k regexes)");
}

void split_pieces(SplitPattern pattern, std::string_view text, std::vector<uint32_t>& ends) {
    ends.clear();
    thread_local std::vector<Char> chars;
    decode_chars(text, chars);
    const Char* c = chars.data();
    const size_t n = chars.size() - 1;  // without the sentinel
    size_t i = 0;
    while (i < n) {
        size_t e = 0;
        switch (pattern) {
            case SplitPattern::gpt2:
                e = match_gpt2(c, i, n);
                break;
            case SplitPattern::cl100k:
                e = match_cl100k(c, i, n, 3, true);
                break;
            case SplitPattern::llama3:
                e = match_cl100k(c, i, n, 3, false);
                break;
            case SplitPattern::qwen2:
                e = match_cl100k(c, i, n, 1, false);
                break;
            case SplitPattern::o200k:
                e = match_o200k(c, i, n);
                break;
        }
        ends.push_back(c[e].offset);
        i = e;
    }
}

}  // namespace moetrain::tok

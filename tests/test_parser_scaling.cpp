// Linear time of every parser and tokenizer path (docs/RELIABILITY.md, "Linear parsers and
// checked numbers"): each case builds an input of size n and one of size 2n and checks that the
// work on the second takes less than three times as long (linear gives about 2, quadratic 4).
// n grows from a small start until one run takes kMinSeconds, so that the times are long enough
// to measure on a busy machine; each time is the fastest of kRepeats runs.
#include <doctest/doctest.h>

#include <chrono>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <unordered_map>
#include <string>
#include <vector>

#include "io/hf_mapping.h"
#include "io/hf_weights.h"
#include "io/json.h"
#include "moetrain/config.h"
#include "moetrain/safetensors.h"
#include "moetrain/tokenizer.h"
#include "tokenizer/bpe_ranks.h"

using namespace moetrain;
namespace fs = std::filesystem;

namespace {

constexpr double kMinSeconds = 0.06;
constexpr int kRepeats = 3;
constexpr double kMaxRatio = 3.4;  // linear ~2; the quadratic paths measured 4.1-6.2

double fastest(const std::function<void()>& work) {
    double best = 1e30;
    for (int r = 0; r < kRepeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        work();
        best = std::min(
            best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}

// `prepare(n)` builds an input of size n (not timed) and returns the work on it.
using Prepare = std::function<std::function<void()>(size_t n)>;

void check_linear(const std::string& what, size_t n, size_t max_n, const Prepare& prepare) {
    CAPTURE(what);
    double t1 = 0;
    for (;; n *= 2) {
        const auto work = prepare(n);
        work();  // warm up (allocator, caches)
        t1 = fastest(work);
        if (t1 >= kMinSeconds || 2 * n > max_n) break;
    }
    // A busy machine can slow one measurement down: the ratio is taken up to four times, and
    // a quadratic path fails every time.
    double ratio = 0;
    for (int attempt = 0; attempt < 4; ++attempt) {
        if (attempt > 0) t1 = fastest(prepare(n));
        const double t2 = fastest(prepare(2 * n));
        ratio = t2 / t1;
        MESSAGE(what, ": n = ", n, ": ", t1 * 1e3, " ms, 2n: ", t2 * 1e3, " ms, ratio ", ratio);
        if (ratio < kMaxRatio) break;
    }
    CHECK(ratio < kMaxRatio);
}

std::string random_word(std::mt19937& rng, size_t min_len, size_t max_len) {
    std::uniform_int_distribution<size_t> len(min_len, max_len);
    std::uniform_int_distribution<int> letter('a', 'z');
    std::string s(len(rng), ' ');
    for (char& c : s) c = static_cast<char>(letter(rng));
    return s;
}

// A byte-level vocabulary: the 256 bytes, then `n` tokens each made of two earlier ones (so
// every one of them is a merge), at most 12 bytes long.
struct Vocab {
    std::vector<std::string> tokens;                  // bytes of each id
    std::vector<std::pair<int32_t, int32_t>> merges;  // the two ids each token after 256 joins
};

Vocab make_vocab(size_t n) {
    Vocab v;
    for (int b = 0; b < 256; ++b) v.tokens.emplace_back(1, static_cast<char>(b));
    std::unordered_map<std::string, int32_t> seen;
    for (size_t i = 0; i < v.tokens.size(); ++i) seen.emplace(v.tokens[i], static_cast<int32_t>(i));
    std::mt19937 rng(7);
    while (v.merges.size() < n) {
        std::uniform_int_distribution<size_t> pick(0, v.tokens.size() - 1);
        const size_t a = pick(rng), b = pick(rng);
        std::string joined = v.tokens[a] + v.tokens[b];
        if (joined.size() > 12 || seen.count(joined)) continue;
        seen.emplace(joined, static_cast<int32_t>(v.tokens.size()));
        v.tokens.push_back(std::move(joined));
        v.merges.emplace_back(static_cast<int32_t>(a), static_cast<int32_t>(b));
    }
    return v;
}

std::string json_quoted(const std::string& s) {
    return io::json(s).dump();
}

std::string hf_tokenizer_json(const Vocab& v) {
    auto unicode = [](const std::string& bytes) {
        std::string s;
        for (unsigned char c : bytes) s += tok::byte_to_unicode()[c];
        return s;
    };
    std::string text =
        R"({"version":"1.0","added_tokens":[{"id":)" + std::to_string(v.tokens.size()) +
        R"(,"content":"<|endoftext|>","special":true}],"normalizer":null,)"
        R"("pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":true},)"
        R"("model":{"type":"BPE","vocab":{)";
    for (size_t i = 0; i < v.tokens.size(); ++i)
        text += (i ? "," : "") + json_quoted(unicode(v.tokens[i])) + ":" + std::to_string(i);
    text += R"(},"merges":[)";
    for (size_t i = 0; i < v.merges.size(); ++i)
        text += (i ? "," : "") + json_quoted(unicode(v.tokens[v.merges[i].first]) + " " +
                                             unicode(v.tokens[v.merges[i].second]));
    return text + "]}}";
}

std::string base64(const std::string& bytes) {
    static const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    size_t i = 0;
    for (; i + 3 <= bytes.size(); i += 3) {
        const uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(bytes[i]) << 16 |
                                                 static_cast<unsigned char>(bytes[i + 1]) << 8 |
                                                 static_cast<unsigned char>(bytes[i + 2]));
        for (int s = 18; s >= 0; s -= 6) out += digits[(v >> s) & 63];
    }
    const size_t rest = bytes.size() - i;
    if (rest > 0) {
        uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(bytes[i]) << 16);
        if (rest == 2) v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + 1]) << 8);
        out += digits[(v >> 18) & 63];
        out += digits[(v >> 12) & 63];
        out += rest == 2 ? digits[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

std::string tiktoken_file(const std::vector<std::string>& tokens) {
    std::string text;
    for (size_t i = 0; i < tokens.size(); ++i)
        text += base64(tokens[i]) + " " + std::to_string(i) + "\n";
    return text;
}

// A SentencePiece ModelProto (unigram) written field by field: <unk>, <s>, </s> and `n`
// distinct pieces.
std::string sentencepiece_model(size_t n) {
    auto varint = [](std::string& out, uint64_t v) {
        for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7F) | 0x80);
        out += static_cast<char>(v);
    };
    auto piece = [&](const std::string& text, float score, int type) {
        std::string p;
        p += '\x0A';
        varint(p, text.size());
        p += text;
        p += '\x15';
        char f[4];
        std::memcpy(f, &score, 4);
        p.append(f, 4);
        p += '\x18';
        varint(p, static_cast<uint64_t>(type));
        std::string field;
        field += '\x0A';
        varint(field, p.size());
        return field + p;
    };
    std::string proto = piece("<unk>", 0, 2) + piece("<s>", 0, 3) + piece("</s>", 0, 3);
    std::mt19937 rng(11);
    std::unordered_map<std::string, bool> seen;
    for (size_t i = 0; i < n;) {
        std::string w = "\xE2\x96\x81" + random_word(rng, 1, 10);
        if (!seen.emplace(w, true).second) continue;
        proto += piece(w, -static_cast<float>(i + 1) / 16, 1);
        ++i;
    }
    const std::string trainer = "\x18\x01";  // TrainerSpec.model_type = UNIGRAM
    proto += '\x12';
    proto += static_cast<char>(trainer.size());
    proto += trainer;
    return proto;
}

struct TempDir {
    fs::path path;
    explicit TempDir(const std::string& name)
        : path(fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()))) {
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string file(const std::string& name) const { return (path / name).string(); }
};

void write_text(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
}

// `n` one-element F32 tensors named like a checkpoint's, with checksums.
void write_safetensors(const std::string& path, size_t first, size_t n,
                       const std::vector<float>& data) {
    SafetensorsWriter w;
    for (size_t i = 0; i < n; ++i)
        w.add("model.layers." + std::to_string(first + i) + ".mlp.experts.weight", DType::f32, {1},
              &data[i]);
    w.add_checksums();
    w.write(path);
}

}  // namespace

TEST_CASE("parser scaling: a JSON object with n members parses in linear time") {
    check_linear("parse_json_strict", 2000, 1 << 20, [](size_t n) {
        auto text = std::make_shared<std::string>("{");
        for (size_t i = 0; i < n; ++i)
            *text += (i ? "," : "") + json_quoted("tensor." + std::to_string(i)) +
                     R"(:{"dtype":"F32","shape":[4,4],"data_offsets":[0,64]})";
        *text += "}";
        return [text] { CHECK(io::parse_json_strict(*text, "test").size() > 0); };
    });
}

TEST_CASE("parser scaling: a duplicate key among n members is still found") {
    std::string text = "{";
    for (int i = 0; i < 5000; ++i) text += json_quoted("k" + std::to_string(i)) + ":1,";
    text += R"("k4321":2})";
    CHECK_THROWS_WITH(io::parse_json_strict(text, "f.json"), "f.json: duplicate key \"k4321\"");
    CHECK_THROWS_WITH(io::parse_json_strict(R"({"a":{"b":1,"c":{"b":2},"b":3}})", "g.json"),
                      "g.json: duplicate key \"b\"");
    CHECK(io::parse_json_strict(R"({"a":{"b":1},"b":{"a":2}})", "h.json").size() == 2);
}

TEST_CASE("parser scaling: safetensors headers of n tensors are written and read in linear time") {
    TempDir dir("mt-scaling-st");
    check_linear("SafetensorsWriter::header", 2000, 1 << 20, [](size_t n) {
        auto data = std::make_shared<std::vector<float>>(n, 1.0f);
        return [data, n] {
            SafetensorsWriter w;
            for (size_t i = 0; i < n; ++i)
                w.add("t." + std::to_string(i), DType::f32, {1}, &(*data)[i]);
            w.add_checksums();
            CHECK(!w.header().empty());
        };
    });
    check_linear("SafetensorsFile", 2000, 1 << 20, [&](size_t n) {
        const std::string path = dir.file("m" + std::to_string(n) + ".safetensors");
        write_safetensors(path, 0, n, std::vector<float>(n, 1.0f));
        return [path, n] { CHECK(SafetensorsFile(path).tensors().size() == n); };
    });
}

TEST_CASE("parser scaling: a shard index of n tensors is read in linear time") {
    TempDir dir("mt-scaling-index");
    check_linear("HfWeights (index + 2 shards)", 2000, 1 << 20, [&](size_t n) {
        const fs::path sub = dir.path / std::to_string(n);
        fs::create_directories(sub);
        const std::vector<float> data(n, 1.0f);
        const std::string shard[2] = {"model-00001-of-00002.safetensors",
                                      "model-00002-of-00002.safetensors"};
        write_safetensors((sub / shard[0]).string(), 0, n / 2, data);
        write_safetensors((sub / shard[1]).string(), n / 2, n - n / 2, data);
        std::string index = R"({"metadata":{"total_size":0},"weight_map":{)";
        for (size_t i = 0; i < n; ++i)
            index += (i ? "," : "") +
                     json_quoted("model.layers." + std::to_string(i) + ".mlp.experts.weight") +
                     ":" + json_quoted(shard[i < n / 2 ? 0 : 1]);
        write_text((sub / "model.safetensors.index.json").string(), index + "}}");
        return [sub, n] { CHECK(io::HfWeights(sub.string()).names().size() == n); };
    });
}

TEST_CASE("parser scaling: a config.json with n extra entries is read in linear time") {
    const ModelConfig c = sized_config(300, 32, 2, 4, 2, 24, 16);
    const std::string base = io::hf_config_json(io::HfFamily::llama, c);
    check_linear("hf_config_from_json", 2000, 1 << 20, [&](size_t n) {
        // transformers configs carry label maps of any size; import ignores them.
        io::json j = io::json::parse(base);
        io::json labels = io::json::object();
        for (size_t i = 0; i < n; ++i) labels[std::to_string(i)] = "LABEL_" + std::to_string(i);
        j["id2label"] = labels;
        auto text = std::make_shared<std::string>(j.dump());
        return [text] {
            CHECK(io::hf_config_from_json(*text, "config.json").config.vocab_size == 300);
        };
    });
}

TEST_CASE("parser scaling: tokenizer.json with n merges loads in linear time") {
    check_linear("parse_hf_tokenizer_json", 1000, 1 << 20, [](size_t n) {
        auto text = std::make_shared<std::string>(hf_tokenizer_json(make_vocab(n)));
        return [text, n] {
            CHECK(parse_hf_tokenizer_json(*text)->vocab_size() == static_cast<int64_t>(n) + 257);
        };
    });
}

TEST_CASE("parser scaling: tiktoken files load in linear time, in their count and length") {
    check_linear("parse_tiktoken (n tokens)", 1000, 1 << 20, [](size_t n) {
        auto text = std::make_shared<std::string>(tiktoken_file(make_vocab(n).tokens));
        return [text] { CHECK(parse_tiktoken(*text, "gpt2")->vocab_size() > 256); };
    });
    // 64 tokens of n bytes each: every one of their n - 1 splits is looked up.
    check_linear("parse_tiktoken (tokens of n bytes)", 256, 1 << 22, [](size_t n) {
        std::vector<std::string> tokens;
        tokens.reserve(256 + 66);
        for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
        std::mt19937 rng(3);
        for (int i = 0; i < 64; ++i) tokens.push_back(random_word(rng, n, n));
        tokens.push_back(std::string(n, 'a'));
        tokens.push_back(std::string(n - 1, 'a'));
        auto text = std::make_shared<std::string>(tiktoken_file(tokens));
        return [text, n] {
            auto t = parse_tiktoken(*text, "gpt2");
            CHECK(t->encode(std::string(n, 'a')).size() == 1);
        };
    });
}

TEST_CASE("parser scaling: SentencePiece models with n pieces load in linear time") {
    check_linear("parse_sentencepiece", 1000, 1 << 20, [](size_t n) {
        auto proto = std::make_shared<std::string>(sentencepiece_model(n));
        return [proto, n] {
            CHECK(parse_sentencepiece(*proto)->vocab_size() == static_cast<int64_t>(n) + 3);
        };
    });
}

TEST_CASE("parser scaling: BPE training is linear in the corpus and in the vocabulary") {
    TempDir dir("mt-scaling-train");
    // A corpus of n words drawn from a fixed list of 2000.
    std::mt19937 rng(5);
    std::vector<std::string> words;
    words.reserve(20000);
    for (int i = 0; i < 20000; ++i) words.push_back(random_word(rng, 2, 9));
    auto corpus = [&](size_t n_words, size_t distinct) {
        std::string text;
        std::uniform_int_distribution<size_t> pick(0, distinct - 1);
        for (size_t i = 0; i < n_words; ++i) text += (i % 12 ? " " : "\n") + words[pick(rng)];
        const std::string path =
            dir.file("corpus" + std::to_string(n_words) + "-" + std::to_string(distinct) + ".txt");
        write_text(path, text);
        return path;
    };
    check_linear("train_byte_level_bpe (corpus of n words)", 20000, 1 << 24, [&](size_t n) {
        const std::string path = corpus(n, 2000);
        return [path] {
            BpeTrainOptions o;
            o.vocab_size = 600;
            CHECK(!train_byte_level_bpe({path}, o).empty());
        };
    });
    // n merges over about as many distinct words: the vocabulary that is written doubles.
    check_linear("train_byte_level_bpe (n merges)", 1000, 1 << 16, [&](size_t n) {
        const std::string path = corpus(8 * std::min<size_t>(n, 10000), std::min<size_t>(n, 20000));
        return [path, n] {
            BpeTrainOptions o;
            o.vocab_size = static_cast<int64_t>(256 + n);
            CHECK(!train_byte_level_bpe({path}, o).empty());
        };
    });
}

TEST_CASE("parser scaling: byte-level BPE encodes in linear time, also one long piece") {
    auto tokenizer = parse_hf_tokenizer_json(hf_tokenizer_json(make_vocab(3000)));
    std::mt19937 rng(9);
    std::vector<std::string> words;
    words.reserve(5000);
    for (int i = 0; i < 5000; ++i) words.push_back(random_word(rng, 1, 12));
    check_linear("encode (text of n words)", 20000, 1 << 24, [&](size_t n) {
        auto text = std::make_shared<std::string>();
        std::uniform_int_distribution<size_t> pick(0, words.size() - 1);
        for (size_t i = 0; i < n; ++i) *text += (i % 9 ? " " : "\n") + words[pick(rng)];
        return [text, tokenizer] { CHECK(!tokenizer->encode(*text).empty()); };
    });
    check_linear("encode (one piece of n letters)", 4096, 1 << 24, [&](size_t n) {
        auto text = std::make_shared<std::string>(random_word(rng, n, n));
        return [text, tokenizer] { CHECK(!tokenizer->encode(*text).empty()); };
    });
    check_linear("encode (n spaces and newlines)", 4096, 1 << 24, [&](size_t n) {
        auto text = std::make_shared<std::string>();
        for (size_t i = 0; i < n; ++i) *text += i % 7 ? ' ' : '\n';
        *text += "x";
        return [text, tokenizer] { CHECK(!tokenizer->encode(*text).empty()); };
    });
}

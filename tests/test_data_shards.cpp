// Token shards and tokenizer parsers from bytes: the llm.c header (both layouts, every
// rejection), ShardWriter + open_shards round trip across file boundaries with the vocabulary
// check, SHA-256 test vectors, and one-line errors of the tokenizer parsers.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <numeric>

#include "moetrain/checkpoint.h"
#include "moetrain/shards.h"
#include "moetrain/tokenizer.h"
#include "test_checkpoint_util.h"

using namespace moetrain;
using namespace moetrain::testing;

TEST_CASE("shards: header layouts and rejections") {
    std::string h16 = shard_header_bytes(2, 5), h32 = shard_header_bytes(4, 5);
    CHECK(h16.size() == 1024);
    ShardHeader a = parse_shard_header(h16, 1024 + 10, "a");
    CHECK(a.token_bytes == 2);
    CHECK(a.tokens == 5);
    CHECK(parse_shard_header(h32, 1024 + 20, "b").token_bytes == 4);
    CHECK(error_of([&] {
              parse_shard_header(h16, 1024 + 9, "t.bin");
          }).find("shard t.bin: truncated: the header says 5 tokens") == 0);
    CHECK(error_of([&] { parse_shard_header(h16, 1024 + 12, "t.bin"); }) ==
          "shard t.bin: 2 bytes after the 5 tokens the header announces");
    CHECK(error_of([&] {
              parse_shard_header(h16.substr(0, 100), 100, "s");
          }).find("shard s: truncated header") == 0);
    std::string bad = h16;
    bad[0] = 7;
    CHECK(error_of([&] { parse_shard_header(bad, 1034, "m"); }).find("shard m: bad magic") == 0);
    bad = h16;
    bad[4] = 2;
    CHECK(error_of([&] { parse_shard_header(bad, 1034, "v"); }).find("shard v: version 2") == 0);
    bad = h16;
    bad[11] = static_cast<char>(0x80);
    CHECK(error_of([&] { parse_shard_header(bad, 1034, "n"); }).find("negative token count") !=
          std::string::npos);
    CHECK(shard_token_bytes(65536) == 2);
    CHECK(shard_token_bytes(65537) == 4);
}

TEST_CASE("shards: written, mapped and read across file boundaries") {
    TempDir tmp;
    std::vector<std::string> files;
    std::vector<int32_t> all(250);
    std::iota(all.begin(), all.end(), 0);
    for (int i = 0; i < 3; ++i) {
        files.push_back(tmp.file("s_train_" + std::to_string(i) + ".bin"));
        ShardWriter w(files.back(), i == 1 ? 4 : 2);
        w.append(all.data() + i * 100, i == 2 ? 50 : 100);
        CHECK_FALSE(std::filesystem::exists(files.back()));  // nothing under the final name yet
        w.finish();
        CHECK(is_shard_file(files.back()));
    }
    TokenStream s = open_shards(files, 250);
    REQUIRE(s->size() == 250);
    std::vector<int32_t> got(120);
    s->read(40, 120, got.data());  // spans all three files
    CHECK(got == std::vector<int32_t>(all.begin() + 40, all.begin() + 160));
    TokenStream sub = open_shards(files, 250, 90, 110);
    REQUIRE(sub->size() == 20);
    std::vector<int32_t> mid(20);
    sub->read(0, 20, mid.data());
    CHECK(mid.front() == 90);
    CHECK(mid.back() == 109);
    TokenStream small_vocab = open_shards(files, 150);
    CHECK(error_of([&] { small_vocab->read(140, 20, got.data()); }) ==
          "shard " + files[1] + ": token 150 at offset 50 is >= the model's vocab_size 150");
    ShardWriter w16(tmp.file("x.bin"), 2);
    int32_t big = 70000;
    CHECK(error_of([&] { w16.append(&big, 1); }) == "token id 70000 does not fit a 16-bit shard");
}

TEST_CASE("tokenizers: SHA-256 test vectors") {
    CHECK(tokenizer_file_sha256("") ==
          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(tokenizer_file_sha256("abc") ==
          "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(tokenizer_file_sha256(std::string(1000000, 'a')) ==
          "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    CHECK(tokenizer_file_sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST_CASE("tokenizers: parsers take bytes and fail with one line") {
    CHECK(error_of([] {
              parse_hf_tokenizer_json("[1, 2");
          }).find("tokenizer.json: not valid JSON") == 0);
    CHECK(error_of([] { parse_hf_tokenizer_json("{}"); }) ==
          "tokenizer.json: pre_tokenizer is missing (byte-level BPE needs one)");
    CHECK(error_of([] {
              parse_hf_tokenizer_json(R"({"pre_tokenizer": {"type": "ByteLevel"}, "model":
                  {"type": "WordPiece"}})");
          }) == "tokenizer.json: model type must be \"BPE\"");
    CHECK(error_of([] { parse_tiktoken("", "gpt2"); }) == "tiktoken file: no ranks");
    // Hostile sizes fail before anything is sized by them.
    CHECK(error_of([] { parse_hf_tokenizer_json(std::string(100000, '[')); }) ==
          "tokenizer.json: JSON nested deeper than 64 levels");
    CHECK(error_of([] { parse_tiktoken("QQ== 2000000000\n", "gpt2"); }) ==
          "tiktoken file: the ranks are not 0..0 (two tokens share a rank, or ranks are missing)");
    CHECK(error_of([] { parse_tiktoken("QQ== x\n", "gpt2"); }) ==
          "tiktoken file line 1: the rank is not a number");
    CHECK(error_of([] { parse_tiktoken("QQ== 0\n", "gpt2"); }) ==
          "tiktoken file: byte 0 has no rank (a byte-level vocabulary needs all 256)");
    CHECK(error_of([] { parse_tiktoken("QQ== 0\n", "r50k"); }).find("unknown split pattern") == 0);
    CHECK(error_of([] {
              parse_sentencepiece("not a model");
          }).find("sentencepiece model: cannot load") == 0);
    // Pieces that would abort libsentencepiece's trie builder (found by tools/fuzz.sh) are refused
    // before the library sees them: an empty piece, a NUL byte inside one.
    const std::string unk("\x0A\x09\x0A\x05<unk>\x18\x02", 11);
    CHECK(error_of([&] { parse_sentencepiece(unk + std::string("\x0A\x02\x0A\x00", 4)); }) ==
          "sentencepiece model: piece 1 has empty text");
    CHECK(error_of([&] {
              parse_sentencepiece(unk + std::string("\x0A\x04\x0A\x02"
                                                    "a\0",
                                                    6));
          }) == "sentencepiece model: piece 1 contains a NUL byte");
    CHECK(error_of([&] { parse_sentencepiece(unk + "\x0A\x7F"); }) ==
          "sentencepiece model: cannot load (the model has a field of 127 bytes where 0 remain: "
          "truncated, or not a protobuf ModelProto)");
    CHECK(error_of([] { load_tokenizer("x.txt"); }).find("unknown tokenizer \"x.txt\"") == 0);

    // A byte-level tiktoken vocabulary round-trips any bytes.
    std::string ranks;
    const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int b = 0; b < 256; ++b)
        ranks +=
            std::string{b64[b >> 2], b64[(b & 3) << 4], '=', '='} + " " + std::to_string(b) + "\n";
    auto tok = parse_tiktoken(ranks, "o200k");
    CHECK(tok->vocab_size() == 257);
    CHECK(tok->eot_id() == 256);
    const std::string text = "a\xff\xfe <|endoftext|>\xe4\xb8";
    std::vector<int32_t> ids = tok->encode(text);
    CHECK(ids.size() == text.size() - 12);  // the special token is one id
    CHECK(tok->decode(ids) == text);
}

TEST_CASE("data: shuffled windows: a permutation per epoch, exact on resume") {
    std::vector<int32_t> v(1000);
    std::iota(v.begin(), v.end(), 0);
    TokenStream s = make_token_stream(v);
    BatchLoader a(s, 2, 5, "train");  // windows of 10: 99 per epoch
    a.set_shuffle(42);
    const int64_t n = a.batches_per_epoch();
    std::vector<int32_t> x, y;
    std::vector<std::vector<int32_t>> starts(3);
    for (int e = 0; e < 3; ++e) {
        for (int64_t k = 0; k < n; ++k) {
            a.next(x, y);
            CHECK(x[0] % 10 == 0);
            CHECK(y[9] == x[9] + 1);
            starts[static_cast<size_t>(e)].push_back(x[0]);
        }
        std::vector<int32_t> sorted = starts[static_cast<size_t>(e)];
        std::sort(sorted.begin(), sorted.end());
        for (int64_t k = 0; k < n; ++k) CHECK(sorted[static_cast<size_t>(k)] == k * 10);
    }
    CHECK(starts[0] != starts[1]);
    CHECK(a.position() == 3 * n);
    BatchLoader b(s, 2, 5, "train");  // resume in the middle of epoch 1
    b.set_shuffle(42);
    b.set_position(n + 17);
    b.next(x, y);
    CHECK(x[0] == starts[1][17]);
    BatchLoader c(s, 2, 5, "train");
    c.set_shuffle(43);
    c.next(x, y);
    std::vector<int32_t> other{x[0]};
    for (int k = 1; k < 5; ++k) {
        c.next(x, y);
        other.push_back(x[0]);
    }
    CHECK(other != std::vector<int32_t>(starts[0].begin(), starts[0].begin() + 5));
}

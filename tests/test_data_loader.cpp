// Data (MODEL.md 5): bytes tokenizer, 90/10 split, the batch loader's windows, wrap rule,
// position save/restore, and the errors (missing/empty file, unknown tokenizer, too short).
#include <doctest/doctest.h>

#include <cmath>
#include <numeric>

#include "moetrain/data.h"
#include "test_checkpoint_util.h"

using namespace moetrain;
using namespace moetrain::testing;

namespace {

// Token i has value i, so every window shows where it was read from.
std::vector<int32_t> range(int32_t first, int32_t count) {
    std::vector<int32_t> v(static_cast<size_t>(count));
    std::iota(v.begin(), v.end(), first);
    return v;
}

TokenStream iota_stream(int n) {
    return make_token_stream(range(0, n));
}

std::vector<int32_t> all_of(const TokenStream& s) {
    std::vector<int32_t> v(static_cast<size_t>(s->size()));
    s->read(0, s->size(), v.data());
    return v;
}

}  // namespace

TEST_CASE("data: bytes tokenizer reads files byte by byte") {
    TempDir tmp;
    const std::string text = std::string("Hi\n\xC3\xA9\xFF\x00z", 8);
    spit(tmp.file("a.txt"), text);
    std::vector<int32_t> ids = load_tokens(tmp.file("a.txt"));
    CHECK(ids == std::vector<int32_t>{'H', 'i', '\n', 0xC3, 0xA9, 0xFF, 0, 'z'});
    CHECK(encode_text(text) == ids);
    CHECK(decode_tokens(ids) == text);
    CHECK(decode_tokens({'a', 256, -1, 'b'}) ==
          "a\xEF\xBF\xBD\xEF\xBF\xBD"
          "b");

    CHECK(error_of([&] {
              load_tokens(tmp.file("none.txt"));
          }).find("data file " + tmp.file("none.txt") + ": cannot open") == 0);
    spit(tmp.file("empty.txt"), "");
    CHECK(error_of([&] { load_tokens(tmp.file("empty.txt")); }) ==
          "data file " + tmp.file("empty.txt") + " is empty");
    CHECK(error_of([&] { load_tokens(tmp.path.string()); }).find("data file") == 0);
    CHECK(error_of([&] {
              load_tokens(tmp.file("a.txt"), "gpt2");
          }).find("unknown tokenizer \"gpt2\" (bytes, or a file:") == 0);
    CHECK(error_of([&] { encode_text("x", "bpe"); }).find("unknown tokenizer \"bpe\"") == 0);
}

TEST_CASE("data: the bytes tokenizer needs vocab_size >= 256") {
    ModelConfig c = preset_config("tiny");
    CHECK_NOTHROW(check_tokenizer("bytes", c));
    c.vocab_size = 255;
    CHECK(error_of([&] { check_tokenizer("bytes", c); }) ==
          "tokenizer \"bytes\" needs \"vocab_size\" >= 256, the model has 255");
    CHECK(error_of([&] { check_tokenizer("sp", c); }).find("unknown tokenizer") == 0);
}

TEST_CASE("data: split is floor(0.9 n) train, the rest validation") {
    for (int n : {0, 1, 9, 10, 11, 19, 20, 99, 101, 12345}) {
        CAPTURE(n);
        std::vector<int32_t> tokens = range(0, n);
        TokenSplit s = split_tokens(tokens);
        const size_t n_train = static_cast<size_t>(std::floor(0.9 * n));
        REQUIRE(s.train->size() == static_cast<int64_t>(n_train));
        CHECK(s.val->size() == n - static_cast<int64_t>(n_train));
        CHECK(all_of(s.train) == range(0, static_cast<int32_t>(n_train)));
        CHECK(all_of(s.val) ==
              range(static_cast<int32_t>(n_train), n - static_cast<int32_t>(n_train)));
    }
}

TEST_CASE("data: batch loader windows and wrap rule") {
    // n = 25, B*T = 6: windows at 0, 6, 12, 18 (18 + 7 = 25 still fits), then back to 0.
    BatchLoader loader(iota_stream(25), 2, 3);
    CHECK(loader.batches_per_epoch() == 4);
    std::vector<int32_t> x, y;
    for (int32_t start : {0, 6, 12, 18, 0, 6}) {
        CAPTURE(start);
        CHECK(loader.position() == start);
        loader.next(x, y);
        CHECK(x == range(start, 6));
        CHECK(y == range(start + 1, 6));
    }
    // Exactly one window: every batch starts at 0.
    BatchLoader one(iota_stream(7), 2, 3);
    CHECK(one.batches_per_epoch() == 1);
    for (int i = 0; i < 3; ++i) {
        one.next(x, y);
        CHECK(x == range(0, 6));
        CHECK(y == range(1, 6));
        CHECK(one.position() == 0);
    }
    // n = 24: the window at 18 would need token 24, so the wrap comes after 12.
    BatchLoader short_tail(iota_stream(24), 2, 3);
    for (int32_t start : {0, 6, 12, 0}) {
        CHECK(short_tail.position() == start);
        short_tail.next(x, y);
        CHECK(x.front() == start);
    }
    // Raw-pointer form fills B*T ids.
    BatchLoader raw(iota_stream(25), 1, 4);
    int32_t xb[4], yb[4];
    raw.next(xb, yb);
    CHECK((xb[0] == 0 && xb[3] == 3 && yb[0] == 1 && yb[3] == 4));
    CHECK(raw.position() == 4);
}

TEST_CASE("data: loader position save and restore reproduce the batch sequence") {
    TokenStream tokens = iota_stream(1000);
    BatchLoader a(tokens, 3, 7);
    std::vector<int32_t> x, y, x2, y2;
    for (int i = 0; i < 50; ++i) a.next(x, y);  // crosses the wrap (47 batches per epoch)
    BatchLoader b(tokens, 3, 7);
    b.set_position(a.position());
    for (int i = 0; i < 60; ++i) {
        a.next(x, y);
        b.next(x2, y2);
        CHECK(x == x2);
        CHECK(y == y2);
    }
    CHECK(error_of([&] { b.set_position(-1); }).find("train loader position -1 is out of range") ==
          0);
    CHECK(error_of([&] { b.set_position(979); }) ==
          "train loader position 979 is out of range: 1000 tokens cannot hold a batch of 3 x 7 "
          "starting there");
    CHECK_NOTHROW(b.set_position(978));
}

TEST_CASE("data: too little data for one batch") {
    CHECK(error_of([] { BatchLoader l(iota_stream(6), 2, 3); }) ==
          "data too short: 6 tokens in the train split, one batch of 2 x 3 needs 7");
    CHECK(error_of([] { BatchLoader l(iota_stream(100), 4, 32, "val"); }) ==
          "data too short: 100 tokens in the val split, one batch of 4 x 32 needs 129");
    CHECK(error_of([] {
              BatchLoader l(iota_stream(100), 0, 3);
          }).find("batch size and sequence length must be positive") == 0);
    CHECK(error_of([] { BatchLoader l(nullptr, 1, 3); }).find("no token stream") !=
          std::string::npos);
}

TEST_CASE("data: evaluation reads the first windows of the validation split") {
    TokenSplit s = split_tokens(range(0, 1000));  // val = tokens 900..999
    BatchLoader eval(s.val, 2, 8, "val");
    std::vector<int32_t> x, y;
    eval.next(x, y);
    CHECK(x == range(900, 16));
    eval.next(x, y);
    CHECK(x == range(916, 16));
    BatchLoader again(s.val, 2, 8, "val");  // a fresh loader starts over
    again.next(x, y);
    CHECK(x == range(900, 16));
}

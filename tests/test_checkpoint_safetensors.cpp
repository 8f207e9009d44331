// safetensors reader/writer: round trip of every dtype, byte layout (length prefix, 8-byte
// aligned header, contiguous data), and every corruption giving its one-line error naming the
// file and tensor (truncation at every byte and random byte flips never crash).
#include <doctest/doctest.h>

#include <cstring>
#include <random>

#include "moetrain/error.h"
#include "moetrain/safetensors.h"
#include "test_checkpoint_util.h"

using moetrain::DType;
using moetrain::SafetensorsFile;
using moetrain::SafetensorsWriter;
using namespace moetrain::testing;

namespace {

// A file with the given header text (not padded) followed by `data_bytes` zero bytes.
std::string raw_file(const std::string& header, size_t data_bytes) {
    std::string out(8, '\0');
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
    return out + header + std::string(data_bytes, '\0');
}

// Message of the moetrain::Error opening `path` throws ("" when it opens fine).
std::string open_error(const std::string& path) {
    return error_of([&] { SafetensorsFile f(path); });
}

const std::vector<float> kF32 = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, -7.0f};
const std::vector<int32_t> kI32 = {-1, 2, 1 << 30};
const std::vector<uint8_t> kU8 = {0, 255, 7, 9, 11};
const std::vector<uint16_t> kHalf = {0x3c00, 0xc000};

std::string write_sample(const TempDir& dir, const std::string& name = "sample.safetensors") {
    SafetensorsWriter w;
    w.add("w.f32", DType::f32, {2, 3}, kF32.data());
    w.add("w.i32", DType::i32, {3}, kI32.data());
    w.add("w.u8", DType::u8, {5}, kU8.data());
    w.add("w.bf16", DType::bf16, {2, 1}, kHalf.data());
    w.add("w.f16", DType::f16, {1, 2}, kHalf.data());
    w.add("empty", DType::f32, {0, 4}, nullptr);
    w.add("scalar", DType::f32, {}, kF32.data());
    w.set_metadata("format", "moetrain-1");
    w.set_metadata("config", "{\"a\": 1}");
    std::string path = dir.file(name);
    w.write(path);
    return path;
}

}  // namespace

TEST_CASE("safetensors: round trip of every dtype, metadata and layout") {
    TempDir dir;
    std::string path = write_sample(dir);
    SafetensorsFile f(path);
    CHECK(f.metadata().size() == 2);
    CHECK(f.metadata_at("format") == "moetrain-1");
    CHECK(f.metadata_at("config") == "{\"a\": 1}");
    REQUIRE(f.tensors().size() == 7);

    CHECK(f.read_f32("w.f32") == kF32);
    CHECK(f.find("w.f32")->shape == std::vector<int64_t>{2, 3});
    CHECK(f.find("w.f32")->shape_str() == "[2,3]");
    const auto* i32 = f.find("w.i32");
    REQUIRE(i32);
    CHECK(i32->dtype == DType::i32);
    std::vector<int32_t> ints(3);
    f.read(*i32, ints.data());
    CHECK(ints == kI32);
    std::vector<uint8_t> bytes(5);
    f.read(*f.find("w.u8"), bytes.data());
    CHECK(bytes == kU8);
    for (const char* name : {"w.bf16", "w.f16"}) {
        std::vector<uint16_t> half(2);
        f.read(*f.find(name), half.data());
        CHECK(half == kHalf);
    }
    CHECK(f.find("w.bf16")->dtype == DType::bf16);
    CHECK(f.find("w.f16")->dtype == DType::f16);
    CHECK(f.find("empty")->numel() == 0);
    CHECK(f.read_f32("empty").empty());
    CHECK(f.find("scalar")->shape.empty());
    CHECK(f.read_f32("scalar") == std::vector<float>{1.5f});
    CHECK(f.find("nope") == nullptr);

    // Layout: little-endian length, header padded with spaces to 8 bytes, data in add order.
    std::string raw = slurp(path);
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<uint8_t>(raw[i])) << (8 * i);
    CHECK(n % 8 == 0);
    CHECK(raw[8] == '{');
    CHECK(raw.substr(8, 16) == "{\"__metadata__\":");
    std::string header = raw.substr(8, n);
    CHECK(header.find_last_not_of(' ') + 1 >= header.size() - 7);
    CHECK(header.find("\"w.f32\"") < header.find("\"w.i32\""));
    CHECK(raw.size() == 8 + n + 24 + 12 + 5 + 4 + 4 + 0 + 4);
    float first;
    std::memcpy(&first, raw.data() + 8 + n, 4);
    CHECK(first == 1.5f);
    // Deterministic: the same tensors give the same bytes.
    CHECK(slurp(write_sample(dir, "again.safetensors")) == raw);
}

TEST_CASE("safetensors: writer rejects duplicate, reserved and missing data") {
    SafetensorsWriter w;
    w.add("a", DType::f32, {1}, kF32.data());
    CHECK_THROWS_WITH_AS(w.add("a", DType::f32, {1}, kF32.data()),
                         "safetensors: tensor \"a\" added twice", moetrain::Error);
    CHECK_THROWS_AS(w.add("__metadata__", DType::f32, {1}, kF32.data()), moetrain::Error);
    CHECK_THROWS_AS(w.add("", DType::f32, {1}, kF32.data()), moetrain::Error);
    CHECK_THROWS_AS(w.add("b", DType::f32, {2}, nullptr), moetrain::Error);
    CHECK_THROWS_AS(w.add("c", DType::f32, {-1}, kF32.data()), moetrain::Error);
    TempDir dir;
    CHECK_THROWS_WITH_AS(w.write(dir.file("no/such/dir/x.safetensors")),
                         doctest::Contains("cannot create"), moetrain::Error);
}

TEST_CASE("safetensors: reader API errors name the file and tensor") {
    TempDir dir;
    std::string path = write_sample(dir);
    SafetensorsFile f(path);
    CHECK_THROWS_WITH_AS(
        f.read_f32("w.i32"),
        ("safetensors file " + path + ": tensor \"w.i32\" has dtype I32, expected F32").c_str(),
        moetrain::Error);
    CHECK_THROWS_WITH_AS(f.read_f32("absent"),
                         ("safetensors file " + path + ": missing tensor \"absent\"").c_str(),
                         moetrain::Error);
    CHECK_THROWS_WITH_AS(f.metadata_at("absent"), doctest::Contains("metadata has no \"absent\""),
                         moetrain::Error);
}

TEST_CASE("safetensors: every corruption gives its one-line error") {
    TempDir dir;
    const std::string t = R"("t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})";
    const std::string u = R"("u": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]})";
    struct Case {
        std::string bytes;
        std::string expected;
    };
    std::string huge_length = raw_file("{" + t + "}", 8);
    huge_length[5] = 1;  // header length 2^40
    const std::vector<Case> cases = {
        {"", "file too short (0 bytes"},
        {std::string("\x08\0\0", 3), "file too short (3 bytes"},
        {huge_length, "goes beyond the end of the file (69 bytes follow the length prefix)"},
        {raw_file("", 0), "header does not start with '{'"},
        {raw_file("[1, 2]", 0), "header does not start with '{'"},
        {raw_file("{\"t\": ", 0), "header: invalid JSON"},
        {raw_file("{" + t + "," + t + "}", 8), "header: duplicate key \"t\""},
        {raw_file(R"({"t": 5})", 0), "tensor \"t\": entry must be a JSON object, got 5"},
        {raw_file(R"({"t": {"dtype": "F64", "shape": [2], "data_offsets": [0, 16]}})", 16),
         "tensor \"t\": unsupported dtype \"F64\""},
        {raw_file(R"({"t": {"dtype": 1, "shape": [2], "data_offsets": [0, 8]}})", 8),
         "tensor \"t\": \"dtype\" must be a string"},
        {raw_file(R"({"t": {"shape": [2], "data_offsets": [0, 8]}})", 8),
         "tensor \"t\": missing required key \"dtype\""},
        {raw_file(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "x": 1}})", 8),
         "tensor \"t\": unknown key \"x\""},
        {raw_file(R"({"t": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8),
         "tensor \"t\": \"shape\" must hold non-negative integers, got -2"},
        {raw_file(R"({"t": {"dtype": "F32", "shape": 2, "data_offsets": [0, 8]}})", 8),
         "tensor \"t\": \"shape\" must be an array"},
        {raw_file(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", 8),
         "tensor \"t\": \"data_offsets\" must be [begin, end]"},
        {raw_file(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", 8),
         "tensor \"t\": data_offsets [8, 0) end before they begin"},
        {raw_file(R"({"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8),
         "tensor \"t\": data_offsets [0, 8) hold 8 bytes but shape [3] of F32 needs 12"},
        {raw_file(
             R"({"t": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 8]}})",
             8),
         "tensor \"t\": shape too large"},
        {raw_file(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                      "u": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                  8),
         "tensor \"u\": data_offsets [4, 8) overlap tensor \"t\""},
        {raw_file("{" + t + R"(, "u": {"dtype": "F32", "shape": [1], "data_offsets": [12, 16]}})",
                  16),
         "tensor \"u\": 4 data bytes before it belong to no tensor"},
        {raw_file("{" + t + "," + u + "}", 10),
         "tensor \"u\": truncated data: needs bytes [8, 12)"},
        {raw_file("{" + t + "}", 4), "tensor \"t\": truncated data"},
        {raw_file("{" + t + "}", 9), "1 trailing data bytes belong to no tensor"},
        {raw_file("{}", 3), "3 trailing data bytes belong to no tensor"},
        {raw_file(R"({"__metadata__": {"config": 3}})", 0),
         "\"__metadata__\" value of \"config\" must be a string"},
        {raw_file(R"({"__metadata__": []})", 0), "\"__metadata__\" must be an object"},
    };
    std::string path = dir.file("bad.safetensors");
    for (const Case& c : cases) {
        spit(path, c.bytes);
        std::string msg = open_error(path);
        CAPTURE(c.expected);
        CAPTURE(msg);
        CHECK(msg.rfind("safetensors file " + path + ": ", 0) == 0);
        CHECK(msg.find(c.expected) != std::string::npos);
        CHECK(msg.find('\n') == std::string::npos);
    }
    // A valid hand-made file with both tensors opens.
    spit(path, raw_file("{" + t + "," + u + "}   ", 12));
    CHECK(open_error(path) == "");
    CHECK(open_error(dir.file("missing.safetensors")) ==
          "safetensors file " + dir.file("missing.safetensors") + ": no such file");
    CHECK(open_error(dir.path.string()) ==
          "safetensors file " + dir.path.string() + ": not a regular file");
}

TEST_CASE("safetensors: truncation at every byte and random byte flips never crash") {
    TempDir dir;
    std::string raw = slurp(write_sample(dir));
    std::string path = dir.file("cut.safetensors");
    for (size_t len = 0; len < raw.size(); ++len) {
        spit(path, raw.substr(0, len));
        CAPTURE(len);
        CHECK(open_error(path) != "");  // every strict prefix is detected
    }
    std::mt19937 rng(7);
    int opened = 0;
    for (int trial = 0; trial < 400; ++trial) {
        std::string bad = raw;
        size_t at = rng() % bad.size();
        bad[at] = static_cast<char>(rng() & 0xff);
        spit(path, bad);
        try {  // anything but moetrain::Error escaping (or a crash) fails the test
            SafetensorsFile f(path);
            for (const auto& e : f.tensors()) {
                std::vector<char> buf(e.end - e.begin);
                f.read(e, buf.data());
            }
            ++opened;
        } catch (const moetrain::Error&) {  // NOLINT(bugprone-empty-catch): a refusal passes
        }
    }
    CHECK(opened > 0);  // flips inside the data section keep the file valid
    CHECK(opened < 400);
}

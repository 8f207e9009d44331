// TensorBoard event file writer: the TFRecord framing and the few protobuf fields of
// tensorflow.Event / Summary that scalars need, encoded by hand.
#include "tensorboard_writer.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "io/crc32c.h"
#include "moetrain/error.h"

namespace moetrain::cli {

namespace {
// Protobuf wire format: a field key is (field number << 3) | wire type.
void put_varint(std::string& out, uint64_t v) {
    while (v >= 0x80) {
        out.push_back(static_cast<char>((v & 0x7F) | 0x80));
        v >>= 7;
    }
    out.push_back(static_cast<char>(v));
}
// TFRecord's masked CRC32C: rotated right by 15 bits, plus 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t n) {
    const uint32_t c = io::crc32c(data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}
template <typename T>
void put_fixed(std::string& out, T v) {  // little-endian, as x86 stores it
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.append(b, sizeof(T));
}
void put_bytes(std::string& out, int field, const std::string& bytes) {
    put_varint(out, (static_cast<uint64_t>(field) << 3) | 2);
    put_varint(out, bytes.size());
    out += bytes;
}

double now_seconds() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// Event { double wall_time = 1; int64 step = 2; string file_version = 3 | Summary summary = 5 }
std::string event_header(int64_t step) {
    std::string e;
    put_varint(e, (1 << 3) | 1);
    put_fixed<double>(e, now_seconds());
    put_varint(e, (2 << 3) | 0);
    put_varint(e, static_cast<uint64_t>(step));
    return e;
}
}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    MT_CHECK(!ec && std::filesystem::is_directory(dir), "--tensorboard: cannot create directory ",
             dir, ec ? " (" + ec.message() + ")" : "");
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    path_ = (std::filesystem::path(dir) /
             ("events.out.tfevents." + std::to_string(static_cast<int64_t>(now_seconds())) + "." +
              host + "." + std::to_string(getpid()) + ".moetrain"))
                .string();
    out_.open(path_, std::ios::binary | std::ios::trunc);
    MT_CHECK(out_.good(), "--tensorboard: cannot write ", path_);
    std::string e = event_header(0);
    put_bytes(e, 3, "brain.Event:2");
    write_event(e);
}

void TensorBoardWriter::write_event(const std::string& event) {
    std::string rec;
    const uint64_t n = event.size();
    put_fixed<uint64_t>(rec, n);
    put_fixed<uint32_t>(rec, masked_crc32c(rec.data(), 8));
    rec += event;
    put_fixed<uint32_t>(rec, masked_crc32c(event.data(), event.size()));
    out_.write(rec.data(), static_cast<std::streamsize>(rec.size()));
    out_.flush();
    MT_CHECK(out_.good(), "--tensorboard: cannot write ", path_);
}

void TensorBoardWriter::scalars(int64_t step,
                                const std::vector<std::pair<std::string, double>>& values) {
    std::string summary;  // Summary { repeated Value value = 1; }
    for (const auto& [tag, value] : values) {
        // Summary.Value { string tag = 1; float simple_value = 2; }
        std::string v;
        put_bytes(v, 1, tag);
        put_varint(v, (2 << 3) | 5);
        put_fixed<float>(v, static_cast<float>(value));
        put_bytes(summary, 1, v);
    }
    std::string e = event_header(step);
    put_bytes(e, 5, summary);
    write_event(e);
}

void TensorBoardWriter::step_record(const nlohmann::json& j) {
    std::vector<std::pair<std::string, double>> v;
    for (const char* key :
         {"loss", "ce", "aux", "z", "lr", "grad_norm", "tokens_per_s", "loss_scale"})
        if (j.contains(key)) v.emplace_back(std::string("train/") + key, j.at(key).get<double>());
    if (j.contains("expert_load"))
        for (const auto& l : j.at("expert_load")) {
            const std::string base =
                "expert_load/layer_" + std::to_string(l.at("layer").get<int>());
            v.emplace_back(base + "/min_share", l.at("min_share").get<double>());
            v.emplace_back(base + "/max_share", l.at("max_share").get<double>());
            v.emplace_back(base + "/empty_experts", l.at("empty").get<double>());
            // MODEL.md 2: the share a capacity dropped and the expert bias range.
            for (const char* key : {"dropped", "bias_min", "bias_max"})
                if (l.contains(key)) v.emplace_back(base + "/" + key, l.at(key).get<double>());
        }
    scalars(j.at("step").get<int64_t>(), v);
}

void TensorBoardWriter::eval_record(const nlohmann::json& j) {
    const auto& e = j.at("eval");
    const std::string split = e.at("split").get<std::string>();
    std::vector<std::pair<std::string, double>> v;
    for (const char* key : {"loss", "ce", "aux", "z"})
        v.emplace_back(split + "/" + key, e.at(key).get<double>());
    scalars(j.at("step").get<int64_t>(), v);
}

}  // namespace moetrain::cli

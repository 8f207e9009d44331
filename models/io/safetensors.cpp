// safetensors reader and writer (api/moetrain/safetensors.h). The reader checks, in order:
// file size vs the length prefix, header JSON, every entry's dtype/shape/offsets, that the
// entries tile the data section exactly (no overlap, no gap, nothing beyond the file, nothing
// left over), and reports the first violation on one line naming the file and tensor.
#include "moetrain/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>

#include "io/crc32c.h"
#include "io/file.h"
#include "io/json.h"
#include "moetrain/error.h"

namespace moetrain {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this reader copies bytes as they are");

using io::json;

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // same limit as the reference implementation
constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 60;

const std::vector<std::pair<std::string, DType>> kDtypes = {{"F32", DType::f32},
                                                            {"F16", DType::f16},
                                                            {"BF16", DType::bf16},
                                                            {"I32", DType::i32},
                                                            {"U8", DType::u8}};

std::string dtype_list() {
    std::vector<std::string> names;
    names.reserve(kDtypes.size());
    for (const auto& d : kDtypes) names.push_back(d.first);
    return io::join(names);
}

// Byte size of a tensor, or fails with `problem` when shape entries are negative or the size
// would overflow.
uint64_t tensor_bytes(DType dtype, const std::vector<int64_t>& shape, const std::string& where) {
    uint64_t n = dtype_size(dtype);
    for (int64_t d : shape) {
        MT_CHECK(d >= 0, where, ": negative dimension ", d, " in shape");
        MT_CHECK(d == 0 || n <= kMaxTensorBytes / static_cast<uint64_t>(d), where,
                 ": shape too large");
        n *= static_cast<uint64_t>(d);
    }
    return n;
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ',';
        s += std::to_string(shape[i]);
    }
    s += ']';
    return s;
}

// Non-negative JSON integer, or fails naming the field.
uint64_t non_negative(const json& v, const std::string& where, const char* field) {
    MT_CHECK(v.is_number_unsigned(), where, ": \"", field,
             "\" must hold non-negative integers, got ", v.dump());
    return v.get<uint64_t>();
}

SafetensorsEntry parse_entry(const std::string& name, const json& value, const std::string& where) {
    MT_CHECK(value.is_object(), where, ": entry must be a JSON object, got ", value.dump());
    io::JsonFields f(value, where, "", {"dtype", "shape", "data_offsets"});
    SafetensorsEntry e;
    e.name = name;
    std::string dtype = f.string("dtype");
    auto it = std::find_if(kDtypes.begin(), kDtypes.end(),
                           [&](const auto& d) { return d.first == dtype; });
    MT_CHECK(it != kDtypes.end(), where, ": unsupported dtype \"", dtype, "\" (moetrain reads ",
             dtype_list(), ")");
    e.dtype = it->second;
    const json& shape = f.raw("shape");
    MT_CHECK(shape.is_array(), where, ": \"shape\" must be an array, got ", shape.dump());
    for (const json& d : shape) {
        uint64_t v = non_negative(d, where, "shape");
        MT_CHECK(v <= kMaxTensorBytes, where, ": shape too large");
        e.shape.push_back(static_cast<int64_t>(v));
    }
    const json& offsets = f.raw("data_offsets");
    MT_CHECK(offsets.is_array() && offsets.size() == 2, where,
             ": \"data_offsets\" must be [begin, end], got ", offsets.dump());
    e.begin = non_negative(offsets[0], where, "data_offsets");
    e.end = non_negative(offsets[1], where, "data_offsets");
    MT_CHECK(e.begin <= e.end, where, ": data_offsets [", e.begin, ", ", e.end,
             ") end before they begin");
    uint64_t bytes = tensor_bytes(e.dtype, e.shape, where);
    MT_CHECK(e.end - e.begin == bytes, where, ": data_offsets [", e.begin, ", ", e.end, ") hold ",
             e.end - e.begin, " bytes but shape ", e.shape_str(), " of ", dtype, " needs ", bytes);
    return e;
}

// The per-tensor checksums of metadata "crc32c": one "crc32c:<8 hex>" for every tensor.
std::map<std::string, uint32_t> parse_checksums(const std::string& text, const std::string& where,
                                                const std::map<std::string, size_t>& tensors) {
    const std::string at = where + ": metadata \"" + kSafetensorsChecksumKey + "\"";
    json j = io::parse_json_strict(text, at);
    MT_CHECK(j.is_object(), at, " is not a JSON object");
    std::map<std::string, uint32_t> out;
    for (const auto& item : j.items()) {
        MT_CHECK(tensors.count(item.key()), at, " names tensor \"", item.key(),
                 "\", which the file does not hold");
        const std::string v = item.value().is_string() ? item.value().get<std::string>() : "";
        const uint32_t crc = io::parse_crc32c_text(v);
        MT_CHECK(io::crc32c_text(crc) == v, at, ": tensor \"", item.key(),
                 "\" has no valid checksum");
        out[item.key()] = crc;
    }
    for (const auto& [name, index] : tensors)
        MT_CHECK(out.count(name), at, ": tensor \"", name, "\" has no checksum");
    return out;
}

}  // namespace

const char* safetensors_dtype_name(DType t) {
    for (const auto& d : kDtypes)
        if (d.second == t) return d.first.c_str();
    return "?";
}

int64_t SafetensorsEntry::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

std::string SafetensorsEntry::shape_str() const {
    return shape_to_string(shape);
}

// ---- writer ------------------------------------------------------------------------------

void SafetensorsWriter::add(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                            const void* data) {
    MT_CHECK(!name.empty() && name != "__metadata__", "safetensors: invalid tensor name \"", name,
             "\"");
    MT_CHECK(!names_.count(name), "safetensors: tensor \"", name, "\" added twice");
    uint64_t bytes = tensor_bytes(dtype, shape, "safetensors: tensor \"" + name + "\"");
    MT_CHECK(data || bytes == 0, "safetensors: tensor \"", name, "\" has no data");
    names_.insert(name);
    items_.push_back({name, dtype, shape, data, bytes});
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) {
    metadata_[key] = value;
}

std::string SafetensorsWriter::header() const {
    io::OrderedObject h;
    if (!metadata_.empty()) h.set("__metadata__", metadata_);
    uint64_t offset = 0;
    for (const Item& it : items_) {
        h.set(it.name, {{"dtype", safetensors_dtype_name(it.dtype)},
                        {"shape", it.shape},
                        {"data_offsets", {offset, offset + it.bytes}}});
        offset += it.bytes;
    }
    std::string text;
    try {
        text = h.take().dump();
    } catch (const io::json::exception& e) {
        fail("safetensors: cannot encode header: ", e.what());
    }
    text.append((8 - text.size() % 8) % 8, ' ');
    return text;
}

void SafetensorsWriter::add_checksums() {
    io::OrderedObject sums;
    for (const Item& it : items_) sums.set(it.name, io::crc32c_text(io::crc32c(it.data, it.bytes)));
    metadata_[kSafetensorsChecksumKey] = sums.take().dump();
}

uint32_t SafetensorsWriter::write(const std::string& path) const {
    std::string head = header();
    unsigned char prefix[8];
    uint64_t n = head.size();
    for (int i = 0; i < 8; ++i) prefix[i] = static_cast<unsigned char>(n >> (8 * i));
    io::SyncedFile f(path);
    f.write(prefix, 8);
    f.write(head.data(), head.size());
    for (const Item& it : items_) f.write(it.data, it.bytes);
    f.finish();
    return f.crc();
}

// ---- reader ------------------------------------------------------------------------------

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
    const std::string where = "safetensors file " + path;
    std::error_code ec;
    MT_CHECK(std::filesystem::exists(path, ec), where, ": no such file");
    const io::InputFile in(path, io::kSafetensorsFile);
    const uint64_t size = in.size();
    MT_CHECK(size >= 8, where, ": file too short (", size,
             " bytes; the 8-byte header length alone needs 8)");
    unsigned char prefix[8];
    in.read_at(0, prefix, 8);
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(prefix[i]) << (8 * i);
    MT_CHECK(n <= size - 8, where, ": header length ", n, " goes beyond the end of the file (",
             size - 8, " bytes follow the length prefix)");
    MT_CHECK(n <= kMaxHeaderBytes, where, ": header length ", n, " exceeds the limit of ",
             kMaxHeaderBytes, " bytes");
    std::string header(n, '\0');
    in.read_at(8, header.data(), header.size());
    MT_CHECK(n > 0 && header[0] == '{', where, ": header does not start with '{'");
    json h = io::parse_json_strict(header, where + ": header");
    MT_CHECK(h.is_object(), where, ": header is not a JSON object");
    data_start_ = 8 + n;

    for (const auto& item : h.items()) {
        if (item.key() == "__metadata__") {
            MT_CHECK(item.value().is_object(), where, ": \"__metadata__\" must be an object");
            for (const auto& kv : item.value().items()) {
                MT_CHECK(kv.value().is_string(), where, ": \"__metadata__\" value of \"", kv.key(),
                         "\" must be a string, got ", kv.value().dump());
                metadata_[kv.key()] = kv.value().get<std::string>();
            }
            continue;
        }
        tensors_.push_back(
            parse_entry(item.key(), item.value(), where + ": tensor \"" + item.key() + "\""));
    }
    std::sort(tensors_.begin(), tensors_.end(), [](const auto& a, const auto& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t data_size = size - data_start_;
    uint64_t covered = 0;
    const SafetensorsEntry* previous = nullptr;
    for (const SafetensorsEntry& e : tensors_) {
        const std::string at = where + ": tensor \"" + e.name + "\"";
        MT_CHECK(e.begin >= covered, at, ": data_offsets [", e.begin, ", ", e.end,
                 ") overlap tensor \"", previous ? previous->name : "", "\"");
        MT_CHECK(e.begin == covered, at, ": ", e.begin - covered,
                 " data bytes before it belong to no tensor (holes are not allowed)");
        MT_CHECK(e.end <= data_size, at, ": truncated data: needs bytes [", e.begin, ", ", e.end,
                 ") of the data section but the file holds only ", data_size);
        covered = e.end;
        previous = &e;
    }
    MT_CHECK(covered == data_size, where, ": ", data_size - covered,
             " trailing data bytes belong to no tensor");
    for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
    if (auto it = metadata_.find(kSafetensorsChecksumKey); it != metadata_.end())
        checksums_ = parse_checksums(it->second, where, index_);
}

const std::string& SafetensorsFile::metadata_at(const std::string& key) const {
    auto it = metadata_.find(key);
    MT_CHECK(it != metadata_.end(), "safetensors file ", path_, ": metadata has no \"", key, "\"");
    return it->second;
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsFile::read(const SafetensorsEntry& entry, void* dst) const {
    io::InputFile(path_, io::kSafetensorsFile)
        .read_at(data_start_ + entry.begin, dst, static_cast<size_t>(entry.end - entry.begin));
    if (checksums_.empty()) return;
    const uint32_t want = checksums_.at(entry.name);
    const uint32_t got = io::crc32c(dst, entry.end - entry.begin);
    MT_CHECK(got == want, "safetensors file ", path_, ": tensor \"", entry.name,
             "\": checksum mismatch (stored ", io::crc32c_text(want), ", data has ",
             io::crc32c_text(got), "): the file is corrupt; nothing was loaded from it");
}

std::vector<float> SafetensorsFile::read_f32(const std::string& name) const {
    const SafetensorsEntry* e = find(name);
    MT_CHECK(e, "safetensors file ", path_, ": missing tensor \"", name, "\"");
    MT_CHECK(e->dtype == DType::f32, "safetensors file ", path_, ": tensor \"", name,
             "\" has dtype ", safetensors_dtype_name(e->dtype), ", expected F32");
    std::vector<float> out(static_cast<size_t>(e->numel()));
    read(*e, out.data());
    return out;
}

}  // namespace moetrain

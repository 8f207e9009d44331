// Program building and the persistent program-binary cache (see cl_program_cache.h).
// File layout: 8-byte magic "MTCLBIN1", 32 hex characters of the key hash, 8-byte binary size,
// the binary. Files are written to a temporary name and renamed, so concurrent processes never
// see a partial file; a file that fails to load or build is ignored and rewritten.
#include "cl_program_cache.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "cl_errors.h"
#include "cl_sources.h"
#include "moetrain/error.h"

namespace moetrain::opencl {
namespace {

constexpr char kMagic[8] = {'M', 'T', 'C', 'L', 'B', 'I', 'N', '1'};
constexpr size_t kHashChars = 32;

// 64-bit FNV-1a over the bytes of s, continuing from h.
uint64_t fnv1a(uint64_t h, const std::string& s) {
    for (unsigned char c : s) {
        h ^= c;
        h *= 0x100000001b3ull;
    }
    return h;
}

std::string hex128(const std::string& text) {
    uint64_t a = fnv1a(0xcbf29ce484222325ull, text);
    uint64_t b = fnv1a(0x84222325cbf29ce4ull, text + "\x01moetrain");
    char buf[kHashChars + 1];
    std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(a),
                  static_cast<unsigned long long>(b));
    return buf;
}

const ClFamilySource& find_family(const std::string& family) {
    for (size_t i = 0; i < kClFamilyCount; ++i)
        if (family == kClFamilies[i].name) return kClFamilies[i];
    fail("OpenCL backend has no kernel family '", family, "'");
}

// The build log as one line (newlines folded), trimmed to a readable length.
std::string build_log(cl_program prog, cl_device_id dev) {
    size_t size = 0;
    if (clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) != CL_SUCCESS)
        return "(no build log)";
    std::string log(size, '\0');
    clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
    std::string out;
    for (char c : log) {
        if (c == '\0') break;
        if (c == '\n') {
            if (!out.empty() && out.back() != ' ') out += " | ";
        } else {
            out += c;
        }
    }
    if (out.size() > 1500) out = out.substr(0, 1500) + " ...";
    return out;
}

}  // namespace

ProgramCache::ProgramCache(cl_context ctx, cl_device_id dev, std::string device_key,
                           std::string options)
    : ctx_(ctx),
      dev_(dev),
      device_key_(std::move(device_key)),
      options_(std::move(options)),
      dir_(directory()) {}

ProgramCache::~ProgramCache() {
    for (auto& [name, prog] : programs_) clReleaseProgram(prog);
}

std::string ProgramCache::directory() {
    if (const char* env = std::getenv("MOETRAIN_CL_CACHE"); env && *env) return env;
    if (const char* home = std::getenv("HOME"); home && *home)
        return std::string(home) + "/.cache/moetrain/cl";
    return "";
}

cl_program ProgramCache::program(const std::string& family) {
    if (auto it = programs_.find(family); it != programs_.end()) return it->second;
    const ClFamilySource& src = find_family(family);
    std::string key = device_key_ + '\0' + options_ + '\0';
    for (size_t i = 0; i < kClPreludeCount; ++i) key += kClPrelude[i];
    key += src.text;
    std::string hash = hex128(key);
    std::string path = dir_.empty() ? "" : dir_ + "/" + family + "-" + hash + ".bin";
    cl_program prog = path.empty() ? nullptr : load_binary(path, hash);
    if (prog) {
        ++loaded_from_cache_;
    } else {
        prog = build_source(family, src.text);
        ++built_from_source_;
        if (!path.empty()) store_binary(prog, path, hash);
    }
    programs_[family] = prog;
    return prog;
}

cl_program ProgramCache::load_binary(const std::string& path, const std::string& key_hash) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return nullptr;
    char magic[sizeof(kMagic)];
    char hash[kHashChars];
    uint64_t size = 0;
    if (!in.read(magic, sizeof(magic)) || std::memcmp(magic, kMagic, sizeof(kMagic)) != 0 ||
        !in.read(hash, kHashChars) || key_hash.compare(0, kHashChars, hash, kHashChars) != 0 ||
        !in.read(reinterpret_cast<char*>(&size), sizeof(size)) || size == 0 ||
        size > (uint64_t{1} << 31))
        return nullptr;
    std::vector<unsigned char> bin(size);
    if (!in.read(reinterpret_cast<char*>(bin.data()), static_cast<std::streamsize>(size)))
        return nullptr;
    const unsigned char* ptr = bin.data();
    size_t len = bin.size();
    cl_int status = CL_SUCCESS, err = CL_SUCCESS;
    cl_program prog = clCreateProgramWithBinary(ctx_, 1, &dev_, &len, &ptr, &status, &err);
    if (err != CL_SUCCESS || status != CL_SUCCESS) {
        if (prog) clReleaseProgram(prog);
        return nullptr;
    }
    if (clBuildProgram(prog, 1, &dev_, options_.c_str(), nullptr, nullptr) != CL_SUCCESS) {
        clReleaseProgram(prog);
        return nullptr;
    }
    return prog;
}

cl_program ProgramCache::build_source(const std::string& family, const char* text) {
    std::vector<const char*> parts(kClPrelude, kClPrelude + kClPreludeCount);
    parts.push_back(text);
    cl_int err = CL_SUCCESS;
    cl_program prog = clCreateProgramWithSource(ctx_, static_cast<cl_uint>(parts.size()),
                                                parts.data(), nullptr, &err);
    cl_check(err, "creating the OpenCL program '" + family + "'");
    err = clBuildProgram(prog, 1, &dev_, options_.c_str(), nullptr, nullptr);
    if (err != CL_SUCCESS) {
        std::string log = build_log(prog, dev_);
        clReleaseProgram(prog);
        fail("OpenCL kernel family '", family, "' failed to build (", cl_error_name(err),
             "): ", log);
    }
    return prog;
}

void ProgramCache::store_binary(cl_program prog, const std::string& path,
                                const std::string& key_hash) {
    size_t size = 0;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr) !=
            CL_SUCCESS ||
        size == 0)
        return;
    std::vector<unsigned char> bin(size);
    unsigned char* ptr = bin.data();
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof(ptr), static_cast<void*>(&ptr),
                         nullptr) != CL_SUCCESS)
        return;
    // The cache is an optimisation: an unwritable directory only costs a recompile next time.
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) return;
    std::string tmp = path + ".tmp." + std::to_string(::getpid());
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) return;
        uint64_t size64 = size;
        out.write(kMagic, sizeof(kMagic));
        out.write(key_hash.data(), kHashChars);
        out.write(reinterpret_cast<const char*>(&size64), sizeof(size64));
        out.write(reinterpret_cast<const char*>(bin.data()), static_cast<std::streamsize>(size));
        if (!out.flush()) {
            out.close();
            std::filesystem::remove(tmp, ec);
            return;
        }
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace moetrain::opencl

// Output manifests: written with the output, checked entry by entry before anything in the
// directory is replaced or deleted.
#include "io/out_manifest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "io/crc32c.h"
#include "io/file.h"
#include "moetrain/error.h"

namespace fs = std::filesystem;

namespace moetrain::io {
namespace {

// CRC32C of a regular file (not followed if it is a link); empty when it cannot be read.
std::string file_crc(const std::string& path, uint64_t& bytes) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return "";
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return "";
    }
    uint32_t crc = 0;
    bytes = 0;
    std::string buf(1 << 20, '\0');
    for (;;) {
        const ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            ::close(fd);
            return "";
        }
        if (n == 0) break;
        crc = crc32c(buf.data(), static_cast<size_t>(n), crc);
        bytes += static_cast<uint64_t>(n);
    }
    ::close(fd);
    return crc32c_text(crc);
}

struct Manifest {
    std::string writer;
    ordered_json settings;
    bool complete = false;
    std::map<std::string, ManifestEntry> files;
};

// The manifest in `dir`, or "" in `problem` when it is not one this program wrote.
Manifest read_manifest(const std::string& dir, std::string& problem) {
    Manifest m;
    const std::string path = (fs::path(dir) / kOutputManifestName).string();
    ordered_json j;
    try {
        j = ordered_json::parse(read_file(path, kOutputManifestFile), nullptr, false);
    } catch (const Error& e) {
        problem = e.what();
        return m;
    }
    const bool shape = j.is_object() && j.contains("writer") && j["writer"].is_string() &&
                       j.contains("complete") && j["complete"].is_boolean() &&
                       j.contains("files") && j["files"].is_array() && j.contains("settings");
    if (!shape) {
        problem = "not a moetrain output manifest";
        return m;
    }
    m.writer = j["writer"].get<std::string>();
    m.settings = j["settings"];
    m.complete = j["complete"].get<bool>();
    for (const ordered_json& f : j["files"]) {
        const bool ok = f.is_object() && f.contains("name") && f["name"].is_string() &&
                        f.contains("bytes") && f["bytes"].is_number_unsigned() &&
                        f.contains("crc32c") && f["crc32c"].is_string();
        if (!ok) {
            problem = "not a moetrain output manifest";
            return m;
        }
        ManifestEntry e{f["name"].get<std::string>(), f["bytes"].get<uint64_t>(),
                        f["crc32c"].get<std::string>()};
        m.files[e.name] = e;
    }
    return m;
}

}  // namespace

ManifestEntry manifest_entry(const std::string& dir, const std::string& name) {
    ManifestEntry e;
    e.name = name;
    const std::string path = (fs::path(dir) / name).string();
    e.crc = file_crc(path, e.bytes);
    MT_CHECK(!e.crc.empty(), "cannot read back ", path, " for the output manifest");
    return e;
}

void write_output_manifest(const std::string& dir, const std::string& writer,
                           const ordered_json& settings, const std::vector<ManifestEntry>& files,
                           bool complete) {
    ordered_json j;
    j["writer"] = writer;
    j["complete"] = complete;
    j["settings"] = settings;
    j["files"] = ordered_json::array();
    for (const ManifestEntry& e : files)
        j["files"].push_back({{"name", e.name}, {"bytes", e.bytes}, {"crc32c", e.crc}});
    write_file_atomic((fs::path(dir) / kOutputManifestName).string(), j.dump(2) + "\n",
                      "output manifest");
}

EarlierOutput read_earlier_output(const std::string& dir, const std::string& writer,
                                  const std::string& what) {
    EarlierOutput out;
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(dir, ec);
    if (!fs::exists(st)) return out;
    MT_CHECK(fs::is_directory(st), what, " ", dir, " exists and is not a directory");
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename());
    MT_CHECK(!ec, what, " ", dir, ": cannot list the directory: ", ec.message());
    if (names.empty()) return out;
    const std::string refuse = "; choose a new or empty directory";
    std::string problem;
    Manifest m;
    const fs::path mpath = fs::path(dir) / kOutputManifestName;
    if (fs::exists(fs::symlink_status(mpath, ec))) {
        MT_CHECK(fs::is_regular_file(fs::symlink_status(mpath, ec)), what, " ", dir, " holds ",
                 kOutputManifestName, ", which is not a regular file", refuse);
        m = read_manifest(dir, problem);
        MT_CHECK(problem.empty(), what, " ", dir, " holds ", kOutputManifestName, " (", problem,
                 ")", refuse);
        MT_CHECK(m.writer == writer, what, " ", dir, " holds the output of `", m.writer,
                 "`, not of `", writer, "`", refuse);
        out.has_manifest = true;
        out.settings = m.settings;
        out.complete = m.complete;
    }
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) {
        if (n == kOutputManifestName) continue;
        const std::string path = (fs::path(dir) / n).string();
        auto it = m.files.find(n);
        MT_CHECK(it != m.files.end(), what, " ", dir, " holds ", n, ", which no earlier `", writer,
                 "` wrote there (",
                 out.has_manifest ? "its manifest does not list it"
                                  : "no manifest " + std::string(kOutputManifestName),
                 "): it would be lost", refuse);
        uint64_t bytes = 0;
        const std::string crc = file_crc(path, bytes);
        MT_CHECK(!crc.empty() && crc == it->second.crc && bytes == it->second.bytes, what, " ", dir,
                 " holds ", n, ", which changed since `", writer,
                 "` wrote it (or is no longer a regular file): it would be lost", refuse);
        out.files.push_back(n);
    }
    return out;
}

void remove_earlier_output(const std::string& dir, const EarlierOutput& earlier) {
    for (const std::string& n : earlier.files) {
        const std::string path = (fs::path(dir) / n).string();
        MT_CHECK(::unlink(path.c_str()) == 0 || errno == ENOENT, "cannot remove ", path, ": ",
                 std::strerror(errno));
    }
    const std::string manifest = (fs::path(dir) / kOutputManifestName).string();
    MT_CHECK(::unlink(manifest.c_str()) == 0 || errno == ENOENT, "cannot remove ", manifest, ": ",
             std::strerror(errno));
    fsync_dir(dir);
}

std::string describe_files(const std::vector<std::string>& files) {
    std::string s = std::to_string(files.size()) + (files.size() == 1 ? " file" : " files");
    for (size_t i = 0; i < files.size() && i < 8; ++i) s += (i ? ", " : ": ") + files[i];
    if (files.size() > 8) s += ", ...";
    return s;
}

}  // namespace moetrain::io

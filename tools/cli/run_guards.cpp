// Pre-run checks of the CLI: outputs vs inputs, the run directory, the memory plan.
#include "run_guards.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "moetrain/backend.h"
#include "moetrain/checkpoint.h"
#include "moetrain/error.h"

namespace fs = std::filesystem;

namespace moetrain::cli {
namespace {

// Same file or directory (by device and inode when both exist, else by normalized path).
bool same_entry(const std::string& a, const std::string& b) {
    std::error_code ec;
    if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
    return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
}

// Is `inner` the directory `outer` or inside it?
bool inside(const std::string& inner, const std::string& outer) {
    std::error_code ec;
    fs::path in = fs::weakly_canonical(inner, ec), out = fs::weakly_canonical(outer, ec);
    for (fs::path p = in; !p.empty(); p = p.parent_path()) {
        if (p == out) return true;
        if (p == p.parent_path()) break;
    }
    return false;
}

}  // namespace

void refuse_output_over_inputs(const NamedPath& out, const std::vector<NamedPath>& inputs) {
    if (out.path.empty()) return;
    for (const NamedPath& in : inputs) {
        if (in.path.empty()) continue;
        std::error_code ec;
        const bool in_is_dir = fs::is_directory(in.path, ec);
        const bool clash =
            same_entry(out.path, in.path) || (in_is_dir && inside(out.path, in.path));
        MT_CHECK(!clash, out.flag, " ", out.path, " is the input ", in.flag, " ", in.path,
                 in_is_dir ? " (or inside it)" : "",
                 ": writing there would destroy it; choose another path");
    }
}

void check_run_dir(const std::string& out, int64_t start, bool resumed) {
    std::error_code ec;
    if (fs::is_directory(out, ec)) {
        for (const StepDir& s : list_step_dirs(out, false)) {
            if (!resumed)
                fail("--out ", out, " already holds checkpoints (",
                     fs::path(s.path).filename().string(), "); continue that run with --resume ",
                     out, " or choose another --out");
            MT_CHECK(s.step <= start, "--out ", out, " already holds ",
                     fs::path(s.path).filename().string(), ", newer than the resumed step ", start,
                     ": this run would replace or hide it; choose another --out");
        }
    }
    fs::create_directories(out, ec);
    MT_CHECK(!ec && fs::is_directory(out), "--out ", out, ": cannot create the run directory: ",
             ec ? ec.message() : "a file of that name exists");
    const std::string probe = out + "/.moetrain-probe-" + std::to_string(::getpid());
    MT_CHECK(::mkdir(probe.c_str(), 0755) == 0, "--out ", out,
             ": cannot write there: ", std::strerror(errno));
    ::rmdir(probe.c_str());
}

void check_memory_fits(double needed, double available, const std::string& what,
                       const std::string& where) {
    if (available <= 0 || needed <= available) return;
    char buf[256];
    std::snprintf(buf, sizeof buf, "needs %.3g GB, %.3g GB available", needed / 1e9,
                  available / 1e9);
    fail(what, " ", buf, " on ", where,
         " (smaller --batch / --seq, --recompute, bf16, or a larger device)");
}

double memory_available(const std::string& device_spec, double memory_limit_gb) {
    if (memory_limit_gb > 0) return memory_limit_gb * 1e9;
    try {
        return static_cast<double>(device_info(device_spec).memory_bytes);
    } catch (const Error&) {
        return 0;  // the device itself reports why it cannot be opened, later
    }
}

}  // namespace moetrain::cli

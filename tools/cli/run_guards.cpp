// Pre-run checks of the CLI: outputs vs inputs, the run directory, the memory plan.
#include "run_guards.h"

#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "io/out_path.h"
#include "moetrain/backend.h"
#include "moetrain/checkpoint.h"
#include "moetrain/error.h"

namespace fs = std::filesystem;

namespace moetrain::cli {
namespace {

bool has_glob_chars(const std::string& s) {
    return s.find_first_of("*?[") != std::string::npos;
}

// The resolved paths an input names: a glob's matches, else the path itself.
std::vector<std::string> resolved_inputs(const NamedPath& in) {
    std::error_code ec;
    std::vector<std::string> out;
    if (has_glob_chars(in.path) && !fs::exists(in.path, ec)) {
        glob_t g{};
        if (::glob(in.path.c_str(), 0, nullptr, &g) == 0)
            for (size_t i = 0; i < g.gl_pathc; ++i)
                out.push_back(io::resolve_path(g.gl_pathv[i], in.flag));
        ::globfree(&g);
        return out;
    }
    out.push_back(io::resolve_path(in.path, in.flag));
    return out;
}

// A moetrain checkpoint: state.json, or a step_NNNNNN directory with weights (a transformers
// directory holds model.safetensors too, and is not one).
bool is_checkpoint_dir(const fs::path& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return false;
    if (fs::exists(dir / "state.json", ec)) return true;
    const std::string name = dir.filename().string();
    return name.rfind("step_", 0) == 0 && fs::exists(dir / "model.safetensors", ec);
}

}  // namespace

std::string guard_output(const NamedPath& out, const std::vector<NamedPath>& inputs,
                         OutputKind kind) {
    if (out.path.empty()) return "";
    const std::string path = io::resolve_path(out.path, out.flag);
    const std::string shown =
        out.flag + " " + out.path + (path != out.path ? " (that is, " + path + ")" : "");
    for (const NamedPath& in : inputs) {
        if (in.path.empty()) continue;
        for (const std::string& r : resolved_inputs(in)) {
            const char* how = path == r                  ? "is"
                              : io::path_within(path, r) ? "lies inside"
                              : io::path_within(r, path) ? "contains"
                                                         : nullptr;
            MT_CHECK(how == nullptr, shown, " ", how, " the input ", in.flag, " ", in.path,
                     r != in.path ? " (" + r + ")" : "",
                     ": writing there could destroy it; choose another path");
        }
    }
    for (fs::path p = path; !p.empty(); p = p.parent_path()) {
        MT_CHECK(!is_checkpoint_dir(p), shown, p == fs::path(path) ? " is" : " lies inside",
                 " the checkpoint directory ", p.string(),
                 ": writing there could destroy it; choose another path");
        if (p == p.parent_path()) break;
    }
    std::error_code ec;
    if (kind != OutputKind::run_dir && fs::is_directory(path, ec))
        MT_CHECK(list_step_dirs(path, false).empty(), shown,
                 " is a training run's directory (it holds step_NNNNNN checkpoints): writing "
                 "there could destroy it; choose another path");
    return path;
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

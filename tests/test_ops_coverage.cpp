// Op tests, coverage: every op declared in api/moetrain/device.h (each `virtual ... NAME(`)
// must be listed in kTestedOps, and every listed op must be called (`.NAME(` / `->NAME(`) by
// some tests/test_ops_*.cpp file, so a new op cannot join the interface without joining the
// suite. The header is found from the tests source folder that CMake passes (MOETRAIN_TESTS_DIR;
// __FILE__ may be relative when a compiler cache rewrites paths).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "op_test_util.h"

namespace fs = std::filesystem;

namespace {
const std::set<std::string> kTestedOps = {
    "backend_name", "name", "alloc_buffer", "upload", "download", "copy", "fill", "convert",
    "synchronize", "gemm", "gemm_grouped", "add", "axpby", "add_bias", "bias_grad", "embedding_fwd",
    "embedding_bwd", "rmsnorm_fwd", "rmsnorm_bwd", "layernorm_fwd", "layernorm_bwd", "rope",
    "attention_fwd", "attention_bwd", "act_fwd", "act_bwd", "swiglu_fwd", "swiglu_bwd",
    "softmax", "router_fwd", "router_bwd", "router_aux_loss", "hash_route", "moe_sort",
    "gather_rows", "moe_combine", "moe_combine_bwd", "cross_entropy", "sum", "sum_squares",
    "adamw", "adamw8bit", "sgd", "sample", "run_recorded", "kv_append",
};

std::string read_text(const fs::path& p) {
    std::ifstream in(p);
    REQUIRE_MESSAGE(in.good(), "cannot read " << p.string());
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

fs::path tests_dir() { return fs::path(MOETRAIN_TESTS_DIR); }
}  // namespace

TEST_CASE("ops: coverage, every Device op is in kTestedOps and called by an op test") {
    const std::string header = read_text(tests_dir() / ".." / "api" / "moetrain" / "device.h");
    std::set<std::string> declared;
    const std::regex virt(R"(virtual\s+[\w:<>,\s\*&]*?\b(\w+)\s*\()");
    for (auto it = std::sregex_iterator(header.begin(), header.end(), virt); it != std::sregex_iterator(); ++it)
        declared.insert((*it)[1].str());
    REQUIRE(declared.size() >= 40);  // the parse found the interface
    for (const auto& op : declared) {
        INFO("device.h declares '" << op << "' but kTestedOps in " << __FILE__ << " does not list it");
        CHECK(kTestedOps.count(op) == 1);
    }
    for (const auto& op : kTestedOps) {
        INFO("kTestedOps lists '" << op << "' which device.h does not declare");
        CHECK(declared.count(op) == 1);
    }

    std::string calls;  // every test_ops_*.cpp except this file
    for (const auto& e : fs::directory_iterator(tests_dir())) {
        const std::string f = e.path().filename().string();
        if (f.rfind("test_ops_", 0) == 0 && f != fs::path(__FILE__).filename().string())
            calls += read_text(e.path());
    }
    for (const auto& op : kTestedOps) {
        INFO("no tests/test_ops_*.cpp calls '" << op << "' on a device");
        CHECK((calls.find("." + op + "(") != std::string::npos || calls.find("->" + op + "(") != std::string::npos));
    }
}

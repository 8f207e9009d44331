// Op tests, coverage: every op of the Device interface (each row `MT_DEVICE_OP(NAME, ...` of
// api/moetrain/device_ops.def and each `virtual ... NAME(` left in api/moetrain/device.h) must
// be listed in kTestedOps, and every listed op must be called (`.NAME(` / `->NAME(`) by some
// tests/test_ops_*.cpp file, so a new op cannot join the interface without joining the suite;
// docs/OPS.md's op table must list every row. The files are found from the tests source folder
// that CMake passes (MOETRAIN_TESTS_DIR; __FILE__ may be relative when a compiler cache
// rewrites paths).
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
    "attention_kernel",
    "backend_name",
    "name",
    "alloc_buffer",
    "max_buffer_bytes",
    "upload",
    "download",
    "copy",
    "fill",
    "convert",
    "synchronize",
    "gemm",
    "gemm_grouped",
    "gemm_grouped_kernel",
    "gemm_epilogue",
    "gemm_epilogue_kernel",
    "add",
    "axpby",
    "add_bias",
    "bias_grad",
    "embedding_fwd",
    "embedding_bwd",
    "rmsnorm_fwd",
    "rmsnorm_bwd",
    "layernorm_fwd",
    "layernorm_bwd",
    "rope",
    "attention_fwd",
    "attention_bwd",
    "act_fwd",
    "act_bwd",
    "swiglu_fwd",
    "swiglu_bwd",
    "softmax",
    "router_fwd",
    "router_bwd",
    "router_aux_loss",
    "hash_route",
    "moe_sort",
    "gather_rows",
    "moe_combine",
    "moe_combine_bwd",
    "cross_entropy",
    "sum",
    "sum_squares",
    "adamw",
    "adamw8bit",
    "sgd",
    "sample",
    "run_recorded",
    "kv_append",
    "tensor_owner",
    "moe_capacity",
    "moe_capacity_shares",
    "add_counts",
    "expert_bias_update",
};

std::string read_text(const fs::path& p) {
    std::ifstream in(p);
    REQUIRE_MESSAGE(in.good(), "cannot read " << p.string());
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

fs::path tests_dir() {
    return fs::path(MOETRAIN_TESTS_DIR);
}
}  // namespace

TEST_CASE("ops: coverage, every Device op is in kTestedOps and called by an op test") {
    const fs::path api = tests_dir() / ".." / "api" / "moetrain";
    const std::string header = read_text(api / "device.h"),
                      table = read_text(api / "device_ops.def");
    std::set<std::string> declared;
    const std::regex virt(R"(virtual\s+[\w:<>,\s\*&]*?\b(\w+)\s*\()");
    for (auto it = std::sregex_iterator(header.begin(), header.end(), virt);
         it != std::sregex_iterator(); ++it)
        if ((*it)[1].str().find("_impl") == std::string::npos) declared.insert((*it)[1].str());
    const std::regex row(R"(\nMT_DEVICE_OP\((\w+),)");
    std::set<std::string> rows;  // the op table's rows
    for (auto it = std::sregex_iterator(table.begin(), table.end(), row);
         it != std::sregex_iterator(); ++it)
        rows.insert((*it)[1].str());
    declared.insert(rows.begin(), rows.end());
    REQUIRE(declared.size() >= 40);  // the parse found the interface
    for (const auto& op : declared) {
        INFO("device.h declares '" << op << "' but kTestedOps in " << __FILE__
                                   << " does not list it");
        CHECK(kTestedOps.count(op) == 1);
    }
    for (const auto& op : kTestedOps) {
        INFO("kTestedOps lists '" << op << "' which device.h does not declare");
        CHECK(declared.count(op) == 1);
    }

    // docs/OPS.md's op table lists every row of the table ("| op, op | computes | ...").
    const std::string doc = read_text(tests_dir() / ".." / "docs" / "OPS.md");
    std::set<std::string> documented;
    const std::regex doc_row(R"(\n\| ([\w, ]+) \|)");
    for (auto it = std::sregex_iterator(doc.begin(), doc.end(), doc_row);
         it != std::sregex_iterator(); ++it) {
        std::stringstream names((*it)[1].str());
        for (std::string name; std::getline(names, name, ',');)
            documented.insert(name.substr(name.find_first_not_of(' ')));
    }
    for (const auto& op : rows) {
        INFO("docs/OPS.md's op table does not list '" << op << "' of device_ops.def");
        CHECK(documented.count(op) == 1);
    }

    std::string calls;  // every test_ops_*.cpp except this file
    for (const auto& e : fs::directory_iterator(tests_dir())) {
        const std::string f = e.path().filename().string();
        if (f.rfind("test_ops_", 0) == 0 && f != fs::path(__FILE__).filename().string())
            calls += read_text(e.path());
    }
    for (const auto& op : kTestedOps) {
        INFO("no tests/test_ops_*.cpp calls '" << op << "' on a device");
        CHECK((calls.find("." + op + "(") != std::string::npos ||
               calls.find("->" + op + "(") != std::string::npos));
    }
}

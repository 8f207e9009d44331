// doctest main of the SIMT harness suite, and its kernel-coverage check: every `__global__`
// function declared in kernels_cuda/*.cuh must have been launched by some test, so a kernel
// added without a harness test fails the suite.
//
//   moetrain_simt_tests                      every test, then the coverage check
//   moetrain_simt_tests -sf=... --launch-log=F
//                                            a part of the tests (any doctest filter); the names
//                                            of the kernels it launched are written to F
//   moetrain_simt_tests --kernel-coverage F1 F2 ...
//                                            runs no test: the coverage check over the union
//                                            of launch logs (ctest runs the suite in parts,
//                                            tests/simt/CMakeLists.txt, and checks them so)
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <exception>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "kernel_scan.h"
#include "simt.h"

namespace {

int check_coverage(const std::set<std::string>& launched) {
    auto missing = simt_test::untested_kernels(MOETRAIN_KERNELS_CUDA_DIR, launched);
    if (!missing.empty()) {
        std::fprintf(stderr,
                     "SIMT coverage: %zu kernel(s) in kernels_cuda/ were never launched "
                     "by a harness test:\n",
                     missing.size());
        for (auto& m : missing) std::fprintf(stderr, "  %s\n", m.c_str());
        return 1;
    }
    std::printf("SIMT coverage: every __global__ kernel in kernels_cuda/ ran under the harness\n");
    return 0;
}

std::set<std::string> read_launch_logs(const std::vector<std::string>& paths) {
    if (paths.empty()) throw std::runtime_error("--kernel-coverage needs at least one launch log");
    std::set<std::string> launched;
    for (auto& path : paths) {
        std::ifstream in(path);
        if (!in) throw std::runtime_error("cannot read launch log '" + path + "'");
        for (std::string name; std::getline(in, name);)
            if (!name.empty()) launched.insert(name);
    }
    return launched;
}

void write_launch_log(const std::string& path) {
    std::ofstream out(path, std::ios::trunc);
    for (auto& name : simt::launched_kernels()) out << name << '\n';
    out.close();
    if (!out) throw std::runtime_error("cannot write launch log '" + path + "'");
}

int run(int argc, char** argv) {
    constexpr std::string_view kLog = "--launch-log=";
    std::string launch_log;
    std::vector<char*> doctest_args{argv[0]};
    for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i];
        if (arg == "--kernel-coverage")
            return check_coverage(read_launch_logs({argv + i + 1, argv + argc}));
        if (arg.starts_with(kLog))
            launch_log = arg.substr(kLog.size());
        else
            doctest_args.push_back(argv[i]);
    }
    doctest::Context context(static_cast<int>(doctest_args.size()), doctest_args.data());
    int rc = context.run();
    if (context.shouldExit() || rc != 0) return rc;
    if (!launch_log.empty()) write_launch_log(launch_log);
    if (doctest_args.size() > 1) return rc;  // a filtered run covers only its part
    return check_coverage(simt::launched_kernels());
}

}  // namespace

// The kernel scan and the logs read files and may throw: that ends the suite with one line, not
// a crash.
int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "SIMT suite: %s\n", e.what());
        return 1;
    }
}

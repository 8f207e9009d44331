// doctest main of the SIMT harness suite. After a complete run (no test filter on the command
// line) it checks kernel coverage: every `__global__` function declared in kernels_cuda/*.cuh
// must have been launched by some test, so a kernel added without a harness test fails the suite.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <exception>

#include "kernel_scan.h"
#include "simt.h"

namespace {

int run(int argc, char** argv) {
    doctest::Context context(argc, argv);
    int rc = context.run();
    if (context.shouldExit() || rc != 0 || argc > 1) return rc;
    auto missing = simt_test::untested_kernels(MOETRAIN_KERNELS_CUDA_DIR, simt::launched_kernels());
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

}  // namespace

// The kernel scan reads files and may throw: that ends the suite with one line, not a crash.
int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "SIMT suite: %s\n", e.what());
        return 1;
    }
}

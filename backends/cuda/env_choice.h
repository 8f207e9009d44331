// The CUDA backend's run-time switches read from the environment when a device opens
// (MOETRAIN_CUDA_GROUPED_GEMM, MOETRAIN_CUDA_ATTENTION): plain C++, included by nvcc and g++
// sources alike.
#pragma once

#include <cstdlib>
#include <string>

#include "moetrain/error.h"

namespace moetrain::cuda {

// The value of `name`, `fallback` when it is unset or empty; any value other than a or b
// throws in one line naming it ("NAME=value: expected a or b").
inline std::string env_choice(const char* name, const char* fallback, const char* a,
                              const char* b) {
    const char* v = std::getenv(name);
    const std::string choice = v && *v ? v : fallback;
    MT_CHECK(choice == a || choice == b, name, "=", choice, ": expected ", a, " or ", b);
    return choice;
}

}  // namespace moetrain::cuda

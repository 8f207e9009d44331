// The built-in CPU backend (OpenMP loops, a tuned GEMM library for every matrix product).
#pragma once

#include "moetrain/backend.h"

namespace moetrain {

// The registry's constructor for the built-in backend (owned by the registry).
Backend* create_cpu_backend();

}  // namespace moetrain

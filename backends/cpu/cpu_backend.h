// The built-in CPU backend (OpenMP loops, a tuned GEMM library for every matrix product).
#pragma once

#include "moetrain/backend.h"

namespace moetrain {

// The built-in backend for the registry: one process-lifetime object, the same on every call.
Backend* create_cpu_backend();

}  // namespace moetrain

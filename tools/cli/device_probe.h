// Short probes that measure what a device reaches, through the Device interface only: a large
// GEMM (compute) and a large device-to-device copy (memory bandwidth). Used by `bench` when
// the device's peak is neither given nor known (device_peak.h).
#pragma once

#include <string>

#include "moetrain/device.h"

namespace moetrain::cli {

struct ProbeResult {
    double rate = 0;   // GFLOP/s or GB/s: the best of the timed repetitions
    std::string what;  // "2048^3 bf16 GEMM", "256 MiB copy"
};

// C[n,n] = A[n,n] @ B[n,n] with A and B stored in `compute` (f32, bf16 or f16); n is chosen
// from the device's backend (larger on a GPU). 2 n^3 FLOPs per product.
ProbeResult probe_gemm(Device& device, DType compute);

// dst = src over a buffer of `bytes`; counts the bytes read plus the bytes written.
ProbeResult probe_copy(Device& device);

}  // namespace moetrain::cli

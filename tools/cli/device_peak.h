// The peak compute and memory bandwidth `moetrain bench` divides by (MFU, the decode bound),
// and where each figure came from: given on the command line, NVIDIA's published figure for
// a known GPU (by name and compute capability, per precision), the bandwidth the CUDA runtime
// reports, or measured on the device by a short GEMM / copy probe (docs/BENCHMARKS.md).
#pragma once

#include <string>
#include <string_view>

#include "moetrain/backend.h"
#include "moetrain/device.h"
#include "moetrain/precision.h"

namespace moetrain::cli {

// One row of the table of known GPUs: dense (no 2:4 sparsity) peaks in TFLOP/s and the DRAM
// bandwidth in GB/s, from NVIDIA's datasheets.
struct KnownGpu {
    const char* name_part;  // matched against the device name (the first matching row wins)
    const char* compute_capability;
    const char* label;       // "NVIDIA H200"
    double tensor16_tflops;  // bf16 / fp16 tensor cores, fp32 accumulation
    double fp32_tflops;      // fp32 without TF32 (what moetrain's fp32 precision runs)
    double bandwidth_gbs;
};

// The table row for this device, or nullptr: the name must contain name_part and the compute
// capability must equal the row's.
const KnownGpu* find_known_gpu(std::string_view device_name, std::string_view compute_capability);

struct PeakFigure {
    double value = 0;    // GFLOP/s or GB/s
    std::string source;  // "table: NVIDIA H200", "measured: ...", "given: --peak-gflops"
};

// The dense peak of `device` (described by `info`) for matrix products at `precision`: `given`
// (> 0) as is, else the table, else a GEMM probe at the precision's compute type.
PeakFigure compute_peak(Device& device, const DeviceInfo& info, Precision precision, double given);

// The memory bandwidth of `device`: `given` (> 0) as is, else the table, else what the runtime
// reports (DeviceInfo::memory_bandwidth_gbs), else a copy probe.
PeakFigure bandwidth_peak(Device& device, const DeviceInfo& info, double given);

}  // namespace moetrain::cli

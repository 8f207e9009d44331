// Peaks for `bench`: given, known (NVIDIA's datasheets), reported or measured (device_peak.h).
#include "device_peak.h"

#include <array>

#include "device_probe.h"

namespace moetrain::cli {
namespace {

// Dense figures (NVIDIA lists tensor-core rates "with sparsity": these are half of those).
// Sources, cited in docs/BENCHMARKS.md: the H100, H200 and A100 datasheets. More specific
// names come first ("H100 PCIe" before "H100", "GH200" before "H200"). A bandwidth of 0 leaves
// it to the runtime's report (GH200 ships with HBM3 or HBM3e).
constexpr std::array kKnownGpus{
    KnownGpu{"GH200", "9.0", "NVIDIA GH200", 989.4, 66.9, 0},
    KnownGpu{"H200 NVL", "9.0", "NVIDIA H200 NVL", 835.5, 60.0, 4800},
    KnownGpu{"H200", "9.0", "NVIDIA H200", 989.4, 66.9, 4800},
    KnownGpu{"H100 NVL", "9.0", "NVIDIA H100 NVL", 835.5, 60.0, 3900},
    KnownGpu{"H100 PCIe", "9.0", "NVIDIA H100 PCIe", 756.5, 51.2, 2000},
    KnownGpu{"H100", "9.0", "NVIDIA H100 SXM", 989.4, 66.9, 3350},
    KnownGpu{"A100-SXM4-80GB", "8.0", "NVIDIA A100 SXM4 80GB", 312, 19.5, 2039},
    KnownGpu{"A100-SXM4-40GB", "8.0", "NVIDIA A100 SXM4 40GB", 312, 19.5, 1555},
    KnownGpu{"A100 80GB PCIe", "8.0", "NVIDIA A100 PCIe 80GB", 312, 19.5, 1935},
    KnownGpu{"A100-PCIE-40GB", "8.0", "NVIDIA A100 PCIe 40GB", 312, 19.5, 1555},
};

std::string measured(const ProbeResult& r) {
    return "measured: " + r.what;
}

}  // namespace

const KnownGpu* find_known_gpu(std::string_view device_name, std::string_view compute_capability) {
    for (const KnownGpu& g : kKnownGpus)
        if (device_name.find(g.name_part) != std::string_view::npos &&
            compute_capability == g.compute_capability)
            return &g;
    return nullptr;
}

PeakFigure compute_peak(Device& device, const DeviceInfo& info, Precision precision, double given) {
    if (given > 0) return {given, "given: --peak-gflops"};
    if (const KnownGpu* g = find_known_gpu(info.name, info.compute_capability)) {
        const bool tensor = precision != Precision::fp32;
        return {1000.0 * (tensor ? g->tensor16_tflops : g->fp32_tflops),
                std::string("table: ") + g->label +
                    (tensor ? ", dense tensor cores" : ", fp32 without TF32")};
    }
    const ProbeResult r = probe_gemm(device, compute_dtype(precision));
    return {r.rate, measured(r)};
}

PeakFigure bandwidth_peak(Device& device, const DeviceInfo& info, double given) {
    if (given > 0) return {given, "given: --bandwidth-gbs"};
    const KnownGpu* g = find_known_gpu(info.name, info.compute_capability);
    if (g && g->bandwidth_gbs > 0) return {g->bandwidth_gbs, std::string("table: ") + g->label};
    if (info.memory_bandwidth_gbs > 0)
        return {info.memory_bandwidth_gbs, "reported: memory clock x bus width"};
    const ProbeResult r = probe_copy(device);
    return {r.rate, measured(r)};
}

}  // namespace moetrain::cli

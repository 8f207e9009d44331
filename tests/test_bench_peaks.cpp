// `moetrain bench`'s peaks (tools/cli/device_peak.h): NVIDIA's figures for known GPUs by name
// and compute capability, per precision; the runtime's bandwidth; the probes otherwise; a
// given figure always wins. Runs on the cpu device (the table needs no GPU).
#include <doctest/doctest.h>

#include <string>

#include "../tools/cli/device_peak.h"
#include "moetrain/backend.h"

using namespace moetrain;
using namespace moetrain::cli;

namespace {

DeviceInfo gpu(const std::string& name, const std::string& cc, double reported_gbs = 0) {
    DeviceInfo d;
    d.name = name;
    d.compute_capability = cc;
    d.memory_bandwidth_gbs = reported_gbs;
    return d;
}

bool starts_with(const std::string& s, const std::string& prefix) {
    return s.rfind(prefix, 0) == 0;
}

}  // namespace

TEST_CASE("bench: known GPUs are found by name and compute capability") {
    const KnownGpu* h200 = find_known_gpu("NVIDIA H200", "9.0");
    REQUIRE(h200 != nullptr);
    CHECK(std::string(h200->label) == "NVIDIA H200");
    CHECK(h200->tensor16_tflops == doctest::Approx(989.4));
    CHECK(h200->bandwidth_gbs == doctest::Approx(4800));
    // The more specific rows win over "H100" / "H200".
    CHECK(std::string(find_known_gpu("NVIDIA H100 PCIe", "9.0")->label) == "NVIDIA H100 PCIe");
    CHECK(std::string(find_known_gpu("NVIDIA H100 NVL", "9.0")->label) == "NVIDIA H100 NVL");
    CHECK(std::string(find_known_gpu("NVIDIA H100 80GB HBM3", "9.0")->label) == "NVIDIA H100 SXM");
    CHECK(std::string(find_known_gpu("NVIDIA GH200 480GB", "9.0")->label) == "NVIDIA GH200");
    CHECK(std::string(find_known_gpu("NVIDIA A100-SXM4-80GB", "8.0")->label) ==
          "NVIDIA A100 SXM4 80GB");
    // A name with another compute capability, or an unknown GPU, is not in the table.
    CHECK(find_known_gpu("NVIDIA H100 80GB HBM3", "8.0") == nullptr);
    CHECK(find_known_gpu("NVIDIA GeForce RTX 4090", "8.9") == nullptr);
    CHECK(find_known_gpu("AMD EPYC 9B45 (2 threads)", "") == nullptr);
}

TEST_CASE("bench: the peak per precision, given, from the table or measured") {
    auto dev = open_device("cpu");
    const DeviceInfo h200 = gpu("NVIDIA H200", "9.0");
    const PeakFigure bf16 = compute_peak(*dev, h200, Precision::bf16, 0);
    CHECK(bf16.value == doctest::Approx(989400));
    CHECK(bf16.source == "table: NVIDIA H200, dense tensor cores");
    CHECK(compute_peak(*dev, h200, Precision::fp16, 0).value == doctest::Approx(989400));
    const PeakFigure fp32 = compute_peak(*dev, h200, Precision::fp32, 0);
    CHECK(fp32.value == doctest::Approx(66900));
    CHECK(fp32.source == "table: NVIDIA H200, fp32 without TF32");
    const PeakFigure given = compute_peak(*dev, h200, Precision::bf16, 1234);
    CHECK(given.value == 1234);
    CHECK(given.source == "given: --peak-gflops");
    // Not in the table: a GEMM probe on the device itself.
    const PeakFigure probe = compute_peak(*dev, device_info("cpu"), Precision::fp32, 0);
    CHECK(probe.value > 0.1);
    CHECK(probe.source == "measured: 1024^3 f32 GEMM probe");
}

TEST_CASE("bench: the bandwidth, given, from the table, reported or measured") {
    auto dev = open_device("cpu");
    CHECK(bandwidth_peak(*dev, gpu("NVIDIA H100 80GB HBM3", "9.0", 3352), 0).source ==
          "table: NVIDIA H100 SXM");
    // GH200's memory differs by model: the runtime's figure.
    const PeakFigure gh = bandwidth_peak(*dev, gpu("NVIDIA GH200 480GB", "9.0", 4022), 0);
    CHECK(gh.value == doctest::Approx(4022));
    CHECK(gh.source == "reported: memory clock x bus width");
    CHECK(bandwidth_peak(*dev, gpu("NVIDIA L4", "8.9", 300), 0).source ==
          "reported: memory clock x bus width");
    CHECK(bandwidth_peak(*dev, gpu("NVIDIA H200", "9.0"), 55).source == "given: --bandwidth-gbs");
    const PeakFigure probe = bandwidth_peak(*dev, device_info("cpu"), 0);
    CHECK(probe.value > 0.1);
    CHECK(starts_with(probe.source, "measured: 128 MiB copy probe"));
}

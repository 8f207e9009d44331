// The built-in CPU backend: one device "cpu:0" (the host processor, OpenMP threads, system
// memory). open() applies DeviceOptions.threads to the OpenMP runtime the loops and the GEMM
// library share.
#include "cpu/cpu_backend.h"

#include <omp.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "cpu/cpu_device.h"
#include "cpu/cpu_gemm.h"

namespace moetrain {
namespace {

std::string cpu_model_name() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) != 0) continue;
        auto colon = line.find(':');
        if (colon == std::string::npos) break;
        auto start = line.find_first_not_of(" \t", colon + 1);
        return start == std::string::npos ? "cpu" : line.substr(start);
    }
    return "cpu";
}

uint64_t physical_memory() {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

const char* gemm_provider() {
#if defined(MOETRAIN_GEMM_ONEDNN)
    return "oneDNN sgemm";
#else
    return "CBLAS sgemm";
#endif
}

std::string device_name(int threads) {
    return cpu_model_name() + " (" + std::to_string(threads) + " thread" +
           (threads == 1 ? "" : "s") + ")";
}

class CpuBackend : public Backend {
  public:
    std::string name() const override { return "cpu"; }
    std::string unavailable_reason() override { return ""; }

    std::vector<DeviceInfo> devices() override {
        DeviceInfo d;
        d.id = "cpu:0";
        d.name = device_name(omp_get_max_threads());
        d.details = std::string("OpenMP, GEMM: ") + gemm_provider() +
                    ", bf16 products: " + cpu::bf16_gemm_description() + ", " +
                    std::to_string(omp_get_num_procs()) + " processors";
        d.memory_bytes = physical_memory();
        return {d};
    }

    std::unique_ptr<Device> open(int index, const DeviceOptions& opts) override {
        MT_CHECK(index == -1 || index == 0, "device 'cpu:", index,
                 "' does not exist (cpu has 1 device)");
        MT_CHECK(opts.threads >= 0, "bad thread count ", opts.threads, " (0 = default)");
        if (opts.threads > 0) omp_set_num_threads(opts.threads);
        cpu::bf16_gemm_path();  // a bad MOETRAIN_CPU_BF16_GEMM fails here, in one line
        int threads = omp_get_max_threads();
        return std::make_unique<CpuDevice>(device_name(threads), threads);
    }
};

}  // namespace

// The built-in backend lives as long as the process, like a module's backend object: the registry
// keeps this pointer and never deletes it. Held in a static so that LeakSanitizer (the sanitizer
// job of tools/test.sh) sees it as reachable rather than leaked at exit.
Backend* create_cpu_backend() {
    static Backend* const backend = new CpuBackend();
    return backend;
}

}  // namespace moetrain

// The CUDA backend module: availability (any cudaGetDeviceCount failure means "no CUDA device"
// with the runtime's own reason), device enumeration (name, memory, compute capability) and the
// module's single exported entry point. Runtime API only; the driver library is never linked.
#include <cuda_runtime_api.h>

#include <cmath>
#include <mutex>

#include "cuda/cuda_device.h"
#include "cuda/cuda_errors.h"
#include "moetrain/backend.h"

namespace moetrain::cuda {
namespace {

class CudaBackend final : public Backend {
  public:
    std::string name() const override { return MOETRAIN_CUDA_BACKEND_NAME; }

    std::string unavailable_reason() override {
        probe();
        return reason_;
    }

    std::vector<DeviceInfo> devices() override {
        probe();
        return devices_;
    }

    std::unique_ptr<Device> open(int index, const DeviceOptions& opts) override {
        probe();
        MT_CHECK(reason_.empty(),
                 "device '" MOETRAIN_CUDA_BACKEND_NAME "' is not available: ", reason_);
        if (index < 0) {  // default: the first usable device
            index = default_device();
            MT_CHECK(index >= 0, "no usable CUDA device: ",
                     devices_.empty() ? "none found" : devices_[0].reason);
        }
        MT_CHECK(index < static_cast<int>(devices_.size()),
                 "device '" MOETRAIN_CUDA_BACKEND_NAME ":", index, "' does not exist (",
                 devices_.size(), " CUDA devices)");
        MT_CHECK(devices_[index].available, "device '", devices_[index].id,
                 "' is not available: ", devices_[index].reason);
        return create_cuda_device(index, opts);
    }

  private:
    // Queries the runtime once; the answer does not change while the process runs.
    void probe() {
        std::call_once(once_, [this] {
            int n = 0;
            cudaError_t e = cudaGetDeviceCount(&n);
            if (e != cudaSuccess) {
                cudaGetLastError();  // clear the sticky-free error so later calls start clean
                reason_ = "no CUDA device: " + describe(e);
                return;
            }
            if (n == 0) {
                reason_ = "no CUDA device: cudaGetDeviceCount reported 0 devices";
                return;
            }
            for (int i = 0; i < n; ++i) devices_.push_back(describe_device(i));
        });
    }

    // Peak DRAM bandwidth from the memory clock (kHz) and bus width (bits), both read as
    // attributes (CUDA 13 dropped them from cudaDeviceProp); double data rate: x 2. 0 when the
    // runtime reports neither.
    static double reported_bandwidth_gbs(int i) {
        int clock_khz = 0, bus_bits = 0;
        if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, i) != cudaSuccess ||
            cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, i) != cudaSuccess) {
            cudaGetLastError();
            return 0;
        }
        return 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
    }

    static DeviceInfo describe_device(int i) {
        DeviceInfo info;
        info.id = MOETRAIN_CUDA_BACKEND_NAME ":" + std::to_string(i);
        cudaDeviceProp prop{};
        cudaError_t e = cudaGetDeviceProperties(&prop, i);
        if (e != cudaSuccess) {
            info.name = "CUDA device " + std::to_string(i);
            info.available = false;
            info.reason = "cannot query its properties: " + describe(e);
            return info;
        }
        info.name = prop.name;
        info.memory_bytes = prop.totalGlobalMem;
        info.compute_capability = std::to_string(prop.major) + "." + std::to_string(prop.minor);
        info.memory_bandwidth_gbs = reported_bandwidth_gbs(i);
        int cc = prop.major * 10 + prop.minor;
        info.details =
            "compute capability " + std::to_string(prop.major) + "." + std::to_string(prop.minor) +
            ", " + std::to_string(prop.multiProcessorCount) + " SMs, " +
            std::to_string(prop.sharedMemPerBlockOptin / 1024) + " KiB shared memory per block";
        if (info.memory_bandwidth_gbs > 0)
            info.details += ", " + std::to_string(std::lround(info.memory_bandwidth_gbs)) +
                            " GB/s memory (clock x bus width)";
        info.details += "; " + attention_summary(cc) + "; " + grouped_gemm_summary(cc);
        if (cc < MOETRAIN_CUDA_MIN_CC) {
            info.available = false;
            info.reason = "compute capability " + std::to_string(prop.major) + "." +
                          std::to_string(prop.minor) +
                          " is older than the oldest architecture "
                          "this build targets (sm_" +
                          std::to_string(MOETRAIN_CUDA_MIN_CC) + ")";
        }
        return info;
    }

    std::once_flag once_;
    std::string reason_;
    std::vector<DeviceInfo> devices_;
};

}  // namespace
}  // namespace moetrain::cuda

extern "C" __attribute__((visibility("default"))) moetrain::Backend* moetrain_backend_entry(
    int abi) {
    if (abi != MOETRAIN_BACKEND_ABI) return nullptr;
    static moetrain::cuda::CudaBackend backend;
    return &backend;
}

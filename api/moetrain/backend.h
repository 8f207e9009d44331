// Backends and the registry. A backend is a small table behind one class: it enumerates its
// devices (with the reason when none is usable) and opens one. `cpu` is built into the core
// library; every other backend is a shared module (libmoetrain_backend_<name>.so) loaded with
// dlopen from the core library's directory or from $MOETRAIN_BACKEND_PATH (':'-separated),
// through the single C entry point below. Asking for an unavailable device is an error,
// never a silent fallback to another backend.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "moetrain/device.h"

#define MOETRAIN_BACKEND_ABI 4

namespace moetrain {

struct DeviceInfo {
    std::string id;       // "cpu:0", "opencl:1"
    std::string name;     // "AMD EPYC 9B45 (2 threads)"
    std::string details;  // platform, compute units, capability...
    uint64_t memory_bytes = 0;
    // What `bench` needs to find the device's peak (tools/cli/device_peak.h): the GPU's
    // compute capability ("9.0", "" when not a GPU) and the memory bandwidth the runtime
    // reports (memory clock x bus width x 2, GB/s; 0 when it reports none).
    std::string compute_capability;
    double memory_bandwidth_gbs = 0;
    bool available = true;
    std::string reason;  // why not available
};

struct DeviceOptions {
    int threads = 0;          // cpu: OpenMP threads (0 = default)
    bool cuda_graphs = true;  // cuda: capture and replay recorded steps (Device::run_recorded)
};

class Backend {
  public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;
    // "" when usable, else why not (e.g. "no CUDA driver (cudaErrorInsufficientDriver)").
    virtual std::string unavailable_reason() = 0;
    virtual std::vector<DeviceInfo> devices() = 0;
    virtual std::unique_ptr<Device> open(int index, const DeviceOptions& opts) = 0;
    // The device open(-1) opens, -1 when none is usable. By default the first available one.
    virtual int default_device() {
        const std::vector<DeviceInfo> d = devices();
        for (size_t i = 0; i < d.size(); ++i)
            if (d[i].available) return static_cast<int>(i);
        return -1;
    }
};

// What the registry knows about one backend.
struct BackendStatus {
    std::string name;
    std::string module_path;  // "" for built-in or when not found
    bool loaded = false;
    std::string reason;  // why not loaded / not available
    std::vector<DeviceInfo> devices;
};

// Every known backend (cpu, opencl, cuda and any other module found), loaded or not.
std::vector<BackendStatus> list_backends();

// Open "cpu", "opencl", "opencl:1", "cuda:0"... Throws moetrain::Error naming the reason when
// the backend is unknown, not built, fails to load, or has no such usable device.
std::unique_ptr<Device> open_device(const std::string& spec, const DeviceOptions& opts = {});

// What `moetrain info` lists for the device `spec` names, without opening it (without an
// index: the backend's first available device); the same one-line errors as open_device.
DeviceInfo device_info(const std::string& spec);

}  // namespace moetrain

// The one symbol a backend module exports. Returns nullptr if abi != MOETRAIN_BACKEND_ABI.
extern "C" moetrain::Backend* moetrain_backend_entry(int abi);

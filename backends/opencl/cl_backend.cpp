// The OpenCL backend: platform/device enumeration, device selection ("opencl" = first GPU,
// else the first device; "opencl:N" = the N-th device over all platforms) and the module's
// entry point moetrain_backend_entry.
#include <algorithm>
#include <cstdio>
#include <mutex>

#include "cl_device.h"
#include "cl_device_query.h"
#include "moetrain/backend.h"

namespace moetrain::opencl {
namespace {

struct FoundDevice {
    cl_platform_id platform;
    cl_device_id device;
    bool gpu;
    DeviceInfo info;
};

// "OpenCL C 1.2 PoCL" -> 102 (0 when unparsable).
int opencl_c_version(const std::string& s) {
    int major = 0, minor = 0;
    if (std::sscanf(s.c_str(), "OpenCL C %d.%d", &major, &minor) != 2) return 0;
    return major * 100 + minor;
}

std::string gib(uint64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
    return buf;
}

std::string type_name(cl_device_type t) {
    if (t & CL_DEVICE_TYPE_GPU) return "GPU";
    if (t & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
    if (t & CL_DEVICE_TYPE_CPU) return "CPU";
    return "device";
}

FoundDevice describe(cl_platform_id p, cl_device_id d, size_t index) {
    FoundDevice f{p, d, false, {}};
    auto type = device_info<cl_device_type>(d, CL_DEVICE_TYPE);
    f.gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
    std::string clc = device_string(d, CL_DEVICE_OPENCL_C_VERSION);
    auto mem = device_info<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE);
    f.info.id = "opencl:" + std::to_string(index);
    f.info.name = device_string(d, CL_DEVICE_NAME);
    f.info.memory_bytes = mem;
    f.info.details = type_name(type) + ", platform " + platform_string(p, CL_PLATFORM_NAME) + " (" +
                     platform_string(p, CL_PLATFORM_VERSION) + "), " + clc + ", " +
                     std::to_string(device_info<cl_uint>(d, CL_DEVICE_MAX_COMPUTE_UNITS)) +
                     " compute units, max allocation " +
                     gib(device_info<cl_ulong>(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE)) + ", driver " +
                     device_string(d, CL_DRIVER_VERSION);
    if (!device_info<cl_bool>(d, CL_DEVICE_AVAILABLE)) {
        f.info.available = false;
        f.info.reason = "device reports CL_DEVICE_AVAILABLE = false";
    } else if (!device_info<cl_bool>(d, CL_DEVICE_COMPILER_AVAILABLE)) {
        f.info.available = false;
        f.info.reason = "the driver has no OpenCL C compiler";
    } else if (opencl_c_version(clc) < 102) {
        f.info.available = false;
        f.info.reason = "needs OpenCL C 1.2, device has '" + clc + "'";
    }
    return f;
}

class ClBackend : public Backend {
  public:
    std::string name() const override { return "opencl"; }

    std::string unavailable_reason() override {
        enumerate();
        return reason_;
    }

    std::vector<DeviceInfo> devices() override {
        enumerate();
        std::vector<DeviceInfo> out;
        out.reserve(found_.size());
        for (auto& f : found_) out.push_back(f.info);
        return out;
    }

    std::unique_ptr<Device> open(int index, const DeviceOptions&) override {
        enumerate();
        MT_CHECK(reason_.empty(), "OpenCL backend is not available: ", reason_);
        if (index < 0) {
            index = default_device();
            MT_CHECK(index >= 0, "no usable OpenCL device: ", found_[0].info.reason);
        }
        MT_CHECK(index < static_cast<int>(found_.size()), "opencl:", index, " does not exist (",
                 found_.size(), " OpenCL devices)");
        const FoundDevice& f = found_[static_cast<size_t>(index)];
        MT_CHECK(f.info.available, f.info.id, " is not usable: ", f.info.reason);
        return std::make_unique<ClDevice>(f.platform, f.device,
                                          f.info.name + " (" + f.info.id + ")");
    }

    int default_device() override {  // the first usable GPU, else the first usable device
        enumerate();
        auto usable = [](const FoundDevice& f) { return f.info.available; };
        auto gpu = std::find_if(found_.begin(), found_.end(),
                                [&](const FoundDevice& f) { return usable(f) && f.gpu; });
        auto any = std::find_if(found_.begin(), found_.end(), usable);
        if (any == found_.end()) return -1;
        return static_cast<int>((gpu != found_.end() ? gpu : any) - found_.begin());
    }

  private:
    void enumerate() {
        std::lock_guard<std::mutex> lock(mu_);
        if (done_) return;
        done_ = true;
        cl_uint np = 0;
        cl_int err = clGetPlatformIDs(0, nullptr, &np);
        if (err != CL_SUCCESS || np == 0) {
            reason_ = std::string("no OpenCL platform (") +
                      cl_error_name(err == CL_SUCCESS ? -1001 : err) + ")";
            return;
        }
        std::vector<cl_platform_id> platforms(np);
        cl_check(clGetPlatformIDs(np, platforms.data(), nullptr), "listing OpenCL platforms");
        for (cl_platform_id p : platforms) {
            cl_uint nd = 0;
            if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0)
                continue;
            std::vector<cl_device_id> devs(nd);
            cl_check(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, devs.data(), nullptr),
                     "listing OpenCL devices");
            for (cl_device_id d : devs) found_.push_back(describe(p, d, found_.size()));
        }
        if (found_.empty())
            reason_ = "no OpenCL device on " + std::to_string(np) + " platform" +
                      (np == 1 ? "" : "s") + " (CL_DEVICE_NOT_FOUND)";
    }

    std::mutex mu_;
    bool done_ = false;
    std::string reason_;
    std::vector<FoundDevice> found_;
};

}  // namespace
}  // namespace moetrain::opencl

extern "C" moetrain::Backend* moetrain_backend_entry(int abi) {
    if (abi != MOETRAIN_BACKEND_ABI) return nullptr;
    static moetrain::opencl::ClBackend* backend = new moetrain::opencl::ClBackend();
    return backend;
}

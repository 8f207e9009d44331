// CpuDevice construction, tensor pointers and the op scratch area.
#include "cpu/cpu_device.h"

#include <utility>

namespace moetrain {

CpuDevice::CpuDevice(std::string name, int threads) : name_(std::move(name)), threads_(threads) {}

float* CpuDevice::scratch(size_t floats) {
    const size_t bytes = floats * sizeof(float);
    if (!scratch_ || scratch_->bytes() < bytes) {
        scratch_.reset();  // release the old block before taking the bigger one
        scratch_ = std::make_unique<CpuBuffer>(this, bytes);
    }
    return static_cast<float*>(scratch_->data());
}

}  // namespace moetrain

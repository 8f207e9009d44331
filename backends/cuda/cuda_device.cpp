// The CUDA Device (being written: issue 6). Until its ops land, opening a CUDA device fails
// with a clear message instead of returning a partial device.
#include "cuda/cuda_device.h"

namespace moetrain::cuda {

std::unique_ptr<Device> create_cuda_device(int index, const DeviceOptions&) {
    fail("cuda:", index, ": the CUDA Device ops are not built yet in this version (issue 6)");
}

}  // namespace moetrain::cuda

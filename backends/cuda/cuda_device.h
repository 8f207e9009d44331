// The CUDA Device: every op of api/moetrain/device.h on one GPU, with the kernels of
// kernels_cuda/ (through the launchers of kernels_cuda/ops.h) and cuBLAS for matrix products.
#pragma once

#include <memory>

#include "moetrain/backend.h"

namespace moetrain::cuda {

// Opens CUDA device `index` (already checked to exist and be usable).
std::unique_ptr<Device> create_cuda_device(int index, const DeviceOptions& opts);

}  // namespace moetrain::cuda

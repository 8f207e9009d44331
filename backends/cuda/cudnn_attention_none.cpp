// The cuDNN attention path when the build has none (no cudnn-frontend headers or cudnn.h, or the
// cudasim test module): attention runs moetrain's own kernels, and `moetrain info` says why.
#include "cuda/cudnn_attention.h"

namespace moetrain::cuda {

bool cudnn_attention_built() {
    return false;
}

std::string cudnn_attention_probe() {
    return "this build has no cuDNN attention (cudnn-frontend headers not found)";
}

std::unique_ptr<CudnnAttention> open_cudnn_attention(std::string* why) {
    if (why) *why = cudnn_attention_probe();
    return nullptr;
}

}  // namespace moetrain::cuda

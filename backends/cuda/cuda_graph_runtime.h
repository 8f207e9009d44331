// GraphRuntime (graph_cache.h) on the CUDA runtime API: stream capture of the context's stream
// (thread-local mode: this thread may not allocate or synchronize meanwhile), instantiation,
// launch and destruction of executable graphs. Marks the context as capturing in between.
#pragma once

#include "cuda/cuda_context.h"
#include "cuda/graph_cache.h"

namespace moetrain::cuda {

class CudaGraphRuntime final : public GraphRuntime {
  public:
    explicit CudaGraphRuntime(CudaContext& ctx) : ctx_(ctx) {}
    void begin_capture() override;
    void* end_capture(std::string* why) override;
    void launch(void* graph) override;
    void destroy(void* graph) override;

  private:
    CudaContext& ctx_;
};

}  // namespace moetrain::cuda

// The MODEL.md transformer, written once against the Device interface: parameters (one flat
// f32 buffer with a named view per MODEL.md section 6 tensor), forward, loss, manual backward.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "moetrain/config.h"
#include "moetrain/device.h"
#include "moetrain/precision.h"

namespace moetrain {

// One named parameter tensor (MODEL.md section 6 name and shape) inside the flat buffer.
struct ParamInfo {
    std::string name;
    Shape shape;
    int64_t offset = 0;  // in elements, in the flat parameter / gradient / moment buffers
    bool decay = false;  // rank >= 2 (MODEL.md 4)
    int64_t numel() const { return shape.numel(); }
};

// Loss terms of one forward pass (means over the micro-batch, MODEL.md 3).
struct LossStats {
    double ce = 0, aux = 0, z = 0, loss = 0;
    int64_t tokens = 0;  // targets that counted (target != -1)
};

// Per MoE layer: how many (token, slot) selections each expert received in the last forward
// (before any capacity dropping), how many of them a capacity dropped, and the layer's expert
// bias range (MODEL.md 2; both 0 without an expert bias).
struct ExpertLoad {
    int layer = 0;
    std::vector<int32_t> counts;
    int64_t dropped = 0;
    float bias_min = 0, bias_max = 0;
};

// Gradient checkpointing of training passes: which activations the forward keeps for the
// backward and which the backward recomputes (a run option: not part of the ModelConfig or
// of checkpoints; gradients are bit-identical in every mode on a given device).
//  none:  every layer keeps all its activations.
//  block: every layer keeps only its input (the residual stream); the backward re-runs the
//         layer's forward into one set of layer buffers shared by all layers.
//  ffn:   every layer keeps its attention activations; the FFN / MoE internals (router,
//         sort, expert rows, hidden activations, shared experts) live in one shared set and
//         the backward re-runs that part of the layer.
enum class Recompute { none, block, ffn };
std::string to_string(Recompute r);
Recompute parse_recompute(const std::string& s);  // "none" | "block" | "ffn"; throws otherwise

class ModelImpl;
class ModelAccess;

class Model {
  public:
    Model(Device& device, const ModelConfig& config);
    ~Model();
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    const ModelConfig& config() const;
    Device& device() const;

    // ---- parameters ----
    const std::vector<ParamInfo>& params() const;           // every tensor of MODEL.md 6, once
    const ParamInfo& param(const std::string& name) const;  // throws naming the name
    int64_t num_params() const;                             // total elements
    Tensor params_flat() const;                             // [num_params] f32
    Tensor grads_flat() const;                              // [num_params] f32
    // Host-side seeded init (identical on every backend): N(0, 0.02) for weights and
    // embeddings, output projections (wo, w_down) N(0, 0.02/sqrt(2L)), gains 1, biases 0.
    void init_weights(uint64_t seed);
    std::vector<float> get_param(const std::string& name) const;  // download one tensor
    void set_param(const std::string& name, const std::vector<float>& values);  // upload one
    std::vector<float> get_flat(const Tensor& flat) const;  // download a whole flat buffer
    void set_flat(const Tensor& flat, const std::vector<float>& values);
    // Call after writing params_flat() by other means than the functions above, so that the
    // 16-bit working copy of mixed precision is refreshed before the next forward pass.
    void params_changed();

    // ---- precision (a run option, not part of the config or the checkpoint) ----
    // fp32 (default), or bf16 / fp16: matrix products on a 16-bit copy of the weight
    // matrices with fp32 accumulation; master weights, gradients, norms, softmax, router and
    // losses stay fp32. fp16 training needs loss scaling (Trainer does it).
    void set_precision(Precision p);
    Precision precision() const;
    // Attention precision (opt-in, default off): with bf16 / fp16, attention rounds q, k, v,
    // dout, the probabilities and the score gradients to that type before its products (fp32
    // accumulation; softmax statistics and outputs fp32). Off, or with fp32, attention is fp32
    // as MEMORY_AND_PRECISION.md specifies. The cuda backend runs its tensor-core kernels then
    // (docs/CUDA.md); cpu and opencl compute in fp32 either way.
    void set_attention16(bool on);
    bool attention16() const;

    // ---- training ----
    void zero_grads();
    // Forward + loss + backward for one micro-batch; gradients are ADDED to grads_flat()
    // scaled by grad_scale (1/A for accumulation over A micro-batches). x, y are [B*T] host
    // token ids (y = -1 ignored). Throws naming the bad token on ids outside [0, V). Dropless:
    // an MoE capacity (moe.capacity_factor) applies to the Trainer's micro-batches only.
    LossStats forward_backward(const int32_t* x, const int32_t* y, int B, int T,
                               float grad_scale = 1.0f);
    // Forward + loss only (evaluation).
    LossStats forward_loss(const int32_t* x, const int32_t* y, int B, int T);
    // Logits of the last forward pass of forward_logits(): [B*T, V] downloaded to the host.
    std::vector<float> forward_logits(const int32_t* x, int B, int T);
    // Expert loads of the last forward (empty for dense models).
    const std::vector<ExpertLoad>& expert_load() const;
    // ---- non-trained state (MODEL.md 6: the expert bias when moe.bias_update_rate > 0) ----
    // `layers.{l}.moe.router.expert_bias` of every MoE layer, [E] f32 each, with offsets into
    // buffers_flat(); empty (and buffers_flat() an empty tensor) without an expert bias. They
    // are saved in checkpoints with the parameters but get no gradient and no optimizer state.
    const std::vector<ParamInfo>& buffers() const;
    Tensor buffers_flat() const;
    std::vector<float> get_buffer(const std::string& name) const;  // throws naming the name
    void set_buffer(const std::string& name, const std::vector<float>& values);
    // How the device work of the last micro-batch or generation step ran (Device::run_recorded:
    // eager, or captured into / replayed from a CUDA Graph). A generation's prefill is eager;
    // its decode steps are recorded steps.
    StepRun last_step_run() const;

    // ---- memory ----
    // Gradient checkpointing mode of the training passes from now on (default none).
    void set_recompute(Recompute r);
    Recompute recompute() const;
    // Device bytes of the workspace (activations and backward scratch) that training passes
    // of shape (B, T) use in the current recompute mode, planning it if needed.
    int64_t training_workspace_bytes(int B, int T);

  private:
    friend class ModelAccess;  // the library's internal views (not part of the public API)
    std::unique_ptr<ModelImpl> impl_;
};

// Analytic model FLOPs per token for training (6 x active matmul params + attention terms)
// and the parameter counts, for bench and logs.
struct ModelCost {
    int64_t total_params = 0;
    int64_t active_matmul_params = 0;  // per token, counting top-k experts only
    double train_flops_per_token(int T) const;
    int64_t n_layers = 0, d_attn = 0;  // for the attention term 12 * L * T * H * h
};
ModelCost model_cost(const ModelConfig& c);

}  // namespace moetrain

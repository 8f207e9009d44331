// The planning of the activation and scratch buffers of one forward(/backward) shape (B, T)
// (the Workspace of layers/layer_acts.h), once per shape and reused by every step of that
// shape: nothing is allocated inside a step after the first.
#pragma once

#include <memory>
#include <vector>

#include "layers/layer_acts.h"
#include "moetrain/config.h"
#include "moetrain/device.h"
#include "moetrain/model.h"

namespace moetrain {

// A new number on every call (process-wide): identifies a set of device buffers in the keys of
// recorded steps (Device::run_recorded), so a graph is never replayed on buffers it was not
// captured with.
uint64_t next_buffer_generation();

// Default bound on the logits buffer (elements): 128M floats (512 MB). Each chunk's weight
// gradient product reads and writes the whole f32 [V, D] head gradient, so small chunks cost
// that traffic many times over: at 16M floats gpt2-124m's 16 x 1024 step ran 49 chunks of 333
// rows, whose head products took 17 ms of a ~60 ms step on the H200 (docs/BENCHMARKS.md).
constexpr int64_t kLogitBudget = int64_t{1} << 27;
// The bound of inference workspaces (elements): 16M floats (64 MB). Their head has no weight
// gradient to amortise, and up to four inference shapes are kept beside the training one.
constexpr int64_t kInferenceLogitBudget = int64_t{1} << 24;

// Rows of logits computed at once so that rows * V <= budget (at least one row).
int64_t logit_chunk_rows(int64_t N, int64_t V, int64_t budget);

// `stored16`: the dtype training workspaces store the GEMM-only activations in (the compute
// dtype of mixed precision, or f32); inference workspaces keep everything in f32. `grads16`:
// the products' dtype under mixed precision (f32 otherwise), which training workspaces round
// the gradients both products of a layer read into once (GradScratch::dy16, dlogits16).
std::unique_ptr<Workspace> plan_workspace(Device& dev, const ModelConfig& c, int B, int T,
                                          bool training, int64_t logit_budget, Recompute recompute,
                                          DType stored16, DType grads16);

// ---- workspace_storage16.cpp ----
// Whether layer l's FFN-norm output n2.y may be 16-bit: not when a softmax router reads it
// (the router's product and its weight gradient run in fp32).
bool norm2_gemm_only(const ModelConfig& c, int layer);
// Points the 16-bit FFN-norm output of every MoE layer (hash routing) at the f32 transient nf.y,
// which the layer widens it into for the expert-row gather (nf.y is free during every layer's
// forward: the head reads it only after the last layer's forward and before the backward).
void bind_f32_transients(Workspace& ws);

}  // namespace moetrain

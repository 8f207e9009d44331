// Training (MODEL.md section 4): AdamW / 8-bit AdamW / SGD, warmup + cosine schedule,
// global-norm clipping, gradient accumulation. The optimizer state lives on the model's device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "moetrain/comm.h"
#include "moetrain/model.h"

namespace moetrain {

// adamw8bit: AdamW with both moments stored in 8 bits, block-wise quantised (Device::adamw8bit,
// docs/OPS.md); master weights and the update math stay fp32.
enum class OptimizerKind { adamw, sgd, adamw8bit };

// "adamw", "sgd", "adamw8bit": the CLI's --optimizer values and state.json "train.optimizer".
const char* optimizer_name(OptimizerKind k);
// The optimizer called `name`; throws "unknown optimizer 'x' (adamw, adamw8bit, sgd)".
OptimizerKind parse_optimizer(const std::string& name);

// The 8-bit AdamW state of one range of the flat parameter buffer (the trainer updates the
// weight-decayed tensors and the rest with one adamw8bit call each, so each range has its own
// grid of kAdamW8bitBlock-element blocks starting at its first element).
inline constexpr int64_t kAdamW8bitBlock = 256;
struct QuantizedMoments {
    std::string range;          // "decay" (tensors of rank >= 2) or "no_decay" (gains, biases)
    int64_t offset = 0, n = 0;  // elements [offset, offset + n) of the flat buffers
    Tensor m_codes, v_codes;    // u8 [n]: codes into the signed (m) / unsigned (v) maps
    Tensor m_absmax, v_absmax;  // f32 [ceil(n / 256)]: scale of each block (empty when n = 0)
};

struct TrainOptions {
    OptimizerKind optimizer = OptimizerKind::adamw;
    double lr = 3e-4;
    double min_lr = -1;  // < 0 = lr / 10
    int64_t warmup = 0;
    int64_t total_steps = 1;  // S of the schedule
    double wd = 0.1, b1 = 0.9, b2 = 0.95, eps = 1e-8;
    double clip = 1.0;  // <= 0 disables clipping
    int accum = 1;      // micro-batches per optimizer step
    // Dynamic loss scaling, active when the model trains in fp16 (Model::set_precision): the
    // loss gradient is multiplied by the scale; a step whose gradients overflow (Inf/NaN) is
    // skipped and the scale halved; after `loss_scale_window` clean steps it doubles.
    double loss_scale_init = 65536.0;
    int64_t loss_scale_window = 2000;
};

// lr for the optimizer step with 0-based index i (MODEL.md 4, nanoGPT convention).
double lr_at(const TrainOptions& o, int64_t i);

struct StepStats {
    int64_t step = 0;  // optimizer steps completed after this one (from 1)
    LossStats loss;    // means over the A micro-batches
    double lr = 0;
    double grad_norm = 0;          // global norm before clipping (unscaled)
    double loss_scale = 1;         // the scale this step ran with (1 unless fp16)
    bool skipped = false;          // fp16 overflow: no update, step not counted, scale halved
    StepRun run = StepRun::eager;  // how the last micro-batch ran (replayed: a CUDA Graph)
};

// Data-parallel training over the ranks of a communicator (docs/DISTRIBUTED.md). Every rank
// passes its own rows of each global micro-batch to step() (rank r: rows [r B, (r + 1) B) of
// the global N B rows); gradients are summed over the ranks in buckets, so N ranks x B compute
// the same function as one process x N B. zero = 1 shards the AdamW moments over the ranks
// (ZeRO-1): reduce-scatter of the gradients, each rank updates its shard, all-gather of the
// parameters.
//
// expert_parallel = P > 1 (P divides the ranks and every MoE layer's experts): the ranks form
// groups of P consecutive ranks; rank j of a group holds experts [j E/P, (j + 1) E/P) of every
// MoE layer, the routed rows go to their experts' ranks and come back (all-to-all-v), and this
// rank updates only its own experts (its optimizer state covers the non-expert weights and its
// experts). The Trainer makes the model keep only this rank's experts (its parameter and
// gradient buffers shrink to them), so every pass of the model is then a collective of the
// group. Non-expert gradients are summed over all ranks, expert gradients over the ranks
// that hold the same experts (rank j of every group). With zero = 1 (AdamW) the non-expert
// moments are sharded over all ranks and this rank's experts' over the ranks holding them.
// With adamw8bit (zero = 0 only) every expert block must start and end on a boundary of the
// decayed range's 256-element blocks (else the Trainer refuses): a rank's buffer then keeps
// the block grid, and so the numbers, of one process.
struct DistOptions {
    Communicator* comm = nullptr;             // null or size 1: one process
    int zero = 0;                             // 0 or 1
    int64_t bucket_elems = int64_t{1} << 20;  // gradient all-reduce bucket (elements)
    int expert_parallel = 1;                  // P: ranks per expert-parallel group
    // On a host-memory engine (mpi). Plain data parallelism: each layer's gradients start
    // their (non-blocking) all-reduce as soon as the last micro-batch's backward has written
    // them, overlapping the backward of the layers before it. Expert parallelism: the MoE
    // layers' token exchange overlaps the experts' work on the rows that stay on the rank and
    // the shared experts' backward. The results are the same bits either way.
    bool overlap = true;
};

class Trainer {
  public:
    Trainer(Model& model, const TrainOptions& opts, const DistOptions& dist = {});
    // Detaches the model from the communicators this Trainer made (an expert-parallel model
    // keeps only its experts: a later pass on it fails with one line instead of reaching a
    // freed group).
    ~Trainer();
    Trainer(const Trainer&) = delete;
    Trainer& operator=(const Trainer&) = delete;
    // One optimizer step over `accum` micro-batches; xs/ys hold accum * B * T ids each.
    StepStats step(const int32_t* xs, const int32_t* ys, int B, int T);
    int64_t steps_done() const;
    void set_steps_done(int64_t s);
    const TrainOptions& options() const;
    Model& model();
    // Optimizer moments (AdamW m, v; empty tensors otherwise), flat like Model::params_flat().
    // Under ZeRO-1 they hold this rank's shard only, and under expert parallelism they are laid
    // out like this rank's buffer (its experts only), except between gather_moments() and
    // scatter_moments(), when they are the whole flat buffers (checkpoints save and load them).
    Tensor moment1() const;
    Tensor moment2() const;
    // ZeRO-1 or expert parallel (collectives: every rank calls them): gather_moments()
    // assembles the whole moments (or 8-bit state) on every rank, and under expert parallelism
    // also lays the model out whole (every rank's experts); scatter_moments() keeps this rank's
    // part of them (loaded ones included) and frees the whole ones. A checkpoint is saved or
    // loaded between the two; the model runs no pass there. No-ops otherwise.
    void gather_moments();
    void scatter_moments();
    // ZeRO-1 shard of this rank: elements [first, first + count) of the flat buffers (the
    // whole buffer under expert parallelism, whose shards are not one range).
    int64_t shard_first() const;
    int64_t shard_count() const;
    // Whether the gradient all-reduce overlaps the backward (DistOptions::overlap applies).
    bool overlaps_gradients() const;
    // How the MoE layers' routed rows reach their experts: "local", "all-to-all" or
    // "overlapped all-to-all" (expert parallelism, DistOptions::overlap); "" for a dense model.
    std::string token_exchange() const;
    // Bytes of optimizer state this rank holds (moments or 8-bit codes and scales).
    int64_t optimizer_state_bytes() const;
    // 8-bit AdamW state: the "decay" range, then "no_decay" (empty for other optimizers).
    // Under ZeRO-1 the "decay" range is this rank's shard, and under expert parallelism the
    // decayed range of this rank's buffer (the non-expert weights and its experts), except
    // between gather_moments() and scatter_moments(), when it is the whole range.
    const std::vector<QuantizedMoments>& quantized_moments() const;
    // Dynamic loss scaling state (fp16; saved in checkpoints for an exact resume).
    double loss_scale() const;
    int64_t clean_steps() const;    // since the last change
    int64_t skipped_steps() const;  // in the whole run
    void set_loss_scale_state(double scale, int64_t clean, int64_t skipped);

  private:
    // The optimizer state and the gradient-sync strategy (models/train/trainer_impl.h).
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace moetrain

// Moving a flat buffer (parameters, gradients, optimizer state) between the whole layout and an
// expert-parallel rank's shard of it (ExpertShard, param_layout.h): both lay out the same
// tensors in the same order, and differ only in the expert tensors, which the shard holds one
// block of. A flat buffer is cut into runs: the non-expert tensors between two expert tensors
// (the same elements in both layouts) and each expert tensor.
#pragma once

#include <vector>

#include "model/param_layout.h"
#include "moetrain/comm.h"

namespace moetrain {

struct ShardRun {
    int64_t local = 0, whole = 0;  // first element in the shard's / the whole layout
    int64_t count = 0;             // elements in the shard (an expert tensor: one block)
    bool expert = false;           // whole: `parts` blocks of `count`, block j from rank j
};

// The runs of `shard` (a layout of build_param_layout(c, ExpertShard{P, j})) against `whole`.
std::vector<ShardRun> shard_runs(const std::vector<ParamInfo>& shard,
                                 const std::vector<ParamInfo>& whole);

// Which part of a flat buffer to move: `unit` flat elements per element of `local` / `whole`
// (1; the 8-bit state's block scales: 256, every run edge then lies on a block boundary but
// possibly the last), up to element `limit` of the shard (-1: all of it).
struct ShardSpan {
    int64_t unit = 1, limit = -1;
};

// The whole buffer from every rank's shard: a collective over the expert-parallel `group`
// (all-gathers of the expert blocks, in rank order).
void shard_to_whole(Device& dev, Communicator& group, const std::vector<ShardRun>& runs,
                    const Tensor& local, const Tensor& whole, ShardSpan span = {});
// This rank's shard (block `index`) of a whole buffer.
void whole_to_shard(Device& dev, int index, const std::vector<ShardRun>& runs, const Tensor& whole,
                    const Tensor& local, ShardSpan span = {});

}  // namespace moetrain

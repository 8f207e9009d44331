// The runs of an expert shard against the whole layout, and the copies between them.
#include "model/expert_shard.h"

#include <algorithm>

namespace moetrain {
namespace {

bool is_expert(const ParamInfo& p) {
    return p.name.find(".moe.experts.") != std::string::npos;
}

// Calls f(local, whole, count, expert) for every run clipped to the span, in its units.
template <class F>
void each_run(const std::vector<ShardRun>& runs, ShardSpan span, F f) {
    for (const ShardRun& r : runs) {
        const int64_t end =
            span.limit < 0 ? r.local + r.count : std::min(span.limit, r.local + r.count);
        if (end <= r.local) continue;
        const int64_t n = end - r.local;
        f(r.local / span.unit, r.whole / span.unit, (n + span.unit - 1) / span.unit, r.expert);
    }
}

}  // namespace

std::vector<ShardRun> shard_runs(const std::vector<ParamInfo>& shard,
                                 const std::vector<ParamInfo>& whole) {
    MT_CHECK(shard.size() == whole.size(), "expert shard of ", shard.size(),
             " tensors against a layout of ", whole.size());
    std::vector<ShardRun> runs;
    for (size_t i = 0; i < shard.size(); ++i) {
        const ParamInfo &s = shard[i], &w = whole[i];
        MT_CHECK(s.name == w.name, "expert shard tensor ", s.name, " against ", w.name);
        const bool expert = is_expert(s);
        MT_CHECK(expert || s.shape == w.shape, "tensor ", s.name, " differs outside the experts");
        // The layouts list the tensors in offset order: neighbours are adjacent in both.
        if (!expert && !runs.empty() && !runs.back().expert) {
            runs.back().count += s.numel();
            continue;
        }
        runs.push_back({s.offset, w.offset, s.numel(), expert});
    }
    return runs;
}

void shard_to_whole(Device& dev, Communicator& group, const std::vector<ShardRun>& runs,
                    const Tensor& local, const Tensor& whole, ShardSpan span) {
    each_run(runs, span, [&](int64_t l, int64_t w, int64_t n, bool expert) {
        const Tensor from = local.view(l, {n});
        if (expert)
            group.all_gather(dev, from, whole.view(w, {n * group.size()}));
        else
            dev.copy(whole.view(w, {n}), from);
    });
}

void whole_to_shard(Device& dev, int index, const std::vector<ShardRun>& runs, const Tensor& whole,
                    const Tensor& local, ShardSpan span) {
    each_run(runs, span, [&](int64_t l, int64_t w, int64_t n, bool expert) {
        dev.copy(local.view(l, {n}), whole.view(expert ? w + index * n : w, {n}));
    });
}

}  // namespace moetrain

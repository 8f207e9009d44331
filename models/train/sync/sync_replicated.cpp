// Replicated training (sync_replicated.h): the loss terms and gradients summed over the ranks,
// blocking in buckets or overlapped with the backward layer by layer.
#include "train/sync/sync_replicated.h"

#include <algorithm>

#include "model/train_passes.h"

namespace moetrain {

bool ReplicatedSync::overlaps() const {
    return dp() && dist_.overlap && dist_.comm->engine() == "mpi";
}

void ReplicatedSync::begin_last_micro_batch() {
    if (!overlaps()) return;
    hgrads_.resize(static_cast<size_t>(model_.num_params()));
    pending_.clear();
    TrainPasses(model_).set_layer_grads_ready([this](int l) { start_reduce(l); });
}

void ReplicatedSync::start_reduce(int layer) {
    TrainPasses im(model_);
    Device& dev = model_.device();
    Communicator& c = *dist_.comm;
    for (const TrainPasses::Range& r : im.layer_ranges(layer)) {
        float* h = hgrads_.data() + r.first;
        dev.download(h, im.grads().view(r.first, {r.count}));  // waits for the backward so far
        for (int64_t off = 0; off < r.count; off += dist_.bucket_elems)
            pending_.push_back(c.start_all_reduce(
                h + off, std::min(dist_.bucket_elems, r.count - off), DType::f32, ReduceOp::sum));
    }
    c.progress();
}

void ReplicatedSync::reduce_gradients() {
    TrainPasses im(model_);
    Device& dev = model_.device();
    const int64_t n = im.n_params();
    if (!dp()) {
        dev.sum_squares(stats_, im.grads(), n, false);
        return;
    }
    Communicator& c = *dist_.comm;
    if (overlaps()) {  // every layer's all-reduce is under way: the rest, then wait for all
        im.set_layer_grads_ready({});
        start_reduce(-1);
        c.all_reduce(dev, im.stats().view(0, {3}), ReduceOp::sum);
        for (int64_t id : pending_) c.wait(id);
        pending_.clear();
        dev.upload(im.grads(), hgrads_.data());
        dev.sum_squares(stats_, im.grads(), n, false);
        return;
    }
    c.all_reduce(dev, im.stats().view(0, {3}), ReduceOp::sum);  // ce, aux, z: sums of shares
    for (int64_t off = 0; off < n; off += dist_.bucket_elems)
        c.all_reduce(dev, im.grads().view(off, {std::min(dist_.bucket_elems, n - off)}),
                     ReduceOp::sum);
    dev.sum_squares(stats_, im.grads(), n, false);
}

}  // namespace moetrain

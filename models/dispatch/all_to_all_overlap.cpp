// The overlapped exchanges of the all-to-all dispatcher (all_to_all_dispatcher.h). Each starts
// a non-blocking all_to_all_v (Communicator::start_all_to_all_v; staged through host buffers,
// as the blocking exchange of a host-memory engine is) and runs work that needs none of the
// travelling rows before waiting for them:
// - forward: the experts over the rows this rank routed to its own experts (copied on the
//   device, never sent). The blocks own different rows, so running this one first changes no
//   bit;
// - backward: the layer's `meanwhile` work (the shared experts). The experts' backward then
//   runs over the blocks in source order, as the plain exchange does, so that the local
//   experts' weight gradients add up in the same order.
// The outputs (forward) and the input-row gradients (backward) go back with the blocking
// exchange: every block must be done before they can.
#include "dispatch/all_to_all_dispatcher.h"

#include "moetrain/comm.h"

namespace moetrain {

void AllToAllDispatcher::forward_overlapped(Device& dev, LayerRows& d, const MoeActs& a,
                                            const Experts& experts) {
    const int64_t own = group_.rank(), D = c_.d_model;
    const auto i = static_cast<size_t>(own);
    const int64_t id = start_exchange(dev, a.xg, d.send_rows, d.recv_rows);
    if (d.recv_rows[i] > 0) {  // sent to itself: the same rows, in the same order
        dev.copy(d.xr.view(d.recv_first[i] * D, {d.recv_rows[i], D}),
                 a.xg.view(d.send_first[i] * D, {d.send_rows[i], D}));
        experts(block(d, own));
    }
    finish_exchange(dev, id, d.xr, d, true);
    for (int64_t s = 0; s < group_.size(); ++s)
        if (s != own && d.recv_rows[static_cast<size_t>(s)] > 0) experts(block(d, s));
    exchange_rows(dev, d.yr, d.recv_rows, a.yrows, d.send_rows);
}

void AllToAllDispatcher::backward_overlapped(Device& dev, LayerRows& d, const GradScratch& g,
                                             const ExpertsBackward& experts,
                                             const std::function<void()>& meanwhile) {
    const int64_t id = start_exchange(dev, g.drows, d.send_rows, d.recv_rows);
    meanwhile();
    finish_exchange(dev, id, grads_.dyr, d, false);
    for (int64_t s = 0; s < group_.size(); ++s)
        if (d.recv_rows[static_cast<size_t>(s)] > 0) experts(grad_block(d, s, g));
    exchange_rows(dev, grads_.dxr, d.recv_rows, g.dxg, d.send_rows);
}

}  // namespace moetrain

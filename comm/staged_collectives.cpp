// The device-tensor collectives of an engine on host memory (mpi): each stages the tensor
// through a host buffer (download, host collective, upload). On the cpu backend that is two
// copies of memory the device already holds in host RAM; on opencl it is the only way in.
#include <numeric>
#include <vector>

#include "moetrain/comm.h"
#include "moetrain/device.h"

namespace moetrain {
namespace {

std::vector<unsigned char> host_copy(Device& dev, const Tensor& t) {
    std::vector<unsigned char> h(t.bytes());
    if (!h.empty()) dev.download(h.data(), t);
    return h;
}

}  // namespace

void Communicator::all_reduce(Device& dev, const Tensor& t, ReduceOp op) {
    if (size() == 1 || t.numel() == 0) return;
    std::vector<unsigned char> h = host_copy(dev, t);
    all_reduce(h.data(), t.numel(), t.dtype, op);
    dev.upload(t, h.data());
}

void Communicator::broadcast(Device& dev, const Tensor& t, int root) {
    if (size() == 1 || t.numel() == 0) return;
    std::vector<unsigned char> h = host_copy(dev, t);
    broadcast(h.data(), t.numel(), t.dtype, root);
    dev.upload(t, h.data());
}

void Communicator::reduce_scatter(Device& dev, const Tensor& send, const Tensor& recv) {
    const int64_t s = recv.numel();
    MT_CHECK(send.dtype == recv.dtype && send.numel() <= s * size(), "reduce_scatter: send holds ",
             send.numel(), " elements, more than ", size(), " shards of ", s);
    std::vector<unsigned char> h(static_cast<size_t>(s * size()) * dtype_size(send.dtype), 0),
        out(recv.bytes());
    if (send.numel() > 0) dev.download(h.data(), send);  // the tail stays zero
    reduce_scatter(h.data(), out.data(), s, recv.dtype);
    if (!out.empty()) dev.upload(recv, out.data());
}

void Communicator::all_gather(Device& dev, const Tensor& send, const Tensor& recv) {
    const int64_t s = send.numel();
    MT_CHECK(send.dtype == recv.dtype && recv.numel() <= s * size(), "all_gather: recv holds ",
             recv.numel(), " elements, more than ", size(), " shards of ", s);
    std::vector<unsigned char> h = host_copy(dev, send),
                               out(static_cast<size_t>(s * size()) * dtype_size(send.dtype));
    all_gather(h.data(), out.data(), s, send.dtype);
    if (recv.numel() > 0) dev.upload(recv, out.data());
}

void Communicator::all_to_all_v(Device& dev, const Tensor& send,
                                const std::vector<int64_t>& send_counts, const Tensor& recv,
                                const std::vector<int64_t>& recv_counts) {
    const int64_t ns = std::accumulate(send_counts.begin(), send_counts.end(), int64_t{0}),
                  nr = std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0});
    MT_CHECK(send.dtype == recv.dtype && ns <= send.numel() && nr <= recv.numel(),
             "all_to_all_v: ", ns, " elements to send from ", send.numel(), ", ", nr,
             " to receive into ", recv.numel());
    const size_t es = dtype_size(send.dtype);
    std::vector<unsigned char> h(static_cast<size_t>(ns) * es), out(static_cast<size_t>(nr) * es);
    if (ns > 0) dev.download(h.data(), send.view(0, {ns}));
    all_to_all_v(h.data(), send_counts, out.data(), recv_counts, send.dtype);
    if (nr > 0) dev.upload(recv.view(0, {nr}), out.data());
}

int64_t Communicator::start_all_reduce(void* data, int64_t count, DType t, ReduceOp op) {
    all_reduce(data, count, t, op);
    return 0;
}

int64_t Communicator::start_all_to_all_v(const void* send, const std::vector<int64_t>& send_counts,
                                         void* recv, const std::vector<int64_t>& recv_counts,
                                         DType t) {
    all_to_all_v(send, send_counts, recv, recv_counts, t);
    return 0;
}

void Communicator::wait(int64_t) {}

int subgroup_position(int rank, int size, int first, int stride, int count) {
    MT_CHECK(count >= 1 && stride >= 1 && first >= 0 && first + (count - 1) * stride < size,
             "subgroup of ", count, " ranks from ", first, " by ", stride, " outside ", size,
             " ranks");
    MT_CHECK(rank >= first && (rank - first) % stride == 0 && (rank - first) / stride < count,
             "rank ", rank, " is not in the subgroup of ", count, " ranks from ", first, " by ",
             stride);
    return (rank - first) / stride;
}

}  // namespace moetrain

// The NCCL communicator module (libmoetrain_comm_nccl.so) for the cuda backend. Bootstrapped
// over MPI: rank 0 creates the NCCL unique id and broadcasts it (MPI_Bcast), then every rank
// joins the NCCL communicator on its CUDA device. Device-tensor collectives run NCCL on CUDA
// memory directly; host-memory collectives (the setup agreement, target counts) stay on MPI.
// Ordering with the cuda backend's own stream: the device is synchronised before each NCCL
// call, which runs on this communicator's stream and is waited for before returning (no
// overlap with compute yet). It has never run: this project has had no multi-GPU machine
// (docs/DISTRIBUTED.md); it is compiled with warnings as errors.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <exception>
#include <numeric>

#include "cuda/cuda_device.h"
#include "moetrain/device.h"
#include "moetrain/error.h"
#include "mpi/mpi_comm.h"

namespace moetrain {
namespace {

void check_cuda(cudaError_t e, const char* what) {
    MT_CHECK(e == cudaSuccess, "nccl communicator: ", what, ": ", cudaGetErrorString(e));
}

void check_nccl(ncclResult_t r, const char* what) {
    MT_CHECK(r == ncclSuccess, "nccl communicator: ", what, ": ", ncclGetErrorString(r));
}

ncclDataType_t nccl_type(DType t) {
    switch (t) {
        case DType::f32:
            return ncclFloat32;
        case DType::i32:
            return ncclInt32;
        case DType::u8:
            return ncclUint8;
        case DType::bf16:
            return ncclBfloat16;
        case DType::f16:
            return ncclFloat16;
    }
    return ncclUint8;
}

class NcclComm final : public MpiComm {
  public:
    NcclComm() {
        // One GPU per rank: the node-local rank's (the cuda backend opens the same one, see
        // the CLI's --device handling under mpirun).
        int gpus = 0;
        check_cuda(cudaGetDeviceCount(&gpus), "cudaGetDeviceCount");
        MT_CHECK(gpus > 0, "nccl communicator: no CUDA device");
        check_cuda(cudaSetDevice(launched_local_rank() % gpus), "cudaSetDevice");
        ncclUniqueId id{};
        if (rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
        MpiComm::broadcast(&id, static_cast<int64_t>(sizeof id), DType::u8, 0);
        check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
        check_nccl(ncclCommInitRank(&comm_, size(), id, rank()), "ncclCommInitRank");
    }
    ~NcclComm() override {
        if (comm_) ncclCommDestroy(comm_);
        if (stream_) cudaStreamDestroy(stream_);
    }
    std::string engine() const override { return "nccl"; }
    using MpiComm::all_gather;
    using MpiComm::all_reduce;
    using MpiComm::all_to_all_v;
    using MpiComm::broadcast;
    using MpiComm::reduce_scatter;

    // The MPI communicator of the group (host collectives) and the NCCL communicator split
    // from this one with the same colour and order.
    std::unique_ptr<Communicator> subgroup(int first, int stride, int count) override {
        const int pos = subgroup_position(rank(), size(), first, stride, count);
        MPI_Comm sub = MPI_COMM_NULL;
        ncclComm_t nc = nullptr;
        {
            Guard g(*this, "subgroup");
            MPI_Comm_split(mpi_comm(), first, pos, &sub);
            check_nccl(ncclCommSplit(comm_, first, pos, &nc, nullptr), "ncclCommSplit");
        }
        return std::unique_ptr<Communicator>(new NcclComm(sub, nc));
    }

    void all_reduce(Device& dev, const Tensor& t, ReduceOp op) override {
        if (t.numel() == 0) return;
        run(dev, "all_reduce", [&] {
            return ncclAllReduce(ptr(dev, t), ptr(dev, t), count(t), nccl_type(t.dtype),
                                 op == ReduceOp::sum ? ncclSum : ncclMax, comm_, stream_);
        });
    }
    void broadcast(Device& dev, const Tensor& t, int root) override {
        if (t.numel() == 0) return;
        run(dev, "broadcast", [&] {
            return ncclBroadcast(ptr(dev, t), ptr(dev, t), count(t), nccl_type(t.dtype), root,
                                 comm_, stream_);
        });
    }
    // NCCL shards are equal: a send shorter than size() shards goes through a padded copy.
    void reduce_scatter(Device& dev, const Tensor& send, const Tensor& recv) override {
        const int64_t s = recv.numel();
        MT_CHECK(send.numel() <= s * size(), "reduce_scatter: send too long");
        Tensor full = send;
        if (send.numel() < s * size()) {
            full = dev.alloc(send.dtype, {s * size()});
            dev.copy(full.view(0, {send.numel()}), send);
        }
        run(dev, "reduce_scatter", [&] {
            return ncclReduceScatter(ptr(dev, full), ptr(dev, recv), count(recv),
                                     nccl_type(recv.dtype), ncclSum, comm_, stream_);
        });
    }
    void all_gather(Device& dev, const Tensor& send, const Tensor& recv) override {
        const int64_t s = send.numel();
        MT_CHECK(recv.numel() <= s * size(), "all_gather: recv too long");
        const Tensor full = recv.numel() < s * size() ? dev.alloc(send.dtype, {s * size()}) : recv;
        run(dev, "all_gather", [&] {
            return ncclAllGather(ptr(dev, send), ptr(dev, full), count(send), nccl_type(send.dtype),
                                 comm_, stream_);
        });
        if (full.buf != recv.buf) dev.copy(recv, full.view(0, {recv.numel()}));
    }
    // Point-to-point sends and receives of every non-empty block in one NCCL group.
    void all_to_all_v(Device& dev, const Tensor& send, const std::vector<int64_t>& sc,
                      const Tensor& recv, const std::vector<int64_t>& rc) override {
        const size_t R = static_cast<size_t>(size());
        MT_CHECK(sc.size() == R && rc.size() == R && send.dtype == recv.dtype,
                 "all_to_all_v: counts for ", size(), " ranks and one dtype needed");
        MT_CHECK(std::accumulate(sc.begin(), sc.end(), int64_t{0}) <= send.numel() &&
                     std::accumulate(rc.begin(), rc.end(), int64_t{0}) <= recv.numel(),
                 "all_to_all_v: the counts exceed the tensors");
        const size_t es = dtype_size(send.dtype);
        run(dev, "all_to_all_v", [&] {
            char* s = static_cast<char*>(ptr(dev, send));
            char* r = static_cast<char*>(ptr(dev, recv));
            ncclGroupStart();
            int64_t so = 0, ro = 0;
            for (size_t p = 0; p < R; ++p) {
                const int peer = static_cast<int>(p);
                if (sc[p] > 0)
                    ncclSend(s + so * static_cast<int64_t>(es), static_cast<size_t>(sc[p]),
                             nccl_type(send.dtype), peer, comm_, stream_);
                if (rc[p] > 0)
                    ncclRecv(r + ro * static_cast<int64_t>(es), static_cast<size_t>(rc[p]),
                             nccl_type(recv.dtype), peer, comm_, stream_);
                so += sc[p];
                ro += rc[p];
            }
            return ncclGroupEnd();
        });
    }

  private:
    NcclComm(MPI_Comm sub, ncclComm_t nc) : MpiComm(sub), comm_(nc) {
        check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
    }
    static void* ptr(Device& dev, const Tensor& t) {
        MT_CHECK(dev.backend_name() == "cuda" && t.device() == &dev,
                 "the nccl communicator needs tensors of the cuda device (got ", dev.backend_name(),
                 ")");
        auto* b = static_cast<cuda::CudaBuffer*>(t.buf.get());
        return static_cast<char*>(b->data()) + t.offset * static_cast<int64_t>(dtype_size(t.dtype));
    }
    static size_t count(const Tensor& t) { return static_cast<size_t>(t.numel()); }
    template <class F>
    void run(Device& dev, const char* what, F&& call) {
        dev.synchronize();  // the backend's queued work on these buffers is done
        Guard g(*this, what);
        check_nccl(call(), what);
        check_cuda(cudaStreamSynchronize(stream_), what);
    }

    ncclComm_t comm_ = nullptr;
    cudaStream_t stream_ = nullptr;
};

}  // namespace
}  // namespace moetrain

extern "C" __attribute__((visibility("default"))) moetrain::Communicator* moetrain_comm_entry(
    int abi, const char* backend, char* err, int err_len) {
    if (abi != moetrain::kCommAbi) return nullptr;
    if (std::string(backend) != "cuda") {
        std::snprintf(err, static_cast<size_t>(err_len),
                      "nccl runs on cuda devices only (device backend '%s'); use --comm mpi",
                      backend);
        return nullptr;
    }
    try {
        return new moetrain::NcclComm();
    } catch (const std::exception& e) {
        std::snprintf(err, static_cast<size_t>(err_len), "%s", e.what());
        return nullptr;
    }
}

// Communicators for multi-process training (docs/DISTRIBUTED.md). A process started by a
// launcher (`mpirun -np N moetrain train ...`) is one rank of N; a Communicator runs the
// collectives between them. One implementation per engine:
//  - "single": one process, no library; every collective is a copy (built in).
//  - "mpi": Open MPI on host memory, a module (libmoetrain_comm_mpi.so) loaded with dlopen
//    only when the process was launched with more than one rank, so a single-process run needs
//    no MPI library at run time. Device tensors are staged through host buffers.
//  - "nccl": NCCL on CUDA device memory, bootstrapped over MPI (rank 0 broadcasts the NCCL
//    unique id); a module built when the CUDA Toolkit ships NCCL (libmoetrain_comm_nccl.so).
// Every rank calls the same collectives in the same order with the same sizes. A rank that
// fails calls abort(): one line naming the rank, then every rank of the job exits non-zero.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "moetrain/dtype.h"
#include "moetrain/tensor.h"

namespace moetrain {

class Device;

enum class ReduceOp { sum, max };

class Communicator {
  public:
    virtual ~Communicator() = default;
    virtual std::string engine() const = 0;  // "single", "mpi", "nccl"
    virtual int rank() const = 0;
    virtual int size() const = 0;

    // ---- host memory (count elements of dtype t; f32, i32 and u8; u8 only moves) ----
    virtual void broadcast(void* data, int64_t count, DType t, int root) = 0;
    virtual void all_reduce(void* data, int64_t count, DType t, ReduceOp op) = 0;  // in place
    // recv[recv_count] = the sum over ranks of send[rank * recv_count + i].
    virtual void reduce_scatter(const void* send, void* recv, int64_t recv_count, DType t) = 0;
    // recv[r * send_count + i] = send of rank r, for r in rank order.
    virtual void all_gather(const void* send, void* recv, int64_t send_count, DType t) = 0;
    // Rank r sends send_counts[d] elements to rank d (blocks in rank order in `send`) and
    // receives recv_counts[s] elements from rank s (blocks in rank order in `recv`).
    virtual void all_to_all_v(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                              const std::vector<int64_t>& recv_counts, DType t) = 0;
    virtual void barrier() = 0;
    // Non-blocking all-reduce of host memory (in place): started now, the data is the sum only
    // after wait(id) returns, and must not be touched before. Every rank starts the same ones
    // in the same order (among its other collectives). progress() lets the started ones
    // advance (MPI progresses only inside MPI calls). The defaults run the blocking
    // all_reduce at once.
    virtual int64_t start_all_reduce(void* data, int64_t count, DType t, ReduceOp op);
    // Non-blocking all_to_all_v of host memory, the same way: `recv` holds the data only after
    // wait(id) returns, and neither buffer (nor the counts' effect) may be touched before. The
    // default runs the blocking all_to_all_v at once.
    virtual int64_t start_all_to_all_v(const void* send, const std::vector<int64_t>& send_counts,
                                       void* recv, const std::vector<int64_t>& recv_counts,
                                       DType t);
    virtual void wait(int64_t id);
    virtual void progress() {}
    // Seconds this process has spent inside the collectives (blocking ones and wait()) of this
    // engine's communicators, subgroups included, since the first was made: the time a rank
    // waits for data or for the other ranks. 0 where an engine does not measure it (single).
    virtual double seconds_in_collectives() const { return 0.0; }
    // The communicator of the `count` ranks first, first + stride, ..., first + (count - 1)
    // stride of this one (this rank among them), numbered in that order. Every rank of this
    // communicator calls it at the same time, each naming its own group; the groups partition
    // the ranks (expert parallelism: the ranks of one expert-parallel group, or the ranks that
    // hold the same experts).
    virtual std::unique_ptr<Communicator> subgroup(int first, int stride, int count) = 0;
    // Prints "moetrain: error: rank R of N: <message>" on stderr, then ends every rank of the
    // job with a non-zero exit (the launcher takes the others down).
    [[noreturn]] virtual void abort(const std::string& message) = 0;

    // ---- device tensors (contiguous views; same dtypes) ----
    // The default implementations stage through a host buffer (download, host collective,
    // upload); an engine on device memory (nccl) overrides them.
    virtual void all_reduce(Device& dev, const Tensor& t, ReduceOp op);
    virtual void broadcast(Device& dev, const Tensor& t, int root);
    // Shards of s = recv.numel() elements: recv = the sum over ranks of send's elements
    // [rank * s, (rank + 1) * s), where send (numel <= size() * s) counts as zero-padded to
    // size() * s (so a flat buffer of any length shards without a padded copy of it).
    virtual void reduce_scatter(Device& dev, const Tensor& send, const Tensor& recv);
    // recv = the first recv.numel() (<= size() * s) elements of every rank's send (numel s)
    // in rank order.
    virtual void all_gather(Device& dev, const Tensor& send, const Tensor& recv);
    // all_to_all_v of device tensors: the blocks of `send` (send_counts elements each, in rank
    // order from its first element) go to their ranks; `recv` gets recv_counts elements from
    // every rank in rank order. Both tensors may be longer than the counts' sums.
    virtual void all_to_all_v(Device& dev, const Tensor& send,
                              const std::vector<int64_t>& send_counts, const Tensor& recv,
                              const std::vector<int64_t>& recv_counts);
};

// Checks that `count` ranks first + i stride hold `rank` and lie within `size` ranks; returns
// this rank's position among them.
int subgroup_position(int rank, int size, int first, int stride, int count);

// How many ranks the launcher started this process with (1 when not launched by mpirun or a
// PMI launcher: OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_SIZE are read).
int launched_world_size();
// This process's rank among the ranks on its node (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID,
// PMIX_LOCAL_RANK, SLURM_LOCALID; 0 when not launched): which GPU a rank takes.
int launched_local_rank();
// How many ranks the launcher started on this process's node (OMPI_COMM_WORLD_LOCAL_SIZE,
// MPI_LOCALNRANKS, PMIX_LOCAL_SIZE; 1 when not launched or not said).
int launched_local_size();

// The communicator of this process: "single" when launched_world_size() == 1, otherwise the
// engine named (`engine` "auto": nccl for a cuda device when its module loads, else mpi).
// Throws one line when the engine's module is missing or cannot start (names the module and
// the loader's reason), so a bad launch fails before any work.
std::unique_ptr<Communicator> open_communicator(const std::string& engine = "auto",
                                                const std::string& backend = "cpu");

// The single-process communicator (size 1).
std::unique_ptr<Communicator> make_single_communicator();

// Rank 0 of `ranks` for planning (moetrain plan): it only tells its rank and size; any
// collective throws.
std::unique_ptr<Communicator> make_planning_communicator(int ranks);

// Module ABI: a communicator module exports
//   extern "C" moetrain::Communicator* moetrain_comm_entry(int abi, const char* backend,
//                                                         char* err, int err_len);
// returning nullptr with a one-line reason in err when it cannot start.
inline constexpr int kCommAbi = 2;  // 2: start_all_to_all_v, seconds_in_collectives

}  // namespace moetrain

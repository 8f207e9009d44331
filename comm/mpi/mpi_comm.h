// MpiComm: the Open MPI communicator (collectives on host memory over MPI_COMM_WORLD), used
// by the mpi module and, for its bootstrap and host-memory collectives, by the nccl module.
// Errors are fatal (MPI_ERRORS_ARE_FATAL): a failing MPI call, or a rank that dies, ends the
// job through the launcher. A watchdog thread bounds every collective: one that has not
// finished within MOETRAIN_COMM_TIMEOUT seconds (default 300) means a peer hangs, and this
// rank prints one line naming itself and the collective, then exits so the launcher ends
// the job.
#pragma once

// The C API only: Open MPI's C++ bindings would need libmpi_cxx.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "moetrain/comm.h"

namespace moetrain {

class MpiComm : public Communicator {
  public:
    MpiComm();  // MPI_COMM_WORLD (initialises MPI)
    ~MpiComm() override;

    std::string engine() const override { return "mpi"; }
    int rank() const override { return rank_; }
    int size() const override { return size_; }
    void broadcast(void* data, int64_t n, DType t, int root) override;
    void all_reduce(void* data, int64_t n, DType t, ReduceOp op) override;
    void reduce_scatter(const void* send, void* recv, int64_t n, DType t) override;
    void all_gather(const void* send, void* recv, int64_t n, DType t) override;
    void all_to_all_v(const void* send, const std::vector<int64_t>& sc, void* recv,
                      const std::vector<int64_t>& rc, DType t) override;
    void barrier() override;
    std::unique_ptr<Communicator> subgroup(int first, int stride, int count) override;
    int64_t start_all_reduce(void* data, int64_t n, DType t, ReduceOp op) override;
    int64_t start_all_to_all_v(const void* send, const std::vector<int64_t>& sc, void* recv,
                               const std::vector<int64_t>& rc, DType t) override;
    void wait(int64_t id) override;
    void progress() override;
    double seconds_in_collectives() const override;
    [[noreturn]] void abort(const std::string& message) override;
    using Communicator::all_gather;
    using Communicator::all_reduce;
    using Communicator::all_to_all_v;
    using Communicator::broadcast;
    using Communicator::reduce_scatter;

  protected:
    // A communicator over `comm` (from MPI_Comm_split; freed by the destructor). Messages name
    // the rank in the whole job.
    explicit MpiComm(MPI_Comm comm);
    MPI_Comm mpi_comm() const { return comm_; }
    // Marks a collective in flight for the watchdog (derived engines bound theirs too).
    struct Guard {
        Guard(MpiComm& c, const char* op);
        ~Guard();
        MpiComm& c_;
    };

  private:
    void watch();
    MPI_Comm comm_ = MPI_COMM_WORLD;
    bool world_ = true;
    int rank_ = 0, size_ = 1;
    int world_rank_ = 0, world_size_ = 1;  // for messages
    double timeout_s_ = 300;
    std::atomic<int64_t> since_ns_{0};
    std::atomic<const char*> op_{""};
    std::atomic<bool> stop_{false};
    std::thread watchdog_;
    // A started non-blocking collective, with the count and displacement arrays MPI reads
    // until it completes (all_to_all_v).
    struct Pending {
        MPI_Request request = MPI_REQUEST_NULL;
        std::vector<int> counts;
        bool waited = false;  // its owner has called wait(id): the id may be reused
    };
    int64_t add_pending(Pending p);
    std::vector<Pending> requests_;        // started non-blocking collectives (by id)
    static std::atomic<int64_t> busy_ns_;  // time inside collectives (Guard), every instance
};

}  // namespace moetrain

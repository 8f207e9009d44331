// The multi-process side of `moetrain train` (docs/DISTRIBUTED.md): the communicator of this
// launch, the setup agreement (every rank validates its arguments, config and data; one line
// from the lowest failing rank, or naming a rank that disagrees with rank 0, and every rank
// exits non-zero before any training work), each rank's rows of the global batches, and
// only rank 0 printing.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common.h"
#include "moetrain/comm.h"

namespace moetrain::cli {

// Thrown on every rank when the setup agreement failed and its one error line is printed:
// the command exits 1 without a message of its own.
struct QuietFailure : std::runtime_error {
    QuietFailure() : std::runtime_error("the setup failed on a rank (reported)") {}
};

class DistRun {
  public:
    // Opens the communicator of this launch ("single" unless started by mpirun with N > 1);
    // `device` is the --device spec (its backend chooses nccl or mpi for engine "auto").
    DistRun(const std::string& engine, const std::string& device);
    ~DistRun();
    Communicator& comm() { return *comm_; }
    int rank() const { return comm_->rank(); }
    int size() const { return comm_->size(); }
    bool root() const { return comm_->rank() == 0; }
    bool multi() const { return comm_->size() > 1; }
    // The device this rank opens: `device` itself, except that "cuda" without an index gets
    // the node-local rank's GPU in a multi-rank launch (the one the nccl communicator uses).
    std::string rank_device(const std::string& device) const;
    // The CPU threads this rank asks for: `threads` when given (> 0) or when OMP_NUM_THREADS is
    // set (0: OpenMP's own choice); otherwise, in a multi-rank launch, the processors this
    // process may run on divided among the node's ranks (at least 1), so that ranks started
    // without core binding (--oversubscribe, --bind-to none) do not each run one thread per
    // core of the node.
    int rank_threads(int threads) const;

    // Ends the setup: one agreement (two collectives every rank makes, failed or not) on
    // `error` (empty = this rank is fine) and on the named values, which every rank must hold
    // equal to rank 0's. On failure the lowest failing rank prints the one error line, and
    // every rank throws QuietFailure.
    void agree(const std::string& error,
               const std::vector<std::pair<std::string, std::string>>& same);
    bool agreed() const { return agreed_; }

    // An error after the setup: the job ends (Communicator::abort names this rank).
    [[noreturn]] void abort(const std::string& message) {
        comm_->abort(message);
        std::_Exit(1);  // not reached: Communicator::abort ends the process
    }

    // Copies rank r's rows [r B, (r + 1) B) of every one of the `accum` global micro-batches
    // (size() B rows of T tokens each) from `global` into `local` (accum B T tokens).
    void local_rows(const std::vector<int32_t>& global, std::vector<int32_t>& local, int B, int T,
                    int accum) const;

  private:
    std::unique_ptr<Communicator> comm_;
    bool agreed_ = false;
    int saved_stdout_ = -1;
};

// Runs `body` (a command on every rank) and returns its exit code. One process: errors
// propagate. Several: an error before agree() joins the agreement (one line, every rank exits
// 1); after it, the job is aborted with a line naming the rank.
int run_distributed(DistRun& dist, const std::function<void()>& body);

// Tells two ranks' token data apart: sizes and a sample of the tokens.
std::string data_fingerprint(const TokenData& data);

}  // namespace moetrain::cli

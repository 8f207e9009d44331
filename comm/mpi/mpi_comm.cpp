// MpiComm (mpi_comm.h).
#include "mpi_comm.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "moetrain/error.h"

namespace moetrain {
namespace {

using Clock = std::chrono::steady_clock;

MPI_Datatype mpi_type(DType t) {
    switch (t) {
        case DType::f32:
            return MPI_FLOAT;
        case DType::i32:
            return MPI_INT;
        case DType::u8:
            return MPI_UNSIGNED_CHAR;
        case DType::bf16:
        case DType::f16:
            return MPI_UINT16_T;  // moved, never reduced
    }
    return MPI_BYTE;
}

int mpi_count(int64_t n, const char* what) {
    MT_CHECK(n >= 0 && n <= INT_MAX, what, ": ", n, " elements exceed one MPI call's int count");
    return static_cast<int>(n);
}

MPI_Op mpi_op(ReduceOp op) {
    return op == ReduceOp::sum ? MPI_SUM : MPI_MAX;
}

void check_reducible(DType t, const char* what) {
    MT_CHECK(t == DType::f32 || t == DType::i32, what, " reduces f32 or i32 only (got ",
             dtype_name(t), ")");
}

// MPI's arrays of an all_to_all_v over R ranks, one after the other: send counts, send
// displacements, receive counts, receive displacements (elements, as int).
std::vector<int> alltoallv_layout(const std::vector<int64_t>& sc, const std::vector<int64_t>& rc,
                                  int ranks) {
    const auto R = static_cast<size_t>(ranks);
    MT_CHECK(sc.size() == R && rc.size() == R, "all_to_all_v: ", sc.size(), " send and ", rc.size(),
             " receive counts for ", ranks, " ranks");
    std::vector<int> a(4 * R);
    int64_t so = 0, ro = 0;
    for (size_t r = 0; r < R; ++r) {
        a[r] = mpi_count(sc[r], "all_to_all_v");
        a[R + r] = mpi_count(so, "all_to_all_v");
        a[2 * R + r] = mpi_count(rc[r], "all_to_all_v");
        a[3 * R + r] = mpi_count(ro, "all_to_all_v");
        so += sc[r];
        ro += rc[r];
    }
    return a;
}

}  // namespace

std::atomic<int64_t> MpiComm::busy_ns_{0};

double MpiComm::seconds_in_collectives() const {
    return 1e-9 * static_cast<double>(busy_ns_.load());
}

MpiComm::Guard::Guard(MpiComm& c, const char* op) : c_(c) {
    c_.op_ = op;
    c_.since_ns_ = Clock::now().time_since_epoch().count();
}
MpiComm::Guard::~Guard() {
    MpiComm::busy_ns_ += Clock::now().time_since_epoch().count() - c_.since_ns_;
    c_.since_ns_ = 0;
}

MpiComm::MpiComm() {
    int ready = 0;
    MPI_Initialized(&ready);
    if (!ready) {
        int provided = 0;
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    world_rank_ = rank_;
    world_size_ = size_;
    if (const char* t = std::getenv("MOETRAIN_COMM_TIMEOUT")) timeout_s_ = std::atof(t);
    if (timeout_s_ > 0) watchdog_ = std::thread([this] { watch(); });
}

MpiComm::MpiComm(MPI_Comm comm) : comm_(comm), world_(false) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
    if (const char* t = std::getenv("MOETRAIN_COMM_TIMEOUT")) timeout_s_ = std::atof(t);
    if (timeout_s_ > 0) watchdog_ = std::thread([this] { watch(); });
}

MpiComm::~MpiComm() {
    stop_ = true;
    if (watchdog_.joinable()) watchdog_.join();
    int done = 0;
    MPI_Finalized(&done);
    if (done) return;
    if (!world_) {
        MPI_Comm_free(&comm_);
        return;
    }
    MPI_Finalize();
}

std::unique_ptr<Communicator> MpiComm::subgroup(int first, int stride, int count) {
    const int pos = subgroup_position(rank_, size_, first, stride, count);
    MPI_Comm sub = MPI_COMM_NULL;
    {
        Guard g(*this, "subgroup");
        MPI_Comm_split(comm_, first, pos, &sub);  // groups partition the ranks: `first` names one
    }
    // A class with a protected constructor: make_unique cannot reach it.
    return std::unique_ptr<Communicator>(new MpiComm(sub));
}

void MpiComm::broadcast(void* data, int64_t n, DType t, int root) {
    MT_CHECK(root >= 0 && root < size_, "broadcast: root ", root, " outside 0..", size_ - 1);
    Guard g(*this, "broadcast");
    MPI_Bcast(data, mpi_count(n, "broadcast"), mpi_type(t), root, comm_);
}

void MpiComm::all_reduce(void* data, int64_t n, DType t, ReduceOp op) {
    check_reducible(t, "all_reduce");
    Guard g(*this, "all_reduce");
    MPI_Allreduce(MPI_IN_PLACE, data, mpi_count(n, "all_reduce"), mpi_type(t), mpi_op(op), comm_);
}

int64_t MpiComm::add_pending(Pending p) {
    // A new round reuses the ids of the last one once every request of it has been waited for.
    // Complete is not enough: progress() completes requests (MPI_Test) before their owners
    // wait for them, and clearing then made a later wait(id) find no request.
    bool all_waited = true;
    for (const Pending& q : requests_) all_waited &= q.waited;
    if (all_waited) requests_.clear();
    requests_.push_back(std::move(p));
    return static_cast<int64_t>(requests_.size()) - 1;
}

int64_t MpiComm::start_all_reduce(void* data, int64_t n, DType t, ReduceOp op) {
    check_reducible(t, "start_all_reduce");
    Pending p;
    {
        Guard g(*this, "start_all_reduce");
        MPI_Iallreduce(MPI_IN_PLACE, data, mpi_count(n, "start_all_reduce"), mpi_type(t),
                       mpi_op(op), comm_, &p.request);
    }
    return add_pending(std::move(p));
}

int64_t MpiComm::start_all_to_all_v(const void* send, const std::vector<int64_t>& sc, void* recv,
                                    const std::vector<int64_t>& rc, DType t) {
    Pending p;
    p.counts = alltoallv_layout(sc, rc, size_);
    const int* a = p.counts.data();
    const auto R = static_cast<size_t>(size_);
    {
        Guard g(*this, "start_all_to_all_v");
        MPI_Ialltoallv(send, a, a + R, mpi_type(t), recv, a + 2 * R, a + 3 * R, mpi_type(t), comm_,
                       &p.request);
    }
    return add_pending(std::move(p));
}

void MpiComm::wait(int64_t id) {
    MT_CHECK(id >= 0 && id < static_cast<int64_t>(requests_.size()), "wait: no request ", id);
    Guard g(*this, "a non-blocking collective");
    Pending& p = requests_[static_cast<size_t>(id)];
    MPI_Wait(&p.request, MPI_STATUS_IGNORE);
    p.waited = true;
}

void MpiComm::progress() {
    for (Pending& p : requests_) {
        if (p.request == MPI_REQUEST_NULL) continue;
        int done = 0;
        MPI_Test(&p.request, &done, MPI_STATUS_IGNORE);  // a completed one becomes REQUEST_NULL
    }
}

void MpiComm::reduce_scatter(const void* send, void* recv, int64_t n, DType t) {
    check_reducible(t, "reduce_scatter");
    Guard g(*this, "reduce_scatter");
    MPI_Reduce_scatter_block(send, recv, mpi_count(n, "reduce_scatter"), mpi_type(t), MPI_SUM,
                             comm_);
}

void MpiComm::all_gather(const void* send, void* recv, int64_t n, DType t) {
    Guard g(*this, "all_gather");
    const int c = mpi_count(n, "all_gather");
    MPI_Allgather(send, c, mpi_type(t), recv, c, mpi_type(t), comm_);
}

void MpiComm::all_to_all_v(const void* send, const std::vector<int64_t>& sc, void* recv,
                           const std::vector<int64_t>& rc, DType t) {
    const std::vector<int> a = alltoallv_layout(sc, rc, size_);
    const auto R = static_cast<size_t>(size_);
    Guard g(*this, "all_to_all_v");
    MPI_Alltoallv(send, a.data(), a.data() + R, mpi_type(t), recv, a.data() + 2 * R,
                  a.data() + 3 * R, mpi_type(t), comm_);
}

void MpiComm::barrier() {
    Guard g(*this, "barrier");
    MPI_Barrier(comm_);
}

void MpiComm::abort(const std::string& message) {
    std::fflush(stdout);
    std::fprintf(stderr, "moetrain: error: rank %d of %d: %s\n", world_rank_, world_size_,
                 message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::_Exit(1);
}

void MpiComm::watch() {
    const auto limit = std::chrono::duration<double>(timeout_s_);
    while (!stop_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        const int64_t since = since_ns_;
        if (since == 0) continue;
        const auto waited = Clock::now() - Clock::time_point(Clock::duration(since));
        if (waited < limit || since_ns_ != since) continue;
        // Not MPI_Abort: the main thread is inside MPI (MPI_THREAD_FUNNELED). A rank that
        // exits non-zero without MPI_Finalize makes the launcher end the whole job.
        std::fflush(stdout);
        std::fprintf(stderr,
                     "moetrain: error: rank %d of %d: %s did not complete within %g s: another "
                     "rank died or hangs (MOETRAIN_COMM_TIMEOUT)\n",
                     world_rank_, world_size_, op_.load(), timeout_s_);
        std::fflush(stderr);
        std::_Exit(1);
    }
}

}  // namespace moetrain

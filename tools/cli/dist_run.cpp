// DistRun: see dist_run.h.
#include "dist_run.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "moetrain/error.h"

namespace moetrain::cli {
namespace {

// FNV-1a, 32 bits: enough to tell two ranks' settings apart.
int32_t fingerprint(const std::string& s) {
    uint32_t h = 2166136261u;
    for (unsigned char ch : s) h = (h ^ ch) * 16777619u;
    return static_cast<int32_t>(h & 0x7fffffff);
}

constexpr size_t kAgreed = 8;

}  // namespace

DistRun::DistRun(const std::string& engine, const std::string& device) {
    comm_ = open_communicator(engine, device.substr(0, device.find(':')));
    if (multi() && !root()) {  // only rank 0 prints (progress, evaluation, checkpoints)
        std::fflush(stdout);
        saved_stdout_ = dup(STDOUT_FILENO);
        const int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
            dup2(null, STDOUT_FILENO);
            close(null);
        }
    }
}

DistRun::~DistRun() {
    if (saved_stdout_ >= 0) {
        std::fflush(stdout);
        dup2(saved_stdout_, STDOUT_FILENO);
        close(saved_stdout_);
    }
}

void DistRun::agree(const std::string& error,
                    const std::vector<std::pair<std::string, std::string>>& same) {
    agreed_ = true;
    if (!multi()) {
        if (!error.empty()) fail(error);
        return;
    }
    const int R = size(), me = rank();
    // 1: the values of rank 0, 2: the lowest rank with an error or a disagreement. The sizes
    // are fixed: a rank that failed early passes no values but makes the same collectives.
    MT_CHECK(same.size() <= kAgreed, "at most ", kAgreed, " values to agree on");
    std::vector<int32_t> ref(kAgreed, 0);
    for (size_t i = 0; i < same.size(); ++i) ref[i] = fingerprint(same[i].second);
    std::vector<int32_t> mine = ref;
    comm_->broadcast(ref.data(), static_cast<int64_t>(ref.size()), DType::i32, 0);
    int differs = -1;
    for (size_t i = 0; error.empty() && i < same.size() && differs < 0; ++i)
        if (ref[i] != mine[i]) differs = static_cast<int>(i);
    const bool bad = !error.empty() || differs >= 0;
    int32_t first_bad = bad ? R - me : 0;  // max over ranks = the lowest failing rank
    comm_->all_reduce(&first_bad, 1, DType::i32, ReduceOp::max);
    if (first_bad == 0) return;
    // The lowest failing rank prints the line; every rank waits for it before exiting (a rank
    // that exits non-zero first could make the launcher end the job before the line is out).
    if (R - first_bad == me) {
        std::string line = !error.empty()
                               ? error
                               : "its " + same[static_cast<size_t>(differs)].first +
                                     " differs from rank 0's; every rank must be started with "
                                     "the same arguments and data";
        std::replace(line.begin(), line.end(), '\n', ' ');
        std::fflush(stdout);
        std::fprintf(stderr, "moetrain: error: rank %d of %d: %s\n", me, R, line.c_str());
        std::fflush(stderr);
    }
    comm_->barrier();
    throw QuietFailure();
}

std::string DistRun::rank_device(const std::string& device) const {
    if (!multi() || device != "cuda") return device;
    return device + ":" + std::to_string(launched_local_rank());
}

int DistRun::rank_threads(int threads) const {
    const char* omp = std::getenv("OMP_NUM_THREADS");
    if (threads > 0 || !multi() || (omp && *omp)) return threads;
    cpu_set_t mask;
    CPU_ZERO(&mask);
    const int usable = sched_getaffinity(0, sizeof(mask), &mask) == 0
                           ? CPU_COUNT(&mask)
                           : static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
    return std::max(1, usable / std::max(1, launched_local_size()));
}

void DistRun::local_rows(const std::vector<int32_t>& global, std::vector<int32_t>& local, int B,
                         int T, int accum) const {
    const size_t rows = static_cast<size_t>(B) * static_cast<size_t>(T);
    const size_t per_global = rows * static_cast<size_t>(size());
    local.resize(rows * static_cast<size_t>(accum));
    for (int a = 0; a < accum; ++a) {
        const auto first =
            global.begin() +
            static_cast<std::ptrdiff_t>(a * per_global + static_cast<size_t>(rank()) * rows);
        std::copy(first, first + static_cast<std::ptrdiff_t>(rows),
                  local.begin() + static_cast<std::ptrdiff_t>(a * rows));
    }
}

int run_distributed(DistRun& dist, const std::function<void()>& body) {
    try {
        try {
            body();
        } catch (const QuietFailure&) {
            throw;
        } catch (const std::exception& e) {
            if (!dist.multi()) throw;
            if (!dist.agreed()) dist.agree(e.what(), {});  // throws on every rank
            dist.abort(e.what());
        }
    } catch (const QuietFailure&) {
        return 1;
    }
    return 0;
}

std::string data_fingerprint(const TokenData& data) {
    std::string s;
    for (const TokenStream& t : {data.train, data.val}) {
        s += std::to_string(t->size()) + ":";
        const int64_t stride = std::max<int64_t>(1, t->size() / 4096);
        for (int64_t i = 0; i < t->size(); i += stride) {
            int32_t id = 0;
            t->read(i, 1, &id);
            s += std::to_string(id) + ",";
        }
    }
    return s;
}

}  // namespace moetrain::cli

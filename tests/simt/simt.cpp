// The SIMT harness scheduler: the threads of a block are ucontext fibers on the calling OS
// thread; a fiber runs until it reaches a barrier or warp operation (or returns), then the
// scheduler resumes the next ready fiber. Barriers and warp exchanges release when every
// participant has arrived; the scheduler computes each lane's result at release, so no lane
// can observe a later exchange. See simt.h for the semantics and the checks.
#include "simt.h"

#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace simt {
namespace {

constexpr size_t kStackBytes = 128 * 1024;
constexpr unsigned kMaxThreads = 1024;

enum class State : uint8_t { ready, at_barrier, at_warp, done, faulted };

struct Fiber {
    ucontext_t ctx{};
    uint3 idx;
    int linear = 0;
    State state = State::ready;
    // barrier
    const char* file = nullptr;
    int line = 0;
    // warp exchange
    WarpOp op = WarpOp::sync;
    unsigned mask = 0;
    uint64_t bits = 0;
    int arg = 0;
    int width = 32;
    uint64_t result = 0;
};

// Which ready thread runs next: seed 0 = oldest first; odd seeds = uniformly random; even
// seeds = newest first (a just-released warp races ahead of the others).
enum class Policy : uint8_t { in_order, random, newest_first };

struct Run {
    ucontext_t sched{};
    std::vector<Fiber> fibers;
    std::vector<int> ready;
    int current = -1;
    const std::function<void()>* body = nullptr;
    std::string fault;
    Policy policy = Policy::in_order;
    std::mt19937_64* rng = nullptr;
};

alignas(32) unsigned char g_dyn_smem[kSimtMaxSharedBytes];  // WMMA fragment accesses need 32
thread_local Run* g_run = nullptr;
uint64_t g_seed = 0;
uint64_t g_launches = 0;
std::atomic<uint64_t> g_vector_accesses{0};
std::set<std::string> g_launched;

// One pool of fiber stacks, mapped once (pages are committed only when touched).
char* stack_pool() {
    static char* pool = [] {
        void* p = mmap(nullptr, kStackBytes * kMaxThreads, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) throw Error("simt: cannot map fiber stacks");
        return static_cast<char*>(p);
    }();
    return pool;
}

Fiber& self() {
    return g_run->fibers[g_run->current];
}

// Switch from the running fiber back to the scheduler.
void yield_to_scheduler() {
    swapcontext(&self().ctx, &g_run->sched);
}

[[noreturn]] void fault(const std::string& msg) {
    Fiber& f = self();
    if (g_run->fault.empty()) {
        g_run->fault = "thread (" + std::to_string(f.idx.x) + "," + std::to_string(f.idx.y) + "," +
                       std::to_string(f.idx.z) + ") of block (" + std::to_string(blockIdx.x) + "," +
                       std::to_string(blockIdx.y) + "," + std::to_string(blockIdx.z) + "): " + msg;
    }
    f.state = State::faulted;
    yield_to_scheduler();
    std::abort();  // a faulted fiber is never resumed
}

void fiber_entry() {
    std::string error;  // faulted outside the handler: no exception stays in flight on a fiber
    try {
        (*g_run->body)();
    } catch (const std::exception& e) {
        error = e.what();
    }
    if (!error.empty()) fault("exception in kernel: " + error);
    self().state = State::done;
    swapcontext(&self().ctx, &g_run->sched);
}

std::string strip_template(const char* name) {
    std::string s = name;
    while (!s.empty() && (s.front() == '(' || s.front() == ' ')) s.erase(s.begin());
    auto lt = s.find('<');
    if (lt != std::string::npos) s.resize(lt);
    while (!s.empty() && (s.back() == ')' || s.back() == ' ')) s.pop_back();
    auto colon = s.rfind("::");
    if (colon != std::string::npos) s = s.substr(colon + 2);
    return s;
}

std::string warp_name(int first) {
    return "warp " + std::to_string(first / 32);
}

// Puts released fibers on the ready list (in a seed-dependent order).
void make_ready(Run& run, std::vector<int> ids) {
    if (run.policy != Policy::in_order) std::shuffle(ids.begin(), ids.end(), *run.rng);
    for (int t : ids) {
        run.fibers[t].state = State::ready;
        run.ready.push_back(t);
    }
}

// The lanes of fiber f's warp that its warp operation names, or a fault.
void check_warp_arrival(Run& run, const Fiber& f) {
    int first = f.linear - f.linear % 32;
    int size = std::min<int>(32, static_cast<int>(run.fibers.size()) - first);
    unsigned mask = f.mask;
    std::vector<int> lanes;
    for (int l = 0; l < size; ++l) {
        if (!((mask >> l) & 1u)) continue;
        const Fiber& m = run.fibers[first + l];
        if (m.state == State::done) {
            run.fault = warp_name(first) + ": lane " + std::to_string(l) +
                        " returned while its warp waits for it in a warp operation";
            return;
        }
        if (m.state != State::at_warp) return;  // not everyone has arrived yet
        if (m.op != f.op || m.mask != mask || m.width != f.width) {
            run.fault = warp_name(first) +
                        ": lanes of one mask are at different warp operations (divergent code)";
            return;
        }
        lanes.push_back(first + l);
    }
    // Everyone arrived: compute each lane's result from the values as they are now.
    for (int t : lanes) {
        Fiber& m = run.fibers[t];
        int l = t - first, width = m.width, seg = l & ~(width - 1), src = l;
        switch (m.op) {
            case WarpOp::shfl_idx:
                src = seg + (m.arg & (width - 1));
                break;
            case WarpOp::shfl_xor:
                src = ((l ^ m.arg) & ~(width - 1)) == seg ? (l ^ m.arg) : l;
                break;
            case WarpOp::shfl_down:
                src = l - seg + m.arg < width ? l + m.arg : l;
                break;
            case WarpOp::shfl_up:
                src = l - seg - m.arg >= 0 ? l - m.arg : l;
                break;
            default:
                break;
        }
        if (m.op == WarpOp::shfl_idx || m.op == WarpOp::shfl_xor || m.op == WarpOp::shfl_down ||
            m.op == WarpOp::shfl_up) {
            if (src >= size || !((mask >> src) & 1u)) {
                run.fault = warp_name(first) + ": lane " + std::to_string(l) +
                            " shuffles from lane " + std::to_string(src) +
                            " which is not in the mask";
                return;
            }
            m.result = run.fibers[first + src].bits;
        } else if (m.op == WarpOp::sync) {
            m.result = 0;
        } else {
            unsigned ballot = 0;
            for (int o : lanes)
                if (run.fibers[o].bits) ballot |= 1u << (o - first);
            m.result = m.op == WarpOp::ballot ? ballot
                       : m.op == WarpOp::any  ? (ballot != 0)
                                              : (ballot == mask);
        }
    }
    make_ready(run, lanes);
}

void check_barrier_arrival(Run& run, const Fiber& f) {
    int done = 0, waiting = 0;
    for (const Fiber& m : run.fibers) {
        done += m.state == State::done;
        waiting += m.state == State::at_barrier;
    }
    std::string site = std::string(f.file) + ":" + std::to_string(f.line);
    if (done > 0) {
        run.fault = "__syncthreads at " + site + " reached after " + std::to_string(done) +
                    " threads of the block returned";
        return;
    }
    if (waiting < static_cast<int>(run.fibers.size())) return;
    std::vector<int> all;
    for (const Fiber& m : run.fibers) {
        if (m.line != f.line || std::strcmp(m.file, f.file) != 0) {
            run.fault = "threads of one block wait at different __syncthreads (" + site + " and " +
                        m.file + ":" + std::to_string(m.line) + ")";
            return;
        }
        all.push_back(m.linear);
    }
    make_ready(run, all);
}

void check_exit(Run& run, const Fiber& f) {
    int first = f.linear - f.linear % 32, lane = f.linear % 32;
    int size = std::min<int>(32, static_cast<int>(run.fibers.size()) - first);
    for (const Fiber& m : run.fibers) {
        if (m.state == State::at_barrier) {
            run.fault = "a thread returned while others wait at __syncthreads (" +
                        std::string(m.file) + ":" + std::to_string(m.line) + ")";
            return;
        }
    }
    for (int l = 0; l < size; ++l) {
        const Fiber& m = run.fibers[first + l];
        if (m.state == State::at_warp && ((m.mask >> lane) & 1u)) {
            run.fault = warp_name(first) + ": lane " + std::to_string(lane) +
                        " returned while its warp waits for it in a warp operation";
            return;
        }
    }
}

std::string describe_states(const Run& run) {
    int counts[5] = {0, 0, 0, 0, 0};
    for (const Fiber& f : run.fibers) counts[static_cast<int>(f.state)]++;
    return std::to_string(counts[0]) + " ready, " + std::to_string(counts[1]) +
           " at __syncthreads, " + std::to_string(counts[2]) + " at warp operations, " +
           std::to_string(counts[3]) + " returned";
}

// Takes the next fiber to run off the ready list according to the policy.
int next_ready(Run& run) {
    size_t i = 0;
    if (run.policy == Policy::random)
        i = std::uniform_int_distribution<size_t>(0, run.ready.size() - 1)(*run.rng);
    else if (run.policy == Policy::newest_first)
        i = run.ready.size() - 1;
    int t = run.ready[i];
    run.ready.erase(run.ready.begin() + static_cast<std::ptrdiff_t>(i));
    return t;
}

// Runs fiber t until it blocks or returns. The context calls stay out of line (they return
// twice, which would pin the caller's locals).
__attribute__((noinline)) void resume(Run& run, int t) {
    run.current = t;
    threadIdx = run.fibers[t].idx;
    swapcontext(&run.sched, &run.fibers[t].ctx);
    run.current = -1;
}

__attribute__((noinline)) void init_context(Fiber& f, char* stack) {
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = stack;
    f.ctx.uc_stack.ss_size = kStackBytes;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, fiber_entry, 0);
}

void run_block(Run& run, unsigned nthreads) {
    char* stacks = stack_pool();
    run.fibers.assign(nthreads, Fiber{});
    run.ready.clear();
    std::vector<int> all(nthreads);
    for (unsigned t = 0; t < nthreads; ++t) {
        Fiber& f = run.fibers[t];
        f.linear = static_cast<int>(t);
        f.idx.x = t % blockDim.x;
        f.idx.y = (t / blockDim.x) % blockDim.y;
        f.idx.z = t / (blockDim.x * blockDim.y);
        init_context(f, stacks + static_cast<size_t>(t) * kStackBytes);
        all[t] = static_cast<int>(t);
    }
    make_ready(run, all);
    unsigned done = 0;
    while (done < nthreads) {
        if (run.ready.empty()) throw Error("deadlock: " + describe_states(run));
        int t = next_ready(run);
        resume(run, t);
        Fiber& f = run.fibers[t];
        if (f.state == State::at_warp)
            check_warp_arrival(run, f);
        else if (f.state == State::at_barrier)
            check_barrier_arrival(run, f);
        else if (f.state == State::done) {
            done++;
            check_exit(run, f);
        }
        if (!run.fault.empty()) throw Error(run.fault);
    }
}

}  // namespace

unsigned char* dynamic_shared() {
    return g_dyn_smem;
}
void count_vector_access() {
    g_vector_accesses.fetch_add(1, std::memory_order_relaxed);
}
uint64_t vector_accesses() {
    return g_vector_accesses.load(std::memory_order_relaxed);
}
void misaligned_vector_access(const void* p, size_t bytes) {
    char where[32];
    std::snprintf(where, sizeof where, "%p", p);
    throw Error("misaligned " + std::to_string(bytes) + "-byte vector access at " + where +
                " (address mod " + std::to_string(bytes) + " = " +
                std::to_string(reinterpret_cast<uintptr_t>(p) % bytes) + ")");
}
void set_seed(uint64_t seed) {
    g_seed = seed;
}
uint64_t seed() {
    return g_seed;
}
const std::set<std::string>& launched_kernels() {
    return g_launched;
}

void block_barrier(const char* file, int line) {
    if (!g_run || g_run->current < 0) throw Error("__syncthreads outside a kernel");
    Fiber& f = self();
    f.file = file;
    f.line = line;
    f.state = State::at_barrier;
    yield_to_scheduler();
}

uint64_t warp_exchange(WarpOp op, unsigned mask, uint64_t bits, int arg, int width) {
    if (!g_run || g_run->current < 0) throw Error("warp operation outside a kernel");
    Fiber& f = self();
    int lane = f.linear % 32;
    int warp_first = f.linear - lane;
    int warp_size = std::min<int>(32, static_cast<int>(g_run->fibers.size()) - warp_first);
    if (!((mask >> lane) & 1u)) fault("warp operation with a mask that excludes the calling lane");
    if (warp_size < 32 && (mask >> warp_size) != 0)
        fault("warp mask names lanes beyond the end of a partial warp");
    if (width < 1 || width > 32 || (width & (width - 1)) != 0)
        fault("shuffle width not a power of 2 <= 32");
    f.op = op;
    f.mask = mask;
    f.bits = bits;
    f.arg = arg;
    f.width = width;
    f.state = State::at_warp;
    yield_to_scheduler();
    return f.result;
}

// With MOETRAIN_SIMT_LAUNCH_LOG set, the name of each kernel launched for the first time in this
// process is appended to that file: how the cudasim run of the op suite records the kernels it
// ran, for the coverage of kernels kept in kernels_cuda/*.cu (tests/simt/cu_kernel_coverage.py).
namespace {
void log_first_launch(const std::string& kname) {
    const char* path = std::getenv("MOETRAIN_SIMT_LAUNCH_LOG");
    if (!path || !*path) return;
    FILE* f = std::fopen(path, "a");
    if (!f) throw Error(std::string("cannot append to MOETRAIN_SIMT_LAUNCH_LOG ") + path);
    std::fprintf(f, "%s\n", kname.c_str());
    std::fclose(f);
}
}  // namespace

void run_grid(const char* name, dim3 grid, dim3 block, size_t shmem,
              const std::function<void()>& body) {
    std::string kname = strip_template(name);
    uint64_t nthreads = uint64_t(block.x) * block.y * block.z;
    auto bad = [&](const std::string& why) { throw Error("launch of " + kname + ": " + why); };
    if (nthreads == 0 || nthreads > kMaxThreads)
        bad("block of " + std::to_string(nthreads) + " threads (1..1024)");
    if (block.x > 1024 || block.y > 1024 || block.z > 64)
        bad("block dimension over the CUDA limit");
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) bad("empty grid");
    if (grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535)
        bad("grid dimension over the CUDA limit");
    if (shmem > kSimtMaxSharedBytes)
        bad("dynamic shared memory " + std::to_string(shmem) + " bytes > 99 KiB");
    if (g_run) bad("nested launch");
    if (g_launched.insert(kname).second) log_first_launch(kname);
    g_launches++;

    std::vector<uint3> blocks;
    for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x) blocks.push_back(uint3{x, y, z});
    std::mt19937_64 rng(g_seed * 0x9E3779B97F4A7C15ull + g_launches);
    if (g_seed != 0) std::shuffle(blocks.begin(), blocks.end(), rng);

    Run run;
    run.body = &body;
    run.rng = &rng;
    run.policy = g_seed == 0    ? Policy::in_order
                 : (g_seed & 1) ? Policy::random
                                : Policy::newest_first;
    g_run = &run;
    gridDim = grid;
    blockDim = block;
    try {
        for (const uint3& b : blocks) {
            blockIdx = b;
            std::memset(g_dyn_smem, 0xff, shmem);  // NaN / -1 until written
            run_block(run, static_cast<unsigned>(nthreads));
        }
    } catch (...) {
        g_run = nullptr;
        throw;
    }
    g_run = nullptr;
}

namespace {
std::vector<std::function<void()>>* g_capture = nullptr;
}  // namespace

void submit(std::function<void()> work) {
    if (g_capture)
        g_capture->push_back(std::move(work));
    else
        work();
}

void set_capture_list(std::vector<std::function<void()>>* list) {
    g_capture = list;
}
std::vector<std::function<void()>>* capture_list() {
    return g_capture;
}

}  // namespace simt

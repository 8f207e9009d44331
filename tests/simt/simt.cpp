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
#include <random>
#include <vector>

thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;

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

struct Run {
    ucontext_t sched{};
    std::vector<Fiber> fibers;
    int current = -1;
    const std::function<void()>* body = nullptr;
    std::string fault;
};

alignas(16) unsigned char g_dyn_smem[kSimtMaxSharedBytes];
thread_local Run* g_run = nullptr;
uint64_t g_seed = 0;
uint64_t g_launches = 0;
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

Fiber& self() { return g_run->fibers[g_run->current]; }

// Switch from the running fiber back to the scheduler.
void yield_to_scheduler() { swapcontext(&self().ctx, &g_run->sched); }

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

// Computes the result of one warp operation for every participating lane and releases them.
bool try_release_warp(Run& run, int warp_first, int warp_size) {
    Fiber& lead = run.fibers[warp_first];
    int arrived = 0;
    const Fiber* any = nullptr;
    for (int l = 0; l < warp_size; ++l) {
        const Fiber& f = run.fibers[warp_first + l];
        if (f.state == State::at_warp) {
            arrived++;
            any = &f;
        }
    }
    if (!any) return false;
    unsigned mask = any->mask;
    for (int l = 0; l < warp_size; ++l) {
        const Fiber& f = run.fibers[warp_first + l];
        bool in_mask = (mask >> l) & 1u;
        if (!in_mask) continue;
        if (f.state == State::done) {
            run.fault = "warp " + std::to_string(lead.linear / 32) + ": lane " + std::to_string(l) +
                        " returned while its warp waits for it in a warp operation";
            return false;
        }
        if (f.state != State::at_warp) return false;  // not arrived yet
    }
    // Every lane of the mask has arrived: they must agree on the operation.
    for (int l = 0; l < warp_size; ++l) {
        const Fiber& f = run.fibers[warp_first + l];
        if (!((mask >> l) & 1u)) continue;
        if (f.op != any->op || f.mask != mask || f.width != any->width) {
            run.fault = "warp " + std::to_string(lead.linear / 32) +
                        ": lanes of one mask are at different warp operations (divergent code)";
            return false;
        }
    }
    for (int l = 0; l < warp_size; ++l) {
        Fiber& f = run.fibers[warp_first + l];
        if (!((mask >> l) & 1u)) continue;
        int width = f.width;
        int seg = l & ~(width - 1);
        int src = l;
        switch (f.op) {
            case WarpOp::shfl_idx: src = seg + (f.arg & (width - 1)); break;
            case WarpOp::shfl_xor: src = l ^ f.arg; if (src >= seg + width || src < seg) src = l; break;
            case WarpOp::shfl_down: src = (l - seg + f.arg < width) ? l + f.arg : l; break;
            case WarpOp::shfl_up: src = (l - seg - f.arg >= 0) ? l - f.arg : l; break;
            default: break;
        }
        switch (f.op) {
            case WarpOp::shfl_idx:
            case WarpOp::shfl_xor:
            case WarpOp::shfl_down:
            case WarpOp::shfl_up:
                if (src >= warp_size || !((mask >> src) & 1u)) {
                    run.fault = "warp " + std::to_string(lead.linear / 32) + ": lane " +
                                std::to_string(l) + " shuffles from lane " + std::to_string(src) +
                                " which is not in the mask";
                    return false;
                }
                f.result = run.fibers[warp_first + src].bits;
                break;
            case WarpOp::ballot:
            case WarpOp::any:
            case WarpOp::all: {
                unsigned ballot = 0;
                for (int m = 0; m < warp_size; ++m)
                    if (((mask >> m) & 1u) && run.fibers[warp_first + m].bits) ballot |= 1u << m;
                f.result = f.op == WarpOp::ballot ? ballot
                           : f.op == WarpOp::any  ? (ballot != 0)
                                                  : (ballot == mask);
                break;
            }
            case WarpOp::sync: f.result = 0; break;
        }
    }
    for (int l = 0; l < warp_size; ++l)
        if ((mask >> l) & 1u) run.fibers[warp_first + l].state = State::ready;
    return true;
}

bool try_release_barrier(Run& run) {
    int waiting = 0, done = 0, other = 0;
    const Fiber* first = nullptr;
    for (const Fiber& f : run.fibers) {
        if (f.state == State::at_barrier) {
            waiting++;
            if (!first) first = &f;
        } else if (f.state == State::done) {
            done++;
        } else {
            other++;
        }
    }
    if (waiting == 0 || other > 0) return false;
    std::string site = std::string(first->file) + ":" + std::to_string(first->line);
    if (done > 0) {
        run.fault = "__syncthreads at " + site + " reached after " + std::to_string(done) +
                    " threads of the block returned";
        return false;
    }
    for (const Fiber& f : run.fibers) {
        if (f.line != first->line || std::strcmp(f.file, first->file) != 0) {
            run.fault = "threads of one block wait at different __syncthreads (" + site + " and " +
                        f.file + ":" + std::to_string(f.line) + ")";
            return false;
        }
    }
    for (Fiber& f : run.fibers) f.state = State::ready;
    return true;
}

std::string describe_states(const Run& run) {
    int counts[5] = {0, 0, 0, 0, 0};
    for (const Fiber& f : run.fibers) counts[static_cast<int>(f.state)]++;
    return std::to_string(counts[0]) + " ready, " + std::to_string(counts[1]) +
           " at __syncthreads, " + std::to_string(counts[2]) + " at warp operations, " +
           std::to_string(counts[3]) + " returned";
}

void run_block(Run& run, unsigned nthreads, std::mt19937_64& rng) {
    char* stacks = stack_pool();
    run.fibers.assign(nthreads, Fiber{});
    for (unsigned t = 0; t < nthreads; ++t) {
        Fiber& f = run.fibers[t];
        f.linear = static_cast<int>(t);
        f.idx.x = t % blockDim.x;
        f.idx.y = (t / blockDim.x) % blockDim.y;
        f.idx.z = t / (blockDim.x * blockDim.y);
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = stacks + static_cast<size_t>(t) * kStackBytes;
        f.ctx.uc_stack.ss_size = kStackBytes;
        f.ctx.uc_link = nullptr;
        makecontext(&f.ctx, fiber_entry, 0);
    }
    std::vector<int> order(nthreads);
    for (unsigned t = 0; t < nthreads; ++t) order[t] = static_cast<int>(t);
    int warps = static_cast<int>((nthreads + 31) / 32);
    for (;;) {
        if (g_seed != 0) std::shuffle(order.begin(), order.end(), rng);
        bool ran = false;
        for (int t : order) {
            if (run.fibers[t].state != State::ready) continue;
            ran = true;
            run.current = t;
            threadIdx = run.fibers[t].idx;
            swapcontext(&run.sched, &run.fibers[t].ctx);
            run.current = -1;
            if (!run.fault.empty()) throw Error(run.fault);
        }
        bool released = false;
        for (int w = 0; w < warps; ++w) {
            int first = w * 32;
            int size = std::min<int>(32, static_cast<int>(nthreads) - first);
            while (try_release_warp(run, first, size)) released = true;
            if (!run.fault.empty()) throw Error(run.fault);
        }
        if (try_release_barrier(run)) released = true;
        if (!run.fault.empty()) throw Error(run.fault);
        bool all_done = std::all_of(run.fibers.begin(), run.fibers.end(),
                                    [](const Fiber& f) { return f.state == State::done; });
        if (all_done) return;
        if (!ran && !released) throw Error("deadlock: " + describe_states(run));
    }
}

}  // namespace

unsigned char* dynamic_shared() { return g_dyn_smem; }
void set_seed(uint64_t seed) { g_seed = seed; }
uint64_t seed() { return g_seed; }
const std::set<std::string>& launched_kernels() { return g_launched; }

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
    if (width < 1 || width > 32 || (width & (width - 1)) != 0) fault("shuffle width not a power of 2 <= 32");
    f.op = op;
    f.mask = mask;
    f.bits = bits;
    f.arg = arg;
    f.width = width;
    f.state = State::at_warp;
    yield_to_scheduler();
    return f.result;
}

void run_grid(const char* name, dim3 grid, dim3 block, size_t shmem,
              const std::function<void()>& body) {
    std::string kname = strip_template(name);
    uint64_t nthreads = uint64_t(block.x) * block.y * block.z;
    auto bad = [&](const std::string& why) { throw Error("launch of " + kname + ": " + why); };
    if (nthreads == 0 || nthreads > kMaxThreads) bad("block of " + std::to_string(nthreads) + " threads (1..1024)");
    if (block.x > 1024 || block.y > 1024 || block.z > 64) bad("block dimension over the CUDA limit");
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) bad("empty grid");
    if (grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) bad("grid dimension over the CUDA limit");
    if (shmem > kSimtMaxSharedBytes) bad("dynamic shared memory " + std::to_string(shmem) + " bytes > 48 KiB");
    if (g_run) bad("nested launch");
    g_launched.insert(kname);
    g_launches++;

    std::vector<uint3> blocks;
    for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x) blocks.push_back(uint3{x, y, z});
    std::mt19937_64 rng(g_seed * 0x9E3779B97F4A7C15ull + g_launches);
    if (g_seed != 0) std::shuffle(blocks.begin(), blocks.end(), rng);

    Run run;
    run.body = &body;
    g_run = &run;
    gridDim = grid;
    blockDim = block;
    try {
        for (const uint3& b : blocks) {
            blockIdx = b;
            std::memset(g_dyn_smem, 0xff, shmem);  // NaN / -1 until written
            run_block(run, static_cast<unsigned>(nthreads), rng);
        }
    } catch (...) {
        g_run = nullptr;
        throw;
    }
    g_run = nullptr;
}

}  // namespace simt

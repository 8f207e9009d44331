// The process-wide stop request behind moetrain/stop.h.
#include "moetrain/stop.h"

#include <atomic>

namespace moetrain {
namespace {

std::atomic<int> g_stop{0};
static_assert(std::atomic<int>::is_always_lock_free, "signal handlers need a lock-free flag");

}  // namespace

int request_stop(int code) noexcept {
    return g_stop.exchange(code);
}

int stop_requested() noexcept {
    return g_stop.load();
}

void clear_stop() noexcept {
    g_stop.store(0);
}

void check_stop(const std::string& what) {
    if (const int code = g_stop.load(); code != 0) throw Stopped(code, "during " + what);
}

}  // namespace moetrain

// Async-signal-safe stop flag: the handler only stores the signal number, or on a second
// signal writes one fixed line and calls _exit.
#include "stop_signals.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <vector>

namespace moetrain::cli {
namespace {

std::atomic<int> g_stop{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free flag");

void on_stop_signal(int sig) {
    if (g_stop.exchange(sig) != 0) {
        static const char msg[] =
            "moetrain: error: stopped at once by a second signal; the checkpoints written "
            "before are intact\n";
        ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)ignored;
        ::_exit(128 + sig);
    }
}

}  // namespace

void install_stop_handlers() {
    // The handler runs on its own stack: hand-written and JIT-compiled compute kernels may
    // keep data below the stack pointer beyond the ABI's red zone, which a handler frame on
    // the interrupted stack would overwrite.
    static std::vector<char> alt_stack(std::max<size_t>(SIGSTKSZ, 64 * 1024));
    stack_t ss{};
    ss.ss_sp = alt_stack.data();
    ss.ss_size = alt_stack.size();
    sigaltstack(&ss, nullptr);
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_ONSTACK;  // interrupted reads / writes continue
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
}

int stop_signal() {
    return g_stop.load();
}

const char* stop_signal_name(int sig) {
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "signal";
}

}  // namespace moetrain::cli

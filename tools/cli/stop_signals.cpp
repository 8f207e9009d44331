// Async-signal-safe handlers: in the at-once mode they write one fixed line and call _exit;
// in the cooperative mode the first signal only records the stop request and a second one
// writes its line and calls _exit.
#include "stop_signals.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <vector>

#include "moetrain/stop.h"

namespace moetrain::cli {
namespace {

std::atomic<bool> g_cooperative{false};
std::atomic<const char*> g_second_note{nullptr};
static_assert(std::atomic<const char*>::is_always_lock_free, "the handler reads it");

constexpr const char* kSecondNote =
    "moetrain: error: stopped at once by a second signal; finished outputs are intact, and a "
    "partial *.tmp-<pid> directory is removed by the next run\n";

void write_line(const char* s) {
    ssize_t ignored = ::write(STDERR_FILENO, s, std::strlen(s));
    (void)ignored;
}

void on_stop_signal(int sig) {
    if (!g_cooperative.load()) {
        write_line(sig == SIGINT ? "moetrain: stopped by SIGINT; no output was in progress\n"
                                 : "moetrain: stopped by SIGTERM; no output was in progress\n");
        ::_exit(128 + sig);
    }
    if (request_stop(sig) != 0) {
        const char* note = g_second_note.load();
        write_line(note ? note : kSecondNote);
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

void stop_cooperatively(const char* second_note) {
    g_second_note.store(second_note);
    g_cooperative.store(true);
}

int stop_signal() {
    return stop_requested();
}

const char* stop_signal_name(int sig) {
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "signal";
}

int exit_status_after(const char* command) {
    const int sig = stop_signal();
    if (sig == 0) return 0;
    std::fflush(stdout);
    std::fprintf(stderr, "moetrain: stopped by %s as %s had finished; its output is complete\n",
                 stop_signal_name(sig), command);
    return 128 + sig;
}

}  // namespace moetrain::cli

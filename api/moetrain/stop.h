// Cooperative stop of long operations (docs/RELIABILITY.md, "Stops and interruptions").
// Someone, usually a SIGINT / SIGTERM handler, calls request_stop(code); every loop over
// bounded units of work (an evaluation batch, a tensor of an export or import, a piece of
// text, a thousand BPE merges, a generated token) calls check_stop(), which then throws
// Stopped. Stopped unwinds like any Error, so whatever owns a temporary file or directory
// removes it on the way out and nothing half-written is left under a final name.
#pragma once

#include <string>

#include "moetrain/error.h"

namespace moetrain {

// Thrown by check_stop(); code() is the code given to request_stop (a signal number).
class Stopped : public Error {
  public:
    Stopped(int code, const std::string& what) : Error(what), code_(code) {}
    int code() const { return code_; }

  private:
    int code_;
};

// Records a stop request with `code` > 0 and returns the code recorded before (0: none).
// Async-signal-safe (one lock-free atomic exchange).
int request_stop(int code) noexcept;
// 0 while no stop was requested, else the code of the latest request.
int stop_requested() noexcept;
// Forget a request (a test, or an embedding program that handled the stop).
void clear_stop() noexcept;
// Throws Stopped(code, "during " + what) when a stop was requested.
void check_stop(const std::string& what);

}  // namespace moetrain

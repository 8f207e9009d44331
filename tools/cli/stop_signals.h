// SIGINT / SIGTERM in the CLI (docs/RELIABILITY.md, "Stops and interruptions").
// main() installs the handlers for every command. Until a command calls stop_cooperatively(),
// a signal ends the process at once with one line and exit status 128 + signal: such a
// command has written nothing yet. After it, the first signal only records a stop request
// (moetrain/stop.h) that the command's loops act on within one bounded unit of work: they
// throw moetrain::Stopped, temporaries are removed on the way out, and main() prints one line
// "moetrain: stopped by SIGINT during ...; <what is left>" and exits 130 / 143. `train`
// instead finishes the step, saves it and exits with the same status. A second signal exits
// at once with one line.
#pragma once

namespace moetrain::cli {

// Installs the handlers (for the rest of the process), in the at-once mode.
void install_stop_handlers();
// From here on the first signal is a stop request. `second_note` (a string literal) is the
// line a second signal prints before it exits at once; nullptr: a generic line.
void stop_cooperatively(const char* second_note = nullptr);
// 0 when no stop was asked for, else the signal number (SIGINT or SIGTERM).
int stop_signal();
// "SIGINT" / "SIGTERM".
const char* stop_signal_name(int sig);
// A command that completed with a stop request pending: prints that its output is complete
// and returns 128 + signal; 0 when no stop was asked for.
int exit_status_after(const char* command);

}  // namespace moetrain::cli

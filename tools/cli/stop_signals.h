// Graceful stop of a training run: the first SIGINT or SIGTERM asks the loop to stop after
// the step in progress (it then writes a checkpoint and exits 130 / 143); a second one
// exits at once with the same status. Checkpoints are written atomically, so an immediate
// exit loses no earlier checkpoint (a partial temporary directory is removed by the next
// save into the same run directory).
#pragma once

namespace moetrain::cli {

// Installs the handlers (for the rest of the process).
void install_stop_handlers();
// 0 when no stop was asked for, else the signal number (SIGINT or SIGTERM).
int stop_signal();
// "SIGINT" / "SIGTERM".
const char* stop_signal_name(int sig);

}  // namespace moetrain::cli

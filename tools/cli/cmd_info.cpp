// `moetrain info`: every backend and device, available or not, with the reason.
#include <cstdio>

#include "commands.h"
#include "common.h"

namespace moetrain::cli {

void add_info_command(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("info", "list backends and devices (available or not, and why)");
    on_run(cmd, exit_code, [] {
        for (const auto& b : list_backends()) {
            bool usable = b.loaded && b.reason.empty();
            std::printf("%-7s %s\n", b.name.c_str(),
                        usable ? "available" : ("unavailable: " + b.reason).c_str());
            for (const auto& d : b.devices) {
                std::printf("  %-10s %s", d.id.c_str(), d.name.c_str());
                if (d.memory_bytes)
                    std::printf(", %.1f GiB", static_cast<double>(d.memory_bytes) / (1 << 30));
                if (!d.details.empty()) std::printf(", %s", d.details.c_str());
                if (!d.available) std::printf(" [unavailable: %s]", d.reason.c_str());
                std::printf("\n");
            }
        }
    });
}

}  // namespace moetrain::cli

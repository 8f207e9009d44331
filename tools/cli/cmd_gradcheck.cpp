// `moetrain gradcheck`: compare the analytic gradients of a model on a device with central
// finite differences, per parameter tensor; exit 1 when any tensor is beyond tolerance.
#include <cstdio>

#include "commands.h"
#include "common.h"
#include "number_options.h"
#include "moetrain/gradcheck.h"

namespace moetrain::cli {
namespace {

struct GradcheckArgs {
    ModelChoice model;
    DeviceChoice dev;
    GradcheckOptions opts;
};

int run_gradcheck(const GradcheckArgs& a) {
    ModelConfig cfg = a.model.resolve();
    auto device = a.dev.open();
    Model model(*device, cfg);
    model.init_weights(a.opts.seed);
    GradcheckResult r = gradcheck(model, a.opts);
    for (const auto& e : r.tensors)
        std::printf("%-44s rel err %.2e %s\n", e.name.c_str(), e.rel_error, e.pass ? "ok" : "FAIL");
    std::printf("gradcheck %s: max rel err %.2e (tolerance %.1e) on %s\n",
                r.pass ? "passed" : "FAILED", r.max_rel_error, r.tolerance, device->name().c_str());
    return r.pass ? 0 : 1;
}

}  // namespace

void add_gradcheck_command(CLI::App& app, int& exit_code) {
    const auto [a, cmd] =
        add_command<GradcheckArgs>(app, "gradcheck", "finite-difference check of every gradient");
    a->model.add_options(cmd);
    a->dev.add_options(cmd);
    add_int_option(cmd, "--batch", a->opts.batch, "batch size", 1)->capture_default_str();
    add_int_option(cmd, "--seq", a->opts.seq_len, "sequence length", 1)->capture_default_str();
    add_int_option(cmd, "--seed", a->opts.seed, "init and data seed", uint64_t{0})
        ->capture_default_str();
    cmd->callback([a, &exit_code] { exit_code = run_gradcheck(*a); });
}

}  // namespace moetrain::cli

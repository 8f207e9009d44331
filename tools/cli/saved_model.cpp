#include "saved_model.h"

#include "moetrain/checkpoint.h"
#include "moetrain/memory_plan.h"
#include "run_guards.h"

namespace moetrain::cli {

void add_saved_model_options(CLI::App* cmd, SavedModelArgs& a) {
    add_precision_option(cmd, a.precision);
    add_attention16_option(cmd, a.attention16);
    add_checkpoint_option(cmd, a.checkpoint);
}

void check_forward_fits(const SavedModelArgs& a, const ModelConfig& c, int batch, int seq,
                        double extra_bytes, const std::string& what) {
    PlanOptions o;
    o.batch = batch;
    o.seq = seq;
    o.precision = parse_precision(a.precision);
    o.optimizer = OptimizerKind::sgd;
    const MemoryPlan p = plan_training_memory(c, o);
    check_memory_fits(p.total() - p.grads - p.optimizer + extra_bytes,
                      memory_available(a.dev.device, 0), what, a.dev.device);
}

LoadedModel load_saved_model(const SavedModelArgs& a, const std::string& dir,
                             const ModelConfig& c) {
    LoadedModel m;
    m.device = a.dev.open();
    m.model = std::make_unique<Model>(*m.device, c);
    m.model->set_precision(parse_precision(a.precision));
    m.model->set_attention16(a.attention16);
    load_weights(dir, *m.model);
    return m;
}

}  // namespace moetrain::cli

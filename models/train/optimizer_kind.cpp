// Names of the optimizer kinds (api/moetrain/train.h), shared by the CLI and state.json.
#include "moetrain/error.h"
#include "moetrain/train.h"

namespace moetrain {

const char* optimizer_name(OptimizerKind k) {
    switch (k) {
        case OptimizerKind::adamw:
            return "adamw";
        case OptimizerKind::sgd:
            return "sgd";
        case OptimizerKind::adamw8bit:
            return "adamw8bit";
    }
    fail("unknown OptimizerKind ", static_cast<int>(k));
}

OptimizerKind parse_optimizer(const std::string& name) {
    for (OptimizerKind k : {OptimizerKind::adamw, OptimizerKind::adamw8bit, OptimizerKind::sgd})
        if (name == optimizer_name(k)) return k;
    fail("unknown optimizer '", name, "' (adamw, adamw8bit, sgd)");
}

}  // namespace moetrain

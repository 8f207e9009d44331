// Names of the optimizer kinds (api/moetrain/train.h), shared by the CLI and state.json.
#include "moetrain/enum_names.h"
#include "moetrain/error.h"
#include "moetrain/train.h"

namespace moetrain {

namespace {
constexpr EnumName<OptimizerKind> kOptimizerNames[] = {{OptimizerKind::adamw, "adamw"},
                                                       {OptimizerKind::adamw8bit, "adamw8bit"},
                                                       {OptimizerKind::sgd, "sgd"}};
}  // namespace

const char* optimizer_name(OptimizerKind k) {
    const char* name = enum_name(kOptimizerNames, k, nullptr);
    if (!name) fail("unknown OptimizerKind ", static_cast<int>(k));
    return name;
}

OptimizerKind parse_optimizer(const std::string& name) {
    if (auto k = enum_value(kOptimizerNames, name)) return *k;
    fail("unknown optimizer '", name, "' (", enum_name_list(kOptimizerNames), ")");
}

}  // namespace moetrain

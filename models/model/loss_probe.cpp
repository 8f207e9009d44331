// LossProbe: gradcheck's view of ModelImpl (loss_probe.h).
#include "model/loss_probe.h"

#include "model/model_access.h"
#include "model/model_impl.h"

namespace moetrain {

LossProbe::LossProbe(Model& model) : im_(ModelAccess::impl(model)) {}

LossStats LossProbe::loss_f64(const int32_t* x, const int32_t* y, int B, int T,
                              std::vector<int32_t>* routing) {
    im_.passes.record_routing = routing;
    try {
        const LossStats s = im_.passes.loss_f64(x, y, B, T);
        im_.passes.record_routing = nullptr;
        return s;
    } catch (...) {
        im_.passes.record_routing = nullptr;
        throw;
    }
}

}  // namespace moetrain

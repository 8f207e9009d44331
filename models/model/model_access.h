// The library-internal path from a moetrain::Model to its ModelImpl. The public header
// api/moetrain/model.h only names ModelAccess as a friend, so code built against the public API
// cannot reach the implementation. Inside the library, the Trainer, generation and gradcheck go
// through the narrow views built on this (train_passes.h, decode_passes.h, loss_probe.h); the
// memory planner and the tests, which inspect workspaces, use impl() itself.
#pragma once

#include "moetrain/model.h"

namespace moetrain {

class ModelAccess {
  public:
    static ModelImpl& impl(Model& m) { return *m.impl_; }
};

}  // namespace moetrain

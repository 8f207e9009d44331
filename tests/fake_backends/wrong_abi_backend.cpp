// Test-only backend module built for another ABI: the registry must list it as unavailable
// and refuse to open it.
#include "moetrain/backend.h"

extern "C" moetrain::Backend* moetrain_backend_entry(int abi) {
    (void)abi;
    return nullptr;  // as a module of a different MOETRAIN_BACKEND_ABI would
}

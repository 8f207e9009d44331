// Test-only backend module that cannot be loaded: it needs a symbol no library provides, so
// dlopen(RTLD_NOW) fails and the registry must report the loader's message.
#include "moetrain/backend.h"

extern "C" void moetrain_symbol_that_does_not_exist();

extern "C" moetrain::Backend* moetrain_backend_entry(int abi) {
    moetrain_symbol_that_does_not_exist();
    (void)abi;
    return nullptr;
}

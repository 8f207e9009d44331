// The built-in cpu backend is one process-lifetime object (cpu/cpu_backend.h): the registry
// keeps the pointer and never deletes it, so it must stay reachable from static storage, which
// is what keeps LeakSanitizer (the sanitizer job of tools/test.sh) from reporting it at exit.
// Every call returns that same object; a fresh `new` per call would leak each time.
#include <doctest/doctest.h>

#include "cpu/cpu_backend.h"

TEST_CASE("registry: the cpu backend is one process-lifetime object") {
    moetrain::Backend* const first = moetrain::create_cpu_backend();
    REQUIRE(first != nullptr);
    CHECK(moetrain::create_cpu_backend() == first);
}

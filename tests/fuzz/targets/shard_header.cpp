// llm.c shard headers against the sizes a file could have.
#include "fuzz_input.h"
#include "moetrain/shards.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    for (uint64_t file_size : {uint64_t{size}, uint64_t{1024}, uint64_t{1024 + 2 * 5}})
        moetrain::fuzz::expect_only_errors(
            [&] { (void)moetrain::parse_shard_header(bytes, file_size, "fuzz.bin"); });
    return 0;
}

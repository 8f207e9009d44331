// `moetrain tokenizer bench`: encoding throughput of a tokenizer on a file, in memory.
#pragma once

#include <CLI/CLI.hpp>

namespace moetrain::cli {

void add_tokenizer_bench(CLI::App* parent);

}  // namespace moetrain::cli

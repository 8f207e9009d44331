// `moetrain tokenizer bench --tokenizer SPEC FILE [--threads N] [--piece-bytes N] [--repeat R]`:
// reads FILE into memory, then times encoding it, cut into pieces as `tokenize` cuts it
// (text_pieces.h), on N threads; prints one JSON line with the best of R runs (wall and CPU
// seconds) and the SHA-256
// of the ids (uint32 little-endian), so that bench/tokenizer_throughput.py can check that
// moetrain, tiktoken and HF tokenizers produced the same tokens.
#include "cmd_tokenizer_bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "moetrain/error.h"
#include "moetrain/tokenizer.h"
#include "number_options.h"
#include "ordered_parallel.h"
#include "text_pieces.h"
#include "tokenizer_choice.h"

namespace moetrain::cli {
namespace {

// CPU time of the process, all threads (on a loaded machine, a measure of the work done that
// wall time is not).
double cpu_seconds() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

struct BenchArgs {
    TokenizerChoice tokenizer;
    std::string file;
    int threads = 1, repeat = 1;
    int64_t piece_bytes = 4 << 20;
};

void run_bench(const BenchArgs& a) {
    auto tok = a.tokenizer.load();
    const std::vector<TextPiece> pieces = plan_text_pieces({a.file}, tok->encodes_line_cuts_apart(),
                                                           static_cast<uint64_t>(a.piece_bytes));
    std::vector<std::string> texts;
    int64_t bytes = 0;
    for (const TextPiece& p : pieces) {
        texts.push_back(read_text_piece(a.file, p));
        bytes += static_cast<int64_t>(texts.back().size());
    }
    MT_CHECK(bytes > 0, "input file ", a.file, ": empty");
    std::vector<std::vector<int32_t>> ids(texts.size());
    double best = 1e300, best_cpu = 0;
    for (int r = 0; r < a.repeat; ++r) {
        const double cpu0 = cpu_seconds();
        const auto t0 = std::chrono::steady_clock::now();
        ordered_parallel<std::vector<int32_t>>(
            texts.size(), a.threads, 4 * static_cast<size_t>(a.threads),
            [&](size_t i) { return tok->encode(texts[i]); },
            [&](size_t i, std::vector<int32_t>&& v) { ids[i] = std::move(v); });
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (s < best) best = s, best_cpu = cpu_seconds() - cpu0;
    }
    std::string le;
    int64_t tokens = 0;
    for (const auto& v : ids) {
        for (int32_t id : v) {
            const auto u = static_cast<uint32_t>(id);
            const char b[4] = {static_cast<char>(u), static_cast<char>(u >> 8),
                               static_cast<char>(u >> 16), static_cast<char>(u >> 24)};
            le.append(b, 4);
        }
        tokens += static_cast<int64_t>(v.size());
    }
    nlohmann::ordered_json j = {
        {"tokenizer", tok->kind()},
        {"threads", a.threads},
        {"pieces", pieces.size()},
        {"bytes", bytes},
        {"tokens", tokens},
        {"seconds", best},
        {"mb_per_s", bytes / 1e6 / best},
        {"cpu_seconds", best_cpu},
        {"ids_sha256", tokenizer_file_sha256(le)}};  // plain SHA-256 of the bytes
    std::printf("%s\n", j.dump().c_str());
}

}  // namespace

void add_tokenizer_bench(CLI::App* parent) {
    auto a = std::make_shared<BenchArgs>();
    auto* cmd = parent->add_subcommand(
        "bench", "time encoding a file in memory; print MB/s and the SHA-256 of the ids as JSON");
    a->tokenizer.add_options(cmd);
    cmd->add_option("file", a->file, "text file")->required();
    add_int_option(cmd, "--threads", a->threads, "pieces encoded at once", 1, 1024)
        ->capture_default_str()
        ->check(thread_count_check());
    add_int_option(cmd, "--piece-bytes", a->piece_bytes,
                   "bytes of text per parallel piece (cut at line boundaries)", int64_t{1})
        ->capture_default_str();
    add_int_option(cmd, "--repeat", a->repeat, "runs; the fastest is reported", 1, 1000)
        ->capture_default_str();
    cmd->callback([a] { run_bench(*a); });
}

}  // namespace moetrain::cli

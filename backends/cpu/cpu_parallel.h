// Deterministic parallel loop helpers for the CPU ops. Work is cut into pieces whose bounds do
// not depend on the thread count, and partial sums are combined in a fixed order, so every
// result is bit-identical for any number of OpenMP threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace moetrain::cpu {

// Elements of work below which a loop runs on the calling thread: waking the OpenMP team
// costs more than it saves, and idle workers spin.
constexpr int64_t kParallelMin = 16384;
// Width of the column blocks of column-wise reductions (dbias, norm gains).
constexpr int64_t kColBlock = 64;
// Length of the chunks of whole-vector reductions (sum, sum_squares).
constexpr int64_t kSumChunk = 8192;
// Rows per chunk of the row passes that also sum over rows (norm backward).
constexpr int64_t kRowChunk = 64;

inline int64_t row_chunks(int64_t rows) {
    return (rows + kRowChunk - 1) / kRowChunk;
}

// A row pass that also produces `width` column sums in one sweep over the data: rows are cut
// into fixed chunks of kRowChunk; body(r0, r1, acc) handles rows [r0, r1) and adds their
// per-column values into acc[0, width) (zeroed doubles of that chunk, in `partials`, which
// holds chunks * width doubles). out(c, total) then gets each column's total over the chunks
// in chunk order: deterministic for any thread count.
template <typename Body, typename Out>
void rows_with_column_sums(int64_t rows, int64_t width, double* partials, Body&& body, Out&& out) {
    const int64_t chunks = row_chunks(rows);
#pragma omp parallel if (rows * width > kParallelMin)
    {
#pragma omp for schedule(static)
        for (int64_t ch = 0; ch < chunks; ++ch) {
            double* acc = partials + ch * width;
            std::fill(acc, acc + width, 0.0);
            body(ch * kRowChunk, std::min(rows, (ch + 1) * kRowChunk), acc);
        }
#pragma omp for schedule(static)
        for (int64_t c = 0; c < width; ++c) {
            double total = 0;
            for (int64_t ch = 0; ch < chunks; ++ch) total += partials[ch * width + c];
            out(c, total);
        }
    }
}

// body(c0, c1) for the column blocks [c0, c1) of a rows x cols matrix, in parallel (each block
// owned by one thread, so per-column sums over rows keep their row order).
template <typename F>
void for_column_blocks(int64_t rows, int64_t cols, F&& body) {
    const int64_t blocks = (cols + kColBlock - 1) / kColBlock;
#pragma omp parallel for schedule(static) if (blocks > 1 && rows * cols > kParallelMin)
    for (int64_t blk = 0; blk < blocks; ++blk)
        body(blk * kColBlock, std::min(cols, (blk + 1) * kColBlock));
}

// db[c] += the sum over the rows of value(r * cols + c) for c < cols (a bias gradient: the
// column sums of a rows x cols matrix), in double, row by row within each column block.
template <typename Value>
void add_column_sums(float* db, int64_t rows, int64_t cols, Value&& value) {
    for_column_blocks(rows, cols, [&](int64_t c0, int64_t c1) {
        double acc[kColBlock] = {};
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = c0; c < c1; ++c) acc[c - c0] += value(r * cols + c);
        for (int64_t c = c0; c < c1; ++c) db[c] += static_cast<float>(acc[c - c0]);
    });
}

// Sum over i < n of the double partials part(i0, i1) of fixed chunks, added in chunk order.
template <typename F>
double chunked_sum(int64_t n, F&& part) {
    const int64_t chunks = (n + kSumChunk - 1) / kSumChunk;
    std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c)
        partial[c] = part(c * kSumChunk, std::min(n, (c + 1) * kSumChunk));
    double s = 0;
    for (double p : partial) s += p;
    return s;
}

}  // namespace moetrain::cpu

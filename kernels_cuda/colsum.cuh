// Deterministic column sums over rows, out_k[c] += sum_r term_k(r, c) for K outputs read in one
// pass (the bias gradient: K = 1; LayerNorm's gain and bias gradients: K = 2).
//
// A block of 8 warps covers 32 column items of a chunk of rows: an item is 4 adjacent columns,
// read with one vector access, when every stream allows it for every row (cols % 4 == 0 and the
// pointers aligned to four elements: 16 bytes, 8 for a 16-bit dy), else one column. Warp w sums
// rows w, w + 8, ... of the chunk in row order (four rows' loads issued before their adds), then
// warp 0 adds the other warps' sums in warp order. Stage 1 writes one partial per (chunk, column)
// to scratch; stage 2 is the same kernel over the [chunks, cols] partials as a single chunk, adding
// to out. With one chunk stage 1 adds to out itself. The order of every column's sum depends on
// rows and cols only (launch.h chunks them counting 4 columns per item on either path), so both
// access paths and every placement give the same bits. The per-element term is a functor so each op
// sums exactly its own product.
#pragma once

#include "common.cuh"
#include "vector_access.cuh"

namespace mtk {

// The K terms (or sums) of W adjacent columns.
template <int K, int W>
struct ColLanes {
    Lanes<float, W> v[K];
};

// Where the K sums go: p[k] + chunk * cols + c.
template <int K>
struct ColsumOut {
    float* p[K];
};

template <int K, int W>
__device__ __forceinline__ void add_lanes(ColLanes<K, W>& acc, const ColLanes<K, W>& t) {
    for (int k = 0; k < K; ++k)
        for (int u = 0; u < W; ++u) acc.v[k][u] = acc.v[k][u] + t.v[k][u];
}

template <typename Term, int W>
__device__ __forceinline__ void colsum_tile(Width<W> w, const Term& term, int64_t rows,
                                            int64_t cols, int64_t rows_per_chunk,
                                            ColsumOut<Term::kOutputs> out, bool accumulate) {
    constexpr int K = Term::kOutputs;
    constexpr int64_t S = kColsumWarps;  // row stride of a warp
    const int64_t c = (static_cast<int64_t>(blockIdx.x) * kWarp + lane_id()) * W;
    const bool active = c < cols;  // W == 4 only when cols % 4 == 0: items never cross the end
    const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
    const int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
    ColLanes<K, W> acc{};
    if (active) {
        int64_t r = r0 + warp_id();
        for (; r + 3 * S < r1; r += 4 * S) {
            const ColLanes<K, W> t0 = term(w, r, c), t1 = term(w, r + S, c),
                                 t2 = term(w, r + 2 * S, c), t3 = term(w, r + 3 * S, c);
            add_lanes(acc, t0);
            add_lanes(acc, t1);
            add_lanes(acc, t2);
            add_lanes(acc, t3);
        }
        for (; r < r1; r += S) add_lanes(acc, term(w, r, c));
    }
    // Warps 1..7 hand their sums to warp 0 (lane-major per lane slot: no bank conflicts).
    __shared__ float share[kColsumWarps - 1][K][4 * kWarp];
    if (warp_id() > 0 && active)
        for (int k = 0; k < K; ++k)
            for (int u = 0; u < W; ++u)
                share[warp_id() - 1][k][u * kWarp + lane_id()] = acc.v[k][u];
    __syncthreads();
    if (warp_id() != 0 || !active) return;
    for (int j = 0; j < kColsumWarps - 1; ++j)
        for (int k = 0; k < K; ++k)
            for (int u = 0; u < W; ++u)
                acc.v[k][u] = acc.v[k][u] + share[j][k][u * kWarp + lane_id()];
    for (int k = 0; k < K; ++k) {
        float* d = out.p[k] + static_cast<int64_t>(blockIdx.y) * cols + c;
        Lanes<float, W> v = acc.v[k];
        if (accumulate) {
            const auto old = load_lanes(w, d);
            for (int u = 0; u < W; ++u) v[u] = old[u] + v[u];
        }
        store_lanes(w, d, v);
    }
}

// One launch of either stage; vec (uniform) picks the 16-byte path.
template <typename Term>
__global__ void colsum_kernel(Term term, int64_t rows, int64_t cols, int64_t rows_per_chunk,
                              ColsumOut<Term::kOutputs> out, bool accumulate, bool vec) {
    if (vec)
        colsum_tile(Width<4>{}, term, rows, cols, rows_per_chunk, out, accumulate);
    else
        colsum_tile(Width<1>{}, term, rows, cols, rows_per_chunk, out, accumulate);
}

// term = m[r, c]
struct MatrixTerm {
    static constexpr int kOutputs = 1;
    const void* m;  // of dtype kind (FloatKind), widened exactly
    int kind;
    int64_t cols;
    template <int W>
    __device__ ColLanes<1, W> operator()(Width<W> w, int64_t r, int64_t c) const {
        return {{load_as_f32(w, m, kind, r * cols + c)}};
    }
    bool vectorisable() const { return rows_vectorisable(cols, VecPtr{m, kind_bytes(kind)}); }
};

// Stage 2: the K outputs' partials, [K][chunks][cols] (a "row" is a chunk).
template <int K>
struct PartialsTerm {
    static constexpr int kOutputs = K;
    const float* p;
    int64_t chunks, cols;
    template <int W>
    __device__ ColLanes<K, W> operator()(Width<W> w, int64_t r, int64_t c) const {
        ColLanes<K, W> t;
        for (int k = 0; k < K; ++k) t.v[k] = load_lanes(w, p + (k * chunks + r) * cols + c);
        return t;
    }
    bool vectorisable() const { return rows_vectorisable(cols, p); }
};

template <int K>
bool outputs_vectorisable(int64_t cols, const ColsumOut<K>& out) {
    bool all = true;
    for (int k = 0; k < K; ++k) all = all && rows_vectorisable(cols, out.p[k]);
    return all;
}

// out.p[k][c] += sum_r term_k(r, c); scratch holds colsum_scratch_bytes(rows, cols, K).
template <typename Term>
void colsum(Stream s, Term term, int64_t rows, int64_t cols, ColsumOut<Term::kOutputs> out,
            float* scratch) {
    constexpr int K = Term::kOutputs;
    if (rows <= 0 || cols <= 0) return;
    const int64_t per_chunk = colsum_rows_per_chunk(rows, cols);
    const int64_t chunks = ceil_div(rows, per_chunk);
    if (chunks == 1) {
        const bool vec = term.vectorisable() && outputs_vectorisable(cols, out);
        MT_LAUNCH(colsum_kernel<Term>, colsum_pass(vec ? cols / 4 : cols, 1), s, term, rows, cols,
                  per_chunk, out, true, vec);
        return;
    }
    ColsumOut<K> part;
    for (int k = 0; k < K; ++k) part.p[k] = scratch + k * chunks * cols;
    const bool vec1 = term.vectorisable() && rows_vectorisable(cols, scratch);
    MT_LAUNCH(colsum_kernel<Term>, colsum_pass(vec1 ? cols / 4 : cols, chunks), s, term, rows, cols,
              per_chunk, part, false, vec1);
    const PartialsTerm<K> partials{scratch, chunks, cols};
    const bool vec2 = partials.vectorisable() && outputs_vectorisable(cols, out);
    MT_LAUNCH(colsum_kernel<PartialsTerm<K>>, colsum_pass(vec2 ? cols / 4 : cols, 1), s, partials,
              chunks, cols, chunks, out, true, vec2);
}

}  // namespace mtk

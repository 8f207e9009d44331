// The one place that chooses launch geometry (grid, block, dynamic shared memory) and scratch
// sizes for every kernel in kernels_cuda/. Plain C++ (no CUDA headers): the launchers in the
// .cuh files call it both when nvcc builds them for the backend and when the SIMT harness
// (tests/simt) runs them on the CPU, so the harness tests the geometries the GPU will see.
// Every geometry is a function of the problem sizes only (never of the GPU), which keeps the
// reductions deterministic for a given problem.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mtk {

struct Geom {
    unsigned gx = 1, gy = 1, gz = 1;  // grid
    unsigned block = 1;               // threads per block (1-D blocks only)
    size_t shmem = 0;                 // dynamic shared memory bytes
};

constexpr unsigned kWarp = 32;
// Dynamic shared memory a launch may request without an opt-in: 48 KiB (the limit on every
// target, sm_75..sm_90) minus a reserve for the kernels' static __shared__ arrays.
constexpr size_t kMaxDynamicShmem = 44 * 1024;
// More needs an opt-in (mtk::launch does it for any launch above kMaxDynamicShmem): up to 99 KiB
// on every device of compute capability >= 8.0 (sm_86 / sm_89's maximum; sm_80 has 163 KiB, sm_90
// 227 KiB), 64 KiB on sm_75. Launches above the budget are for devices of kOptInShmemMinCc.
constexpr size_t kMaxOptInShmem = 99 * 1024;
constexpr int kOptInShmemMinCc = 80;
// Largest head_dim the attention kernels support (8 values per lane).
constexpr int64_t kMaxHeadDim = 256;
// Largest router top_k (the selected experts live in registers).
constexpr int64_t kMaxTopK = 16;

inline int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}
inline unsigned clamp_blocks(int64_t n, int64_t cap) {
    return static_cast<unsigned>(n < 1 ? 1 : (n > cap ? cap : n));
}
// Smallest power of two >= n, at least lo and at most hi.
inline unsigned pow2_between(int64_t n, unsigned lo, unsigned hi) {
    unsigned p = lo;
    while (p < hi && p < n) p *= 2;
    return p;
}

// ---- element-wise (grid-stride loops) ----
constexpr unsigned kElementwiseBlock = 256;
inline Geom elementwise(int64_t n) {
    return {clamp_blocks(ceil_div(n, kElementwiseBlock), 8192), 1, 1, kElementwiseBlock, 0};
}
// A range cut into `groups` vector groups and `singles` single elements (vector_access.cuh),
// both walked by the same grid-stride threads: one thread per item of the longer walk.
inline Geom elementwise(int64_t groups, int64_t singles) {
    return elementwise(groups > singles ? groups : singles);
}

// ---- 8-bit AdamW: one thread per element of a 256-element quantisation block ----
constexpr unsigned kQuantBlock = 256;
inline Geom quant_blocks(int64_t n) {
    return {clamp_blocks(ceil_div(n, kQuantBlock), 8192), 1, 1, kQuantBlock, 0};
}

// ---- one block per row (norms, softmax, cross-entropy): ~8 elements per thread ----
inline Geom per_row(int64_t rows, int64_t cols) {
    return {clamp_blocks(rows, 2147483647), 1, 1, pow2_between(ceil_div(cols, 8), 32, 1024), 0};
}

// ---- the norms (norm.cuh): one block per row (per_row); the row's `streams` f32 streams (x
// forward; dy and x backward) are kept in dynamic shared memory when they fit, so each is read
// from global memory once (forward: dim <= 11264, backward: dim <= 5632) ----
inline bool norm_row_cached(int64_t dim, int streams) {
    return static_cast<size_t>(dim * streams) * sizeof(float) <= kMaxDynamicShmem;
}
inline Geom norm_rows(int64_t rows, int64_t dim, int streams) {
    Geom g = per_row(rows, dim);
    if (norm_row_cached(dim, streams)) g.shmem = static_cast<size_t>(dim * streams) * sizeof(float);
    return g;
}

// ---- one warp per item (router rows, MoE slots, attention row dots), 4 warps per block ----
constexpr unsigned kWarpsPerBlock = 4;
inline Geom warp_per_item(int64_t items) {
    return {clamp_blocks(ceil_div(items, kWarpsPerBlock), 2147483647), 1, 1, kWarpsPerBlock * kWarp,
            0};
}

// ---- skinny products (gemv.cuh): one warp per output column, 4 warps per block ----
constexpr int64_t kGemvMaxRows = 4;  // rows of A (decode batch) the kernel takes
constexpr int64_t kGemvGroup = 8;    // elements of k a lane takes at a time (16 bytes of bf16)
constexpr int kGemvBatch = 4;        // groups a lane loads before it sums them
constexpr unsigned kGemvWarps = 4;
// Whether a product takes the skinny kernel: one product (batch 1) of m in [1, kGemvMaxRows]
// rows of A, op(A) = A and op(B) = B^T (B stored [n, k]: a linear layer's weight), n, k >= 1.
inline bool gemv_shape(int64_t m, int64_t n, int64_t k, int64_t batch, bool a_transposed,
                       bool b_transposed) {
    return batch == 1 && m >= 1 && m <= kGemvMaxRows && n >= 1 && k >= 1 && !a_transposed &&
           b_transposed;
}
inline Geom gemv_geometry(int64_t n) {
    return {clamp_blocks(ceil_div(n, kGemvWarps), 2147483647), 1, 1, kGemvWarps * kWarp, 0};
}

// ---- column sums over rows (bias / norm gain and bias gradients), deterministic (colsum.cuh) ----
// A block of 8 warps covers 32 column items (4 adjacent columns on the 16-byte path, else 1) of
// a chunk of rows; warp w sums rows w, w + 8, ... of the chunk. Chunks are a power of two >= 32
// rows, the smallest for which the first pass has at most kColsumMaxThreads threads counted
// with 4 columns per item (so the chunking, hence every sum's order, is the same on both
// paths): that is at least 2^18 threads whenever the rows allow (an H100 holds 132 x 2048 =
// 270K), and the partials are at most 2^18 floats per output (~1 MiB) whatever the size. The
// second pass reads them as a [chunks, cols] matrix in one chunk.
constexpr int kColsumWarps = 8;
constexpr unsigned kColsumBlock = kColsumWarps * kWarp;
constexpr int64_t kColsumMinChunk = 32;
constexpr int64_t kColsumMaxThreads = int64_t{1} << 19;
inline int64_t colsum_rows_per_chunk(int64_t rows, int64_t cols) {
    const int64_t per_chunk = ceil_div(cols, 4 * kWarp) * kColsumBlock;
    int64_t r = kColsumMinChunk;
    while (r < rows && ceil_div(rows, r) * per_chunk > kColsumMaxThreads) r *= 2;  // <= 2048 chunks
    return r;
}
inline int64_t colsum_chunks(int64_t rows, int64_t cols) {
    return ceil_div(rows, colsum_rows_per_chunk(rows, cols));
}
// Scratch of a column sum of `outputs` outputs: the partials when there are several chunks.
inline size_t colsum_scratch_bytes(int64_t rows, int64_t cols, int outputs = 1) {
    const int64_t chunks = colsum_chunks(rows, cols);
    return chunks > 1 ? static_cast<size_t>(outputs * chunks * cols) * sizeof(float) : 0;
}
// The norms' backward passes: LayerNorm's gain and bias gradients in one column sum.
inline size_t norm_bwd_scratch_bytes(int64_t rows, int64_t dim) {
    return colsum_scratch_bytes(rows, dim, 2);
}
// items: column groups of 4 (16-byte path) or columns.
inline Geom colsum_pass(int64_t items, int64_t chunks) {
    return {clamp_blocks(ceil_div(items, kWarp), 2147483647), static_cast<unsigned>(chunks), 1,
            kColsumBlock, 0};
}

// ---- full reductions (sum, sum of squares): fixed partial count per n, then one block ----
constexpr unsigned kReduceBlock = 256;
inline unsigned reduce_parts(int64_t n) {
    return clamp_blocks(ceil_div(n, kReduceBlock * 16), 1024);
}
inline size_t reduce_scratch_bytes(int64_t n) {
    return reduce_parts(n) * sizeof(float);
}
inline Geom reduce_partial(int64_t n) {
    return {reduce_parts(n), 1, 1, kReduceBlock, 0};
}
inline Geom reduce_finish() {
    return {1, 1, 1, kReduceBlock, 0};
}
// A whole (small) problem reduced by one block (the expert-bias update; the router aux / z loss's
// last pass).
inline Geom one_block() {
    return {1, 1, 1, kReduceBlock, 0};
}
// The router aux / z loss (router.cuh): blocks of kAuxRows router rows (a power of two times
// more when that would make over 1024 blocks) each write two partial sums, then one block adds
// them in block order. The chunking depends on N only.
constexpr int64_t kAuxRows = 256;
inline int64_t aux_rows_per_block(int64_t N) {
    int64_t r = kAuxRows;
    while (ceil_div(N, r) > 1024) r *= 2;
    return r;
}
inline int64_t aux_blocks(int64_t N) {
    return ceil_div(N, aux_rows_per_block(N));
}
inline size_t aux_scratch_bytes(int64_t N) {
    return static_cast<size_t>(2 * aux_blocks(N)) * sizeof(float);
}
inline Geom aux_partial(int64_t N) {
    return {clamp_blocks(aux_blocks(N), 1024), 1, 1, kReduceBlock, 0};
}

// ---- embedding backward (embedding.cuh): the token indices stably sorted by id (a device-wide
// radix sort), then blocks of kEmbeddingBlock columns x kEmbeddingChunk sorted tokens ----
constexpr unsigned kEmbeddingBlock = 128;  // threads per block, one column each
constexpr int64_t kEmbeddingChunk = 64;    // sorted tokens per block (and per partial row)
inline int64_t embedding_chunks(int64_t n) {
    return ceil_div(n, kEmbeddingChunk);
}
// Key bits the sort compares: enough for every key 0 .. rows (rows: an id outside the table).
inline int embedding_key_bits(int64_t rows) {
    int bits = 1;
    while (bits < 31 && (rows >> bits) != 0) ++bits;
    return bits;
}
inline size_t round_up_256(size_t bytes) {
    return (bytes + 255) / 256 * 256;
}
inline size_t embedding_index_bytes(int64_t n) {  // one int32 per token
    return round_up_256(static_cast<size_t>(n) * sizeof(int32_t));
}
inline size_t embedding_partial_bytes(int64_t n, int64_t dim) {  // a head and a tail row per chunk
    return round_up_256(static_cast<size_t>(2 * embedding_chunks(n) * dim) * sizeof(float));
}
// Scratch (256-byte aligned): keys, token indices, sorted keys, sorted token indices, the chunks'
// partial rows, then the sort's temporary storage (sort_temp_bytes, RadixSortPairs::temp_bytes).
inline size_t embedding_bwd_scratch_bytes(int64_t n, int64_t dim, size_t sort_temp_bytes) {
    return 4 * embedding_index_bytes(n) + embedding_partial_bytes(n, dim) + sort_temp_bytes;
}
// Chunk and run kernels: x = chunk of sorted tokens, y = column block (grid-stride beyond 65535).
inline Geom embedding_bwd_chunks(int64_t n, int64_t dim) {
    return {clamp_blocks(embedding_chunks(n), 2147483647),
            clamp_blocks(ceil_div(dim, kEmbeddingBlock), 65535), 1, kEmbeddingBlock, 0};
}

// ---- MoE counting sort of the N*k slots: chunks of 256 slots ----
constexpr unsigned kSortChunk = 256;
inline int64_t moe_sort_chunks(int64_t slots) {
    return ceil_div(slots, kSortChunk);
}
// The per-(expert, chunk) histogram, expert-major [E][chunks]: one exclusive scan of it gives
// every (expert, chunk) base row.
inline int64_t moe_sort_scan_items(int64_t slots, int64_t experts) {
    return experts * moe_sort_chunks(slots);
}
inline size_t moe_sort_hist_bytes(int64_t slots, int64_t experts) {
    return static_cast<size_t>(ceil_div(moe_sort_scan_items(slots, experts) * 4, 256) * 256);
}
// Scratch: the histogram and its exclusive scan (each rounded up to 256 bytes), then the
// device-wide scan's temporary storage (scan_temp_bytes, what ExclusiveScan::temp_bytes asks).
inline size_t moe_sort_scratch_bytes(int64_t slots, int64_t experts, size_t scan_temp_bytes) {
    return 2 * moe_sort_hist_bytes(slots, experts) + scan_temp_bytes;
}
inline Geom moe_count(int64_t slots, int64_t experts) {
    return {clamp_blocks(moe_sort_chunks(slots), 2147483647), 1, 1, kSortChunk,
            static_cast<size_t>(experts) * sizeof(int32_t)};
}
inline Geom moe_counts(int64_t experts) {
    return elementwise(experts);
}
inline Geom moe_place(int64_t slots) {
    return {clamp_blocks(moe_sort_chunks(slots), 2147483647), 1, 1, kSortChunk, 0};
}
// The data-parallel capacity shares: one block per expert, reducing over the tokens.
inline Geom moe_capacity_shares(int64_t experts) {
    return {clamp_blocks(experts, 2147483647), 1, 1, kReduceBlock, 0};
}
// Experts whose per-block counters fit the shared-memory budget.
constexpr int64_t kMaxExperts = static_cast<int64_t>(kMaxDynamicShmem / sizeof(int32_t));

// ---- grouped GEMM planning (backends/shared/grouped_gemm_plan.h): one block; thread 0 scans
// the group sizes, then the block fills the pointer arrays / tile table ----
inline Geom grouped_plan() {
    return {1, 1, 1, 256, 0};
}

// ---- attention: a block of 4 warps, one query row (or key row) per warp ----
// Values per lane for head_dim hd: 1, 2, 4 or 8 (the kernel template argument).
inline int attn_lane_chunks(int64_t hd) {
    int nc = 1;
    while (nc * static_cast<int64_t>(kWarp) < hd) nc *= 2;
    return nc;
}
// Keys (forward, dq) or queries (dk/dv) per shared-memory tile.
inline int attn_tile(int64_t hd) {
    return hd <= 128 ? 32 : 16;
}
inline size_t attn_fwd_shmem(int64_t hd) {
    int64_t kt = attn_tile(hd);
    return static_cast<size_t>(kt * (hd + 1) + kt * hd + kWarpsPerBlock * hd) * sizeof(float);
}
inline size_t attn_bwd_shmem(int64_t hd) {  // dq and dk/dv kernels use the same layout size
    int64_t kt = attn_tile(hd);
    return static_cast<size_t>(2 * kt * (hd + 1) + 2 * kWarpsPerBlock * hd + 2 * kt) *
           sizeof(float);
}
inline Geom attn_rows(int64_t rows, int64_t heads, int64_t batch, size_t shmem) {
    return {clamp_blocks(ceil_div(rows, kWarpsPerBlock), 2147483647), static_cast<unsigned>(heads),
            static_cast<unsigned>(batch), kWarpsPerBlock * kWarp, shmem};
}
// Scratch: D[b,h,t] = dout . o for the backward pass.
inline size_t attn_bwd_scratch_bytes(int64_t B, int64_t H, int64_t Tq) {
    return static_cast<size_t>(B * H * Tq) * sizeof(float);
}

// ---- split-K decode attention (attention_decode.cuh): one query per (batch, head) over a
// longer KV cache. The cache capacity S is cut into chunks of `keys` keys (a multiple of the
// 32-key tile); one warp scores one chunk for up to `rows` query heads sharing a kv head and
// writes a partial (running max, sum, unnormalised output); a second kernel merges a row's
// chunks in chunk order. Chunk size and count depend on B, H, K, S and hd only (never on the
// device length Tk nor on the GPU), so a replayed decode step runs the same sums in the same
// order. ----
constexpr int64_t kAttnDecodeTile = 32;           // keys staged per step, one per lane
constexpr int64_t kAttnDecodeWarpsWanted = 1024;  // ~8 warps per SM of an H100, when S allows
// Query heads per warp for NC values per lane: 8, or 4 at head_dim > 128 (NC 8) to keep the
// running outputs in registers.
constexpr int attn_decode_rows(int nc) {
    return nc == 8 ? 4 : 8;
}
// A warp's key-tile region: the 32 keys [32][hd + 1], later the tile's probabilities [rows][32].
constexpr int64_t attn_decode_tile_floats(int64_t hd, int64_t rows) {
    return kAttnDecodeTile * (hd + 1) > rows * kAttnDecodeTile ? kAttnDecodeTile * (hd + 1)
                                                               : rows * kAttnDecodeTile;
}
struct AttnDecodePlan {
    int64_t rows = 0;         // query heads per warp: attn_decode_rows
    int64_t row_groups = 0;   // per kv head: ceil((H / K) / rows)
    int64_t keys = 0;         // keys per chunk (a multiple of kAttnDecodeTile)
    int64_t chunks = 0;       // ceil(S / keys)
    int64_t warps = 0;        // per block: as many as fit the shared-memory budget, <= 4
    int64_t tile_floats = 0;  // per warp: attn_decode_tile_floats(hd, rows)
    size_t shmem = 0;         // per block: each warp's tile_floats and queries [rows][hd]
    size_t scratch = 0;       // partials: B * H * chunks * (hd + 2) floats
    Geom partial, combine;
};
// warps_wanted: the grid's target (kAttnDecodeWarpsWanted; the harness tests ask for fewer to
// get chunks of several tiles on small problems).
inline AttnDecodePlan attn_decode_plan(int64_t B, int64_t S, int64_t H, int64_t K, int64_t hd,
                                       int64_t warps_wanted = kAttnDecodeWarpsWanted) {
    AttnDecodePlan p;
    p.rows = attn_decode_rows(attn_lane_chunks(hd));
    p.row_groups = ceil_div(H / K, p.rows);
    const int64_t items = B * K * p.row_groups > 0 ? B * K * p.row_groups : 1;  // B = 0: no work
    const int64_t wanted = items >= warps_wanted ? 1 : ceil_div(warps_wanted, items);
    p.keys = ceil_div(ceil_div(S, wanted), kAttnDecodeTile) * kAttnDecodeTile;
    p.chunks = ceil_div(S, p.keys);
    p.tile_floats = attn_decode_tile_floats(hd, p.rows);
    const size_t per_warp = static_cast<size_t>(p.tile_floats + p.rows * hd) * sizeof(float);
    p.warps = static_cast<int64_t>(kMaxDynamicShmem / per_warp);
    const auto most = static_cast<int64_t>(kWarpsPerBlock);
    p.warps = p.warps < 1 ? 1 : (p.warps > most ? most : p.warps);
    p.shmem = static_cast<size_t>(p.warps) * per_warp;
    p.scratch = static_cast<size_t>(B * H * p.chunks * (hd + 2)) * sizeof(float);
    p.partial = {clamp_blocks(ceil_div(p.chunks, p.warps), 2147483647),
                 static_cast<unsigned>(K * p.row_groups), static_cast<unsigned>(B),
                 static_cast<unsigned>(p.warps * kWarp), p.shmem};
    p.combine = warp_per_item(B * H);
    return p;
}

// ---- tensor-core attention (attention_wmma.cuh): 16 query rows (forward, dq) or 16 key rows
// (dk/dv) per warp, m16n16k16 WMMA products on 16-bit operands staged in shared memory ----
// Which kernel an attention op runs: the WMMA pair needs a 16-bit attention precision, head_dim
// 64 or 128 and a device of compute capability >= 8.0 (bf16 fragments); otherwise head_dim 32
// and 64, and 96 and 128 on a device of compute capability >= 8.0 (their tiles need more than
// 48 KiB of shared memory: an opt-in), take the register-tiled fp32 kernels
// (attention_tiled.cuh), every other head_dim the scalar fp32 kernels.
enum class AttnKernel : uint8_t { scalar, tiled, wmma };
constexpr bool attn_wmma_head_dim(int64_t hd) {
    return hd == 64 || hd == 128;
}
constexpr bool attn_tiled_head_dim(int64_t hd, int cc) {
    return hd == 32 || hd == 64 || ((hd == 96 || hd == 128) && cc >= kOptInShmemMinCc);
}
constexpr int kAttnWmmaMinCc = 80;
inline AttnKernel attn_kernel(bool compute16, int64_t hd, int cc) {
    if (compute16 && attn_wmma_head_dim(hd) && cc >= kAttnWmmaMinCc) return AttnKernel::wmma;
    return attn_tiled_head_dim(hd, cc) ? AttnKernel::tiled : AttnKernel::scalar;
}
// cuDNN's fused attention (backends/cuda/cudnn_attention.h) may take a 16-bit attention
// precision's training shapes: queries, keys and cache capacity all T long (no KV cache, no
// device-side length), head_dim a multiple of 8 up to 128, compute capability >= 8.0 (its flash
// attention engines). cuDNN itself may still refuse one (the CUDA Device asks it).
constexpr int kAttnCudnnMinCc = 80;
// The most workspace the CUDA Device lets a cuDNN attention graph ask for: its deterministic
// backward keeps the B x H x T x T score gradients (16-bit), 0.4 GB at gpt2's B16 H12 T1024 but
// 25 GB at T 8192; a shape over the limit runs moetrain's own kernels.
constexpr int64_t kAttnCudnnMaxWorkspace = int64_t{4} << 30;
// What that backward's workspace comes to on Hopper by cudnn-frontend 1.32's sizing (the score
// gradients over 64 x 128 tiles, 16-bit, and an fp32 dQ accumulator): an estimate for
// `moetrain plan`; the Device asks the built graph.
constexpr int64_t attn_cudnn_bwd_workspace_estimate(int64_t B, int64_t H, int64_t T, int64_t hd) {
    const int64_t tq = (T + 63) / 64 * 64, tk = (T + 127) / 128 * 128;
    return B * H * tq * tk * 2 + B * H * T * hd * 4;
}
constexpr bool attn_cudnn_shape(bool compute16, int64_t Tq, int64_t Tk, int64_t S, int64_t hd,
                                bool device_length, int cc) {
    return compute16 && Tq == Tk && Tk == S && Tq > 0 && !device_length && hd % 8 == 0 && hd > 0 &&
           hd <= 128 && cc >= kAttnCudnnMinCc;
}
// ---- register-tiled fp32 attention (attention_tiled.cuh): row groups of 8 threads own 4 rows
// each; tile products of 32 columns (keys, or queries in dk/dv); shared rows of hd + 4 floats ----
constexpr int64_t kAttnTiledRows = 4;          // rows per row group
constexpr int64_t kAttnTiledGroupThreads = 8;  // threads per row group
constexpr int64_t kAttnTiledTile = 32;         // columns per tile product
constexpr int64_t kAttnTiledFwdGroups = 16;    // forward: 64 queries per block
constexpr int64_t kAttnTiledBwdGroups = 8;     // dq: 32 queries, dk/dv: 32 keys per block
constexpr int64_t attn_tiled_lp() {            // row stride of the P / dS buffer
    return kAttnTiledTile + 4;
}
// Forward: the block's queries, a key tile and a value tile, the block's probabilities.
constexpr size_t attn_tiled_fwd_shmem(int64_t hd) {
    const int64_t rows = kAttnTiledFwdGroups * kAttnTiledRows;
    return static_cast<size_t>((rows + 2 * kAttnTiledTile) * (hd + 4) + rows * attn_tiled_lp()) *
           sizeof(float);
}
// dq / dk-dv: the block's two operands (q and dout, or k and v), the tile's two, the P / dS
// buffer, and (dk/dv) the tile's log-sum-exp and D values.
constexpr size_t attn_tiled_bwd_shmem(int64_t hd) {
    const int64_t rows = kAttnTiledBwdGroups * kAttnTiledRows;
    return static_cast<size_t>(2 * (rows + kAttnTiledTile) * (hd + 4) + rows * attn_tiled_lp() +
                               2 * kAttnTiledTile) *
           sizeof(float);
}
inline Geom attn_tiled_geom(int64_t rows, int64_t groups, int64_t heads, int64_t batch,
                            size_t shmem) {
    return {clamp_blocks(ceil_div(rows, groups * kAttnTiledRows), 2147483647),
            static_cast<unsigned>(heads), static_cast<unsigned>(batch),
            static_cast<unsigned>(groups * kAttnTiledGroupThreads), shmem};
}
inline Geom attn_tiled_fwd_geom(int64_t Tq, int64_t H, int64_t B, int64_t hd) {
    return attn_tiled_geom(Tq, kAttnTiledFwdGroups, H, B, attn_tiled_fwd_shmem(hd));
}
inline Geom attn_tiled_bwd_geom(int64_t rows, int64_t heads, int64_t B, int64_t hd) {
    return attn_tiled_geom(rows, kAttnTiledBwdGroups, heads, B, attn_tiled_bwd_shmem(hd));
}
// dk/dv (the register-tiled and the WMMA kernels: 32 keys per block): a block sums over the
// query heads sharing its kv head. With GQA / MQA and few blocks (ceil(S / 32) K B, e.g. 256 for
// seed-moe at B 8, T 1024, one kv head) those heads are split over `splits` blocks of
// `heads_per` heads each, for at least kAttnKvBlocksWanted blocks when the heads allow; the
// splits' partial sums (2 splits B S K hd floats of scratch) are then added in split order. A
// function of the shape only.
constexpr int64_t kAttnKvBlockKeys = 32;
constexpr int64_t kAttnKvBlocksWanted = 1024;  // ~1.5 waves of 2-warp blocks on an H100
struct AttnKvPlan {
    int64_t splits = 1, heads_per = 1;
};
// blocks_wanted: kAttnKvBlocksWanted (the harness tests ask for fewer, to get splits of several
// heads on small shapes).
inline AttnKvPlan attn_kv_plan(int64_t B, int64_t S, int64_t H, int64_t K,
                               int64_t blocks_wanted = kAttnKvBlocksWanted) {
    AttnKvPlan p;
    const int64_t group = K > 0 && H >= K ? H / K : 1;
    const int64_t blocks = ceil_div(S, kAttnKvBlockKeys) * K * B;
    int64_t want = blocks > 0 ? ceil_div(blocks_wanted, blocks) : 1;
    want = want < group ? want : group;
    p.heads_per = ceil_div(group, want > 0 ? want : 1);
    p.splits = ceil_div(group, p.heads_per);  // every split has at least one head
    return p;
}
inline size_t attn_kv_part_bytes(int64_t B, int64_t S, int64_t H, int64_t K, int64_t hd,
                                 int64_t blocks_wanted = kAttnKvBlocksWanted) {
    const AttnKvPlan p = attn_kv_plan(B, S, H, K, blocks_wanted);
    return p.splits > 1 ? static_cast<size_t>(2 * p.splits * B * S * K * hd) * sizeof(float) : 0;
}
// The forward of a decode step (one query per sequence and head over a KV cache with room for
// more than one key: Tq == 1 < S) runs the split-K decode kernels (attention_decode.cuh), in
// fp32 whatever the attention precision; every other forward and every backward follow
// attn_kernel.
inline bool attn_decode(int64_t Tq, int64_t S) {
    return Tq == 1 && S > 1;
}
// 16-bit elements added to every shared-memory row: spreads the rows over the banks and keeps
// each 16-row / 16-column fragment start 32-byte aligned (WMMA requires it).
constexpr int64_t kAttnWmmaPad = 8;
constexpr int64_t attn_wmma_ld(int64_t hd) {
    return hd + kAttnWmmaPad;
}
// Forward: 4 warps (64 queries) per block; keys per tile 64 (hd 64) or 32 (hd 128).
constexpr int64_t kAttnWmmaFwdWarps = 4;
constexpr int64_t attn_wmma_fwd_keys(int64_t hd) {
    return hd <= 64 ? 64 : 32;
}
// Forward shared memory: the staged queries, reused after their fragments are loaded for each
// warp's scores (fp32) and probabilities (16-bit), then the key and value tiles (16-bit).
constexpr size_t attn_wmma_fwd_shmem(int64_t hd) {
    const int64_t q = kAttnWmmaFwdWarps * 16 * attn_wmma_ld(hd) * 2;
    const int64_t sp = kAttnWmmaFwdWarps * 16 * attn_wmma_fwd_keys(hd) * (4 + 2);
    return static_cast<size_t>((q > sp ? q : sp) +
                               2 * attn_wmma_fwd_keys(hd) * attn_wmma_ld(hd) * 2);
}
// Backward (dq and dk/dv kernels): 2 warps (32 rows) per block, tiles of 32 (hd 64) or 16
// (hd 128) keys (dq) or queries (dk/dv). Shared memory: the block's two operands of 32 rows (q and
// dout, or k and v), the tile's two (k and v, or q and dout), per warp two fp32 16 x 32 products
// and their 16-bit results, and the tile's log-sum-exp and D values.
constexpr int64_t kAttnWmmaBwdWarps = 2;
constexpr int64_t attn_wmma_bwd_tile(int64_t hd) {
    return hd <= 64 ? 32 : 16;
}
constexpr size_t attn_wmma_bwd_shmem(int64_t hd) {
    const int64_t rows = kAttnWmmaBwdWarps * 16, tile = attn_wmma_bwd_tile(hd);
    return static_cast<size_t>(2 * (rows + tile) * attn_wmma_ld(hd) * 2 +
                               kAttnWmmaBwdWarps * 16 * tile * (4 + 4 + 2 + 2) + 2 * tile * 4);
}
inline Geom attn_wmma_rows(int64_t rows, int64_t warps, int64_t heads, int64_t batch,
                           size_t shmem) {
    return {clamp_blocks(ceil_div(rows, warps * 16), 2147483647), static_cast<unsigned>(heads),
            static_cast<unsigned>(batch), static_cast<unsigned>(warps * kWarp), shmem};
}

// ---- sampling: one block per row sorts (prob, id) keys: in shared memory, the kSampleFast most
// probable, which decide when the kept set (top-k / top-p) or the draw lies among them; else the
// whole row, padded to a power of 2, in the row's scratch ----
constexpr unsigned kSampleBlock = 256;
constexpr int64_t kSampleFast = 2048;  // 16 KiB of shared keys
inline int64_t sample_padded(int64_t V) {
    int64_t p = 1;
    while (p < V) p *= 2;
    return p;
}
inline size_t sample_scratch_bytes(int64_t B, int64_t V) {
    return static_cast<size_t>(B * sample_padded(V)) * sizeof(uint64_t);
}
inline Geom sample(int64_t B) {
    return {clamp_blocks(B, 2147483647), 1, 1, kSampleBlock, 0};
}

}  // namespace mtk

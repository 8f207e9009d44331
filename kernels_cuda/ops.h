// Host-side launchers of every kernel in kernels_cuda/, one per device op (or op part). Plain
// C++ declarations: the CUDA Device (g++) calls them; each is defined in its family's .cuh,
// which is compiled once by nvcc (through the thin .cu) into the backend, or by g++ under the
// SIMT harness in the tests. Pointers are device pointers; sizes are element counts. A launcher
// queues its kernels on `stream` and returns; it launches nothing when there is no work.
// Scratch pointers must hold the bytes the matching *_scratch_bytes() in launch.h names.
#pragma once

#include <cstddef>
#include <cstdint>

struct CUstream_st;  // cudaStream_t is `CUstream_st*`; the harness passes nullptr

namespace moetrain::grouped {  // backends/shared/grouped_gemm_plan.h
struct Span;
struct Tile;
}  // namespace moetrain::grouped

namespace mtk {

using Stream = CUstream_st*;

enum class ActKind : int { gelu = 0, relu = 1, silu = 2 };  // = moetrain::Act
enum class FloatKind : int { f32 = 0, bf16 = 1, f16 = 2 };  // = moetrain::DType

// Invalid index values are not read through: the kernel skips them and reports the first one
// into a two-word device error word `err` (code, offending value); err may be nullptr.
enum ErrorCode : int32_t {
    kErrTarget = 1,             // cross_entropy: target outside [0, V) and not -1
    kErrSortExpert = 2,         // moe_sort: expert index outside [0, E)
    kErrRouterExpert = 3,       // router_bwd: expert index outside [0, E)
    kErrEmbeddingFwdId = 4,     // embedding_fwd: token id outside the table
    kErrEmbeddingBwdId = 5,     // embedding_bwd: token id outside the table
    kErrGatherIndex = 6,        // gather_rows: row index outside the source
    kErrCombineRow = 7,         // moe_combine: slot_row entry outside the rows
    kErrCombineBwdRow = 8,      // moe_combine_bwd: slot_row entry outside the rows
    kErrGroupRows = 9,          // gemm_grouped: a negative group size
    kErrGroupTotal = 10,        // gemm_grouped: group sizes summing past the capacity
    kErrRopePosition = 11,      // rope: device position offset leaves [0, MT_POS_LIMIT)
    kErrAttnLength = 12,        // attention: device length puts Tk outside [Tq, S]
    kErrKvAppendPosition = 13,  // kv_append: device position offset leaves the cache
};
inline const char* error_message(int32_t code) {
    switch (code) {
        case kErrTarget:
            return "cross_entropy: target outside [0, V) and not -1:";
        case kErrSortExpert:
            return "moe_sort: expert index outside [0, n_experts):";
        case kErrRouterExpert:
            return "router_bwd: expert index outside [0, n_experts):";
        case kErrEmbeddingFwdId:
            return "embedding_fwd: token id outside the table:";
        case kErrEmbeddingBwdId:
            return "embedding_bwd: token id outside the table:";
        case kErrGatherIndex:
            return "gather_rows: row index outside the source:";
        case kErrCombineRow:
            return "moe_combine: slot_row entry outside the rows:";
        case kErrCombineBwdRow:
            return "moe_combine_bwd: slot_row entry outside the rows:";
        case kErrGroupRows:
            return "gemm_grouped: negative group size:";
        case kErrGroupTotal:
            return "gemm_grouped: the group sizes sum past the capacity to";
        case kErrRopePosition:
            return "rope: device position offset outside [0, 2^30):";
        case kErrAttnLength:
            return "attention: device length makes Tk leave [Tq, S]:";
        case kErrKvAppendPosition:
            return "kv_append: device position offset outside the cache:";
        default:
            return "unknown device error:";
    }
}

// ---- elementwise.cuh ----
// out[i] = the elem_bytes-wide bit pattern `bits` (elem_bytes 1, 2 or 4).
void fill(Stream s, void* out, int elem_bytes, uint32_t bits, int64_t n);
void add(Stream s, float* out, const float* a, const float* b, int64_t n);
void axpby(Stream s, float* y, float alpha, const float* x, float beta, int64_t n);
void add_bias(Stream s, float* y, const float* bias, int64_t rows, int64_t cols);

// ---- convert.cuh ----
void convert(Stream s, void* dst, FloatKind dst_kind, const void* src, FloatKind src_kind,
             int64_t n);

// ---- reduce.cuh ----
void sum(Stream s, float* out, const float* x, int64_t n, float scale, bool accumulate,
         float* scratch);
void sum_squares(Stream s, float* out, const float* x, int64_t n, bool accumulate, float* scratch);
void bias_grad(Stream s, float* dbias, const float* dy, int64_t rows, int64_t cols, float* scratch);

// ---- embedding.cuh ----
void embedding_fwd(Stream s, float* out, const float* table, int64_t table_rows, const int32_t* ids,
                   int64_t n, int64_t dim, bool accumulate, int32_t* err);
void embedding_bwd(Stream s, float* dtable, int64_t table_rows, const float* dout,
                   const int32_t* ids, int64_t n, int64_t dim, int32_t* err);

// ---- norm.cuh (scratch: colsum_scratch_bytes(rows, dim)) ----
void rmsnorm_fwd(Stream s, float* y, float* rstd, const float* x, const float* g, int64_t rows,
                 int64_t dim, float eps);
void rmsnorm_bwd(Stream s, float* dx, float* dg, const float* dy, const float* x, const float* g,
                 const float* rstd, int64_t rows, int64_t dim, bool accumulate_dx, float* scratch);
void layernorm_fwd(Stream s, float* y, float* mean, float* rstd, const float* x, const float* g,
                   const float* b, int64_t rows, int64_t dim, float eps);
void layernorm_bwd(Stream s, float* dx, float* dg, float* db, const float* dy, const float* x,
                   const float* g, const float* mean, const float* rstd, int64_t rows, int64_t dim,
                   bool accumulate_dx, float* scratch);

// ---- rope.cuh (pos_dev: the device-side position offset, may be nullptr) ----
void rope(Stream s, float* x, int64_t B, int64_t T, int64_t nh, int64_t hd, float theta,
          int64_t pos0, const int32_t* pos_dev, bool inverse, int32_t* err);

// ---- kv_cache.cuh: cache[b, pos0 + pos_dev[0] + t, :] = rows[b, t, :], elements of 1, 2 or 4
// bytes (pos_dev may be nullptr) ----
void kv_append(Stream s, void* cache, const void* rows, int elem_bytes, int64_t B, int64_t T,
               int64_t S, int64_t row_len, int64_t pos0, const int32_t* pos_dev, int32_t* err);

// ---- attention.cuh (sizes as moetrain::AttnDims; hd <= kMaxHeadDim) ----
// tk_dev: the device length added to Tk (may be nullptr); err: where an invalid one is reported.
struct AttnShape {
    int64_t B = 0, Tq = 0, Tk = 0, S = 0, H = 0, K = 0, hd = 0;
    const int32_t* tk_dev = nullptr;
    int32_t* err = nullptr;
};
void attention_fwd(Stream s, float* o, float* lse, const float* q, const float* k, const float* v,
                   const AttnShape& d, float scale);
// scratch: attn_bwd_scratch_bytes(B, H, Tq).
void attention_bwd(Stream s, float* dq, float* dk, float* dv, const float* dout, const float* q,
                   const float* k, const float* v, const float* o, const float* lse,
                   const AttnShape& d, float scale, float* scratch);

// ---- activations.cuh ----
void act_fwd(Stream s, ActKind act, float* y, const float* x, int64_t n);
void act_bwd(Stream s, ActKind act, float* dx, const float* dy, const float* x, int64_t n);
void swiglu_fwd(Stream s, float* h, const float* gate, const float* up, int64_t n);
void swiglu_bwd(Stream s, float* dgate, float* dup, const float* dh, const float* gate,
                const float* up, int64_t n);
void softmax(Stream s, float* y, const float* x, int64_t rows, int64_t cols);

// ---- router.cuh (k <= kMaxTopK) ----
void router_fwd(Stream s, float* probs, float* lse, int32_t* topk_idx, float* topk_w,
                const float* logits, int64_t N, int64_t E, int64_t k, bool norm_topk);
void router_bwd(Stream s, float* dlogits, const float* dtopk_w, const float* probs,
                const float* lse, const int32_t* topk_idx, const float* topk_w,
                const int32_t* counts, int64_t N, int64_t E, int64_t k, bool norm_topk,
                float aux_alpha, float z_alpha, float scale, int32_t* err);
void router_aux_loss(Stream s, float* out, const float* probs, const float* lse,
                     const int32_t* counts, int64_t N, int64_t E, int64_t k, float aux_alpha,
                     float z_alpha);
void hash_route(Stream s, int32_t* topk_idx, const int32_t* ids, int64_t N, int64_t layer,
                int64_t E);

// ---- moe_permute.cuh (E <= kMaxExperts) ----
// The device-wide exclusive prefix sum moe_sort runs between its kernels: out[i] = in[0] + ...
// + in[i-1] for i < n, queued on s, with `temp` holding temp_bytes(n) bytes of device memory
// that overlap neither in nor out. The CUDA backend passes its cub wrapper
// (backends/cuda/cub_scan.h); the SIMT harness a host implementation of the same functions.
struct ExclusiveScan {
    size_t (*temp_bytes)(int64_t n);
    void (*run)(Stream s, const int32_t* in, int32_t* out, int64_t n, void* temp,
                size_t temp_bytes);
};
// scan_temp_bytes = scan.temp_bytes(moe_sort_scan_items(N*k, E)); scratch (256-byte
// aligned): moe_sort_scratch_bytes(N*k, E, scan_temp_bytes).
void moe_sort(Stream s, int32_t* counts, int32_t* row_token, int32_t* slot_row,
              const int32_t* topk_idx, int64_t N, int64_t k, int64_t E, const ExclusiveScan& scan,
              size_t scan_temp_bytes, void* scratch, int32_t* err);
void gather_rows(Stream s, float* dst, const float* src, int64_t src_rows, const int32_t* index,
                 int64_t R, int64_t dim, int32_t* err);
// w may be nullptr (all weights 1); rows has nrows rows of dim.
void moe_combine(Stream s, float* y, const float* rows, int64_t nrows, const int32_t* slot_row,
                 const float* w, int64_t N, int64_t k, int64_t dim, bool accumulate, int32_t* err);
// dw and w may be nullptr; drows and rows have nrows rows of dim.
void moe_combine_bwd(Stream s, float* drows, float* dw, const float* dy, const float* rows,
                     int64_t nrows, const int32_t* slot_row, const float* w, int64_t N, int64_t k,
                     int64_t dim, int32_t* err);

// ---- grouped_gemm.cuh (Device::gemm_grouped; the plan: backends/shared/grouped_gemm_plan.h) ----
// Dim m pointer-array inputs: A's first row and its row stride, B_0 and the distance between
// consecutive B_i, both in bytes of the operands the products read; C (f32) with its row stride
// in elements; the C that dummy entries write.
struct GroupedOperands {
    const void* a = nullptr;
    int64_t a_row_bytes = 0;
    const void* b = nullptr;
    int64_t b_group_bytes = 0;
    float* c = nullptr;
    int64_t ldc = 0;
    float* dummy_c = nullptr;
};
// One block: spans[groups] from sizes, then the `entries` pointers of every class (entry_tile).
void grouped_pointers(Stream s, const int32_t* sizes, int64_t groups, int64_t capacity,
                      int64_t tile, int64_t big, int64_t entries, const GroupedOperands& o,
                      moetrain::grouped::Span* spans, const void** a_ptrs, const void** b_ptrs,
                      float** c_ptrs, int32_t* err);
// One block: spans[groups], then table[tiles] of the padded tiles (tile_of, rounding up).
void grouped_tiles(Stream s, const int32_t* sizes, int64_t groups, int64_t capacity, int64_t tile,
                   int64_t tiles, moetrain::grouped::Span* spans, moetrain::grouped::Tile* table,
                   int32_t* err);
// C_i = beta * C_i for i < groups (C_i = c + i * stride_c, m x n, row stride ldc).
void grouped_scale(Stream s, float* c, int64_t groups, int64_t stride_c, int64_t m, int64_t n,
                   int64_t ldc, float beta);
// The `count` tiles table[0 .. count) of TM = tile rows each, copied from src (rows of `cols`,
// row stride ld) into dst compact (count * tile rows of cols), converted to dst_kind; rows past
// a tile's end and dummy tiles are zero.
void grouped_pad(Stream s, void* dst, FloatKind dst_kind, const void* src, FloatKind src_kind,
                 int64_t ld, int64_t cols, const moetrain::grouped::Tile* table, int64_t count,
                 int64_t tile);
// C_{table[p].group} += partial p (compact m x n, p < count, in order); dummies skipped.
void grouped_reduce(Stream s, float* c, int64_t stride_c, int64_t ldc, const float* partials,
                    const moetrain::grouped::Tile* table, int64_t count, int64_t m, int64_t n);

// ---- loss.cuh ----
void cross_entropy(Stream s, float* losses, float* logits, const int32_t* targets, int64_t N,
                   int64_t V, float grad_scale, int32_t* err);

// ---- optimizer.cuh (gnorm_sq may be nullptr when clip <= 0) ----
struct AdamWParams {
    float lr = 0, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0, bc1 = 1, bc2 = 1;
};
void adamw(Stream s, float* p, const float* g, float* m, float* v, int64_t n, const AdamWParams& a,
           const float* gnorm_sq, float clip, float grad_scale);
// 8-bit AdamW (moetrain::Device::adamw8bit): codes [n], absmax [ceil(n / 256)]; table: the
// MT_QMAP_LEN quantisation maps of mt_math.h in device memory.
void adamw8bit(Stream s, float* p, const float* g, uint8_t* m_codes, uint8_t* v_codes,
               float* m_absmax, float* v_absmax, const float* table, int64_t n,
               const AdamWParams& a, const float* gnorm_sq, float clip, float grad_scale);
void sgd(Stream s, float* p, const float* g, int64_t n, float lr, const float* gnorm_sq, float clip,
         float grad_scale);

// ---- sample.cuh (scratch: sample_scratch_bytes(B, V)) ----
struct SampleParams {
    float temperature = 0;
    int64_t top_k = 0;
    float top_p = 1.0f;
    uint64_t seed = 0, step = 0;
    const int32_t* step_dev = nullptr;  // added to step as uint32 (moetrain::SampleArgs)
};
void sample(Stream s, int32_t* out_ids, const float* logits, int64_t B, int64_t V,
            const SampleParams& p, uint64_t* scratch);

}  // namespace mtk

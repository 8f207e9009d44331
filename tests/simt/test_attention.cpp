// Harness tests of kernels_cuda/attention.cuh: causal flash-style forward (o, lse) and backward
// (dq, dk, dv; rows past Tk zeroed) against the naive float64 reference, for every per-lane
// width (hd up to 32, 64, 128, 256), MHA / GQA / MQA, T = 1, a KV cache (Tq < Tk <= S) and key
// counts that straddle a tile.
#include "harness_util.h"
#include "attention.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;

namespace {
struct AttnCase {
    int64_t B, Tq, Tk, S, H, K, hd;
};
const AttnCase kCases[] = {
    {1, 1, 1, 1, 1, 1, 1},     // the smallest
    {2, 5, 5, 5, 4, 2, 7},     // GQA, odd hd
    {1, 3, 9, 12, 2, 1, 40},   // MQA, KV cache with spare capacity, 2 values per lane
    {1, 37, 37, 40, 2, 2, 64}, // keys straddle the 32-key tile
    {1, 6, 20, 20, 3, 3, 100}, // 4 values per lane
    {1, 18, 18, 19, 2, 1, 130},// 8 values per lane, 16-key tiles
};
}  // namespace

TEST_CASE("simt: attention forward and backward") {
    for (AttnCase c : kCases) {
        CAPTURE(c.B);
        CAPTURE(c.Tq);
        CAPTURE(c.Tk);
        CAPTURE(c.S);
        CAPTURE(c.H);
        CAPTURE(c.K);
        CAPTURE(c.hd);
        moetrain::AttnDims d{c.B, c.Tq, c.Tk, c.S, c.H, c.K, c.hd};
        mtk::AttnShape ks{c.B, c.Tq, c.Tk, c.S, c.H, c.K, c.hd};
        const int64_t nq = c.B * c.Tq * c.H * c.hd, nk = c.B * c.S * c.K * c.hd;
        const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
        Rng rng(static_cast<uint64_t>(c.Tq * 1000 + c.hd));
        Vec q = rng.normal(nq), k = rng.normal(nk), v = rng.normal(nk), dout = rng.normal(nq);
        auto fwd = two_schedules("attention_fwd", [&] {
            FVec o(nq, NAN), lse(c.B * c.H * c.Tq, NAN), fq = to_f32(q), fk = to_f32(k), fv = to_f32(v);
            mtk::attention_fwd(nullptr, o.data(), lse.data(), fq.data(), fk.data(), fv.data(), ks, scale);
            return std::make_pair(o, lse);
        });
        Vec wo(nq), wl(c.B * c.H * c.Tq);
        ref::attention_fwd(wo, wl, q, k, v, d, scale);
        check_close(fwd.first, wo, Tol{1e-4, 1e-5}, "o");
        check_close(fwd.second, wl, Tol{1e-5, 1e-5}, "lse");

        auto bwd = two_schedules("attention_bwd", [&] {
            FVec dq(nq, NAN), dk(nk, NAN), dv(nk, NAN), fq = to_f32(q), fk = to_f32(k), fv = to_f32(v);
            FVec fd = to_f32(dout), scratch(mtk::attn_bwd_scratch_bytes(c.B, c.H, c.Tq) / sizeof(float), NAN);
            mtk::attention_bwd(nullptr, dq.data(), dk.data(), dv.data(), fd.data(), fq.data(), fk.data(),
                               fv.data(), fwd.first.data(), fwd.second.data(), ks, scale, scratch.data());
            return std::make_tuple(dq, dk, dv);
        });
        Vec wdq(nq), wdk(nk), wdv(nk);
        ref::attention_bwd(wdq, wdk, wdv, dout, q, k, v, d, scale);
        check_close(std::get<0>(bwd), wdq, Tol{1e-3, 1e-4}, "dq");
        check_close(std::get<1>(bwd), wdk, Tol{1e-3, 1e-4}, "dk");
        check_close(std::get<2>(bwd), wdv, Tol{1e-3, 1e-4}, "dv");
    }
}

TEST_CASE("simt: attention shared memory fits the launch budget for every head_dim") {
    for (int64_t hd = 1; hd <= mtk::kMaxHeadDim; ++hd) {
        CAPTURE(hd);
        CHECK(mtk::attn_fwd_shmem(hd) <= mtk::kMaxDynamicShmem);
        CHECK(mtk::attn_bwd_shmem(hd) <= mtk::kMaxDynamicShmem);
        CHECK(mtk::attn_lane_chunks(hd) * 32 >= hd);
        CHECK(mtk::attn_lane_chunks(hd) <= 8);
    }
}

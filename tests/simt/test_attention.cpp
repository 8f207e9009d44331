// Harness tests of kernels_cuda/attention.cuh: causal flash-style forward (o, lse) and backward
// (dq, dk, dv; rows past Tk zeroed) against the naive float64 reference, for every per-lane
// width (hd up to 32, 64, 128, 256), MHA / GQA / MQA, T = 1, a KV cache (Tq < Tk <= S) and key
// counts that straddle a tile; the same results bit for bit when part of Tk is a device-side
// length (AttnShape::tk_dev), and a device length outside [Tq, S] reported with nothing written.
#include <algorithm>
#include <cmath>

#include "harness_util.h"
#include "attention.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;

namespace {
struct AttnCase {
    int64_t B, Tq, Tk, S, H, K, hd;
};
const AttnCase kCases[] = {
    {1, 1, 1, 1, 1, 1, 1},       // the smallest
    {2, 5, 5, 5, 4, 2, 7},       // GQA, odd hd
    {1, 3, 9, 12, 2, 1, 40},     // MQA, KV cache with spare capacity, 2 values per lane
    {1, 37, 37, 40, 2, 2, 64},   // keys straddle the 32-key tile
    {1, 6, 20, 20, 3, 3, 100},   // 4 values per lane
    {1, 18, 18, 19, 2, 1, 130},  // 8 values per lane, 16-key tiles
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
        auto run_fwd = [&](const mtk::AttnShape& shape, const char* what) {
            return two_schedules(what, [&] {
                FVec o(nq, NAN), lse(c.B * c.H * c.Tq, NAN), fq = to_f32(q), fk = to_f32(k),
                                                             fv = to_f32(v);
                mtk::attention_fwd(nullptr, o.data(), lse.data(), fq.data(), fk.data(), fv.data(),
                                   shape, scale);
                return std::make_pair(o, lse);
            });
        };
        const auto fwd = run_fwd(ks, "attention_fwd");
        Vec wo(nq), wl(c.B * c.H * c.Tq);
        ref::attention_fwd(wo, wl, q, k, v, d, scale);
        check_close(fwd.first, wo, Tol{1e-4, 1e-5}, "o");
        check_close(fwd.second, wl, Tol{1e-5, 1e-5}, "lse");

        auto run_bwd = [&](const mtk::AttnShape& shape, const char* what) {
            return two_schedules(what, [&] {
                FVec dq(nq, NAN), dk(nk, NAN), dv(nk, NAN), fq = to_f32(q), fk = to_f32(k),
                                                            fv = to_f32(v);
                FVec fd = to_f32(dout),
                     scratch(mtk::attn_bwd_scratch_bytes(c.B, c.H, c.Tq) / sizeof(float), NAN);
                mtk::attention_bwd(nullptr, dq.data(), dk.data(), dv.data(), fd.data(), fq.data(),
                                   fk.data(), fv.data(), fwd.first.data(), fwd.second.data(), shape,
                                   scale, scratch.data());
                return std::make_tuple(dq, dk, dv);
            });
        };
        const auto bwd = run_bwd(ks, "attention_bwd");
        Vec wdq(nq), wdk(nk), wdv(nk);
        ref::attention_bwd(wdq, wdk, wdv, dout, q, k, v, d, scale);
        check_close(std::get<0>(bwd), wdq, Tol{1e-3, 1e-4}, "dq");
        check_close(std::get<1>(bwd), wdk, Tol{1e-3, 1e-4}, "dk");
        check_close(std::get<2>(bwd), wdv, Tol{1e-3, 1e-4}, "dv");

        // Tk = Tq on the host + the rest on the device: bit-identical results.
        const int32_t tk_dev[1] = {static_cast<int32_t>(c.Tk - c.Tq)};
        IVec err = {0, 0};
        mtk::AttnShape kd = ks;
        kd.Tk = c.Tq;
        kd.tk_dev = tk_dev;
        kd.err = err.data();
        const auto dfwd = run_fwd(kd, "attention_fwd (device length)");
        CHECK(same_bits(dfwd.first, fwd.first));
        CHECK(same_bits(dfwd.second, fwd.second));
        const auto dbwd = run_bwd(kd, "attention_bwd (device length)");
        CHECK(same_bits(std::get<0>(dbwd), std::get<0>(bwd)));
        CHECK(same_bits(std::get<1>(dbwd), std::get<1>(bwd)));
        CHECK(same_bits(std::get<2>(dbwd), std::get<2>(bwd)));
        CHECK(err[0] == 0);
    }
}

TEST_CASE("simt: attention reports a device length outside [Tq, S] and writes nothing") {
    const int64_t B = 1, Tq = 2, S = 6, H = 2, K = 1, hd = 8;
    const int64_t nq = B * Tq * H * hd, nk = B * S * K * hd;
    Rng rng(3);
    const FVec q = to_f32(rng.normal(nq)), k = to_f32(rng.normal(nk)), v = to_f32(rng.normal(nk));
    // Host Tk = Tq with -1 on the device (Tk < Tq), host Tk = S - 2 with +3 (Tk > S).
    for (int32_t extra : {int32_t{-1}, int32_t{3}}) {
        CAPTURE(extra);
        const int32_t tk_dev[1] = {extra};
        IVec err = {0, 0};
        const mtk::AttnShape d{B, Tq, extra < 0 ? Tq : S - 2, S, H, K, hd, tk_dev, err.data()};
        FVec o(nq, NAN), lse(B * H * Tq, NAN), dq(nq, NAN), dk(nk, NAN), dv(nk, NAN);
        FVec scratch(mtk::attn_bwd_scratch_bytes(B, H, Tq) / sizeof(float), 0.0f);
        mtk::attention_fwd(nullptr, o.data(), lse.data(), q.data(), k.data(), v.data(), d, 0.5f);
        CHECK(err[0] == mtk::kErrAttnLength);
        CHECK(err[1] == extra);
        err = {0, 0};
        mtk::attention_bwd(nullptr, dq.data(), dk.data(), dv.data(), q.data(), q.data(), k.data(),
                           v.data(), o.data(), lse.data(), d, 0.5f, scratch.data());
        CHECK(err[0] == mtk::kErrAttnLength);
        for (const FVec* out : {&o, &lse, &dq, &dk, &dv})
            CHECK(std::all_of(out->begin(), out->end(), [](float x) { return std::isnan(x); }));
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

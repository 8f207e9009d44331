// Harness tests of kernels_cuda/attention.cuh: causal flash-style forward (o, lse) and backward
// (dq, dk, dv; rows past Tk zeroed) against the naive float64 reference, for every per-lane
// width (hd up to 32, 64, 128, 256), MHA / GQA / MQA, T = 1, a KV cache (Tq < Tk <= S) and key
// counts that straddle a tile; the same results bit for bit when part of Tk is a device-side
// length (AttnShape::tk_dev), and a device length outside [Tq, S] reported with nothing written.
#include <algorithm>
#include <cmath>

#include "attention_cases.h"  // first: the harness (simt.h)

#include "attention.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;

namespace {
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
        INFO(c);
        const int64_t nq = c.nq(), nk = c.nk();
        const float scale = c.scale();
        Rng rng(static_cast<uint64_t>(c.Tq * 1000 + c.hd));
        Vec q = rng.normal(nq), k = rng.normal(nk), v = rng.normal(nk), dout = rng.normal(nq);
        auto run_fwd = [&](const mtk::AttnShape& shape, const char* what) {
            return two_schedules(what, [&] {
                FVec o(nq, NAN), lse(c.rows(), NAN), fq = to_f32(q), fk = to_f32(k), fv = to_f32(v);
                mtk::attention_fwd(nullptr, o.data(), lse.data(), fq.data(), fk.data(), fv.data(),
                                   shape, scale);
                return std::make_pair(o, lse);
            });
        };
        const auto fwd = run_fwd(c.shape(), "attention_fwd");
        Vec wo(nq), wl(c.rows());
        ref::attention_fwd(wo, wl, q, k, v, c.dims(), scale);
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
        const auto bwd = run_bwd(c.shape(), "attention_bwd");
        Vec wdq(nq), wdk(nk), wdv(nk);
        ref::attention_bwd(wdq, wdk, wdv, dout, q, k, v, c.dims(), scale);
        check_close(std::get<0>(bwd), wdq, Tol{1e-3, 1e-4}, "dq");
        check_close(std::get<1>(bwd), wdk, Tol{1e-3, 1e-4}, "dk");
        check_close(std::get<2>(bwd), wdv, Tol{1e-3, 1e-4}, "dv");

        // Tk = Tq on the host + the rest on the device: bit-identical results.
        const DeviceLength dl(c);
        check_same_bits(run_fwd(dl.shape, "attention_fwd (device length)"), fwd);
        check_same_bits(run_bwd(dl.shape, "attention_bwd (device length)"), bwd);
        CHECK(dl.err[0] == 0);
    }
}

TEST_CASE("simt: attention reports a device length outside [Tq, S] and writes nothing") {
    check_device_length_refused(
        8,
        [](const mtk::AttnShape& d, const RefusalInputs& in, FVec& o, FVec& lse) {
            mtk::attention_fwd(nullptr, o.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(),
                               d, 0.5f);
        },
        [](const mtk::AttnShape& d, const RefusalInputs& in, FVec& dq, FVec& dk, FVec& dv) {
            const AttnCase& c = in.c;
            FVec o0(c.nq(), NAN), lse0(c.rows(), NAN);  // the backward's (unread) forward outputs
            FVec scratch(mtk::attn_bwd_scratch_bytes(c.B, c.H, c.Tq) / sizeof(float), 0.0f);
            mtk::attention_bwd(nullptr, dq.data(), dk.data(), dv.data(), in.q.data(), in.q.data(),
                               in.k.data(), in.v.data(), o0.data(), lse0.data(), d, 0.5f,
                               scratch.data());
        });
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

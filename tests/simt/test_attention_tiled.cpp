// Harness tests of kernels_cuda/attention_tiled.cuh (the register-tiled fp32 attention, head_dim
// 32, 64 and 128) against the naive float64 reference: MHA / GQA / MQA, query counts that are not a
// multiple of a block (64 forward, 32 backward) or of the 32-column tile, several query and key
// blocks, a KV cache (Tq < Tk <= S with spare capacity, Tq = 1 included), batches; bit-identical
// results under two scheduling seeds and with part of Tk as a device length, and a device
// length outside [Tq, S] reported with nothing written. Also its shape logic in launch.h.
#include <algorithm>
#include <cmath>
#include <tuple>

#include "attention_cases.h"  // first: the harness (simt.h)

#include "attention_tiled.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;

namespace {
const AttnCase kTiledCases[] = {
    {1, 1, 1, 1, 1, 1, 32},      // the smallest
    {1, 37, 37, 37, 2, 2, 64},   // MHA, T not a multiple of a block or of the tile
    {2, 20, 20, 24, 4, 2, 32},   // GQA, batches, spare cache capacity
    {1, 70, 70, 72, 2, 1, 64},   // MQA, two forward blocks, three backward blocks
    {1, 5, 45, 48, 2, 2, 64},    // KV cache: 5 queries after 40 cached keys
    {1, 1, 50, 64, 3, 1, 32},    // one query over 50 keys (the backward of a decode shape)
    {1, 40, 40, 44, 4, 2, 128},  // hd 128 (opt-in shared memory), GQA, spare capacity
    {1, 3, 35, 36, 2, 1, 128},   // hd 128, KV cache
};
}  // namespace

TEST_CASE("simt: tiled fp32 attention forward and backward match the float64 reference") {
    for (AttnCase c : kTiledCases) {
        INFO(c);
        const int64_t nq = c.nq(), nk = c.nk();
        const float scale = c.scale();
        Rng rng(static_cast<uint64_t>(c.Tq * 1000 + c.hd + c.Tk));
        const Vec q = rng.normal(nq), k = rng.normal(nk), v = rng.normal(nk), dout = rng.normal(nq);
        const FVec fq = to_f32(q), fk = to_f32(k), fv = to_f32(v), fd = to_f32(dout);
        auto run_fwd = [&](const mtk::AttnShape& shape, const char* what) {
            return two_schedules(what, [&] {
                FVec o(nq, NAN), lse(c.rows(), NAN);
                mtk::attention_tiled_fwd(nullptr, o.data(), lse.data(), fq.data(), fk.data(),
                                         fv.data(), shape, scale);
                return std::make_pair(o, lse);
            });
        };
        const auto fwd = run_fwd(c.shape(), "attention_tiled_fwd");
        Vec wo(nq), wl(c.rows());
        ref::attention_fwd(wo, wl, q, k, v, c.dims(), scale);
        check_close(fwd.first, wo, Tol{1e-4, 1e-5}, "o");
        check_close(fwd.second, wl, Tol{1e-5, 1e-5}, "lse");

        // D = rowsum(dout * o) over the kernel's own o, as attention_bwd_dot gives it on the
        // device (test_attention.cpp tests that kernel).
        const FVec D = rowsum_dout_o(c, dout, to_f64(fwd.first));
        auto run_bwd = [&](const mtk::AttnShape& shape, const char* what) {
            return two_schedules(what, [&] {
                FVec dq(nq, NAN), dk(nk, NAN), dv(nk, NAN);
                mtk::attention_tiled_bwd(nullptr, dq.data(), dk.data(), dv.data(), fd.data(),
                                         fq.data(), fk.data(), fv.data(), fwd.second.data(),
                                         D.data(), shape, scale);
                return std::make_tuple(dq, dk, dv);
            });
        };
        const auto bwd = run_bwd(c.shape(), "attention_tiled_bwd");
        Vec wdq(nq), wdk(nk), wdv(nk);
        ref::attention_bwd(wdq, wdk, wdv, dout, q, k, v, c.dims(), scale);
        check_close(std::get<0>(bwd), wdq, Tol{1e-3, 1e-4}, "dq");
        check_close(std::get<1>(bwd), wdk, Tol{1e-3, 1e-4}, "dk");  // rows in [Tk, S): zeros
        check_close(std::get<2>(bwd), wdv, Tol{1e-3, 1e-4}, "dv");

        // Tk = Tq on the host + the rest on the device: bit-identical results.
        const DeviceLength dl(c);
        check_same_bits(run_fwd(dl.shape, "attention_tiled_fwd (device length)"), fwd);
        check_same_bits(run_bwd(dl.shape, "attention_tiled_bwd (device length)"), bwd);
        CHECK(dl.err[0] == 0);
    }
}

TEST_CASE("simt: tiled attention reports a device length outside [Tq, S] and writes nothing") {
    const int64_t hd = 32;
    Rng rng(7);
    const AttnCase c{1, 2, 2, 6, 2, 1, hd};
    const FVec q = to_f32(rng.normal(c.nq())), k = to_f32(rng.normal(c.nk())),
               v = to_f32(rng.normal(c.nk()));
    const FVec D(c.rows(), 0.0f), l0(c.rows(), 0.0f);
    check_device_length_refused(
        hd,
        [&](const mtk::AttnShape& d, FVec& o, FVec& lse) {
            mtk::attention_tiled_fwd(nullptr, o.data(), lse.data(), q.data(), k.data(), v.data(), d,
                                     0.125f);
        },
        [&](const mtk::AttnShape& d, FVec& dq, FVec& dk, FVec& dv) {
            mtk::attention_tiled_bwd(nullptr, dq.data(), dk.data(), dv.data(), q.data(), q.data(),
                                     k.data(), v.data(), l0.data(), D.data(), d, 0.125f);
        });
}

TEST_CASE("simt: tiled attention shape logic (launch.h)") {
    using mtk::AttnKernel;
    CHECK(mtk::attn_kernel(false, 64, 90) == AttnKernel::tiled);
    CHECK(mtk::attn_kernel(false, 32, 75) == AttnKernel::tiled);
    CHECK(mtk::attn_kernel(true, 32, 90) == AttnKernel::tiled);  // no wmma kernel for 32
    CHECK(mtk::attn_kernel(false, 128, 90) == AttnKernel::tiled);
    CHECK(mtk::attn_kernel(false, 128, 80) == AttnKernel::tiled);
    CHECK(mtk::attn_kernel(false, 128, 75) == AttnKernel::scalar);  // no 77 KiB opt-in on sm_75
    CHECK(mtk::attn_kernel(false, 48, 90) == AttnKernel::scalar);
    CHECK(mtk::attn_kernel(false, 96, 90) == AttnKernel::scalar);
    for (int64_t hd : {int64_t{32}, int64_t{64}, int64_t{128}}) {
        CAPTURE(hd);
        // Within the budget at 32 / 64; hd 128 opts in (cc >= 8.0 only).
        const size_t limit = hd == 128 ? mtk::kMaxOptInShmem : mtk::kMaxDynamicShmem;
        CHECK(mtk::attn_tiled_fwd_shmem(hd) <= limit);
        CHECK(mtk::attn_tiled_bwd_shmem(hd) <= limit);
        CHECK(hd % (mtk::kAttnTiledGroupThreads * 4) == 0);  // float4 columns per thread
    }
    CHECK(mtk::attn_tiled_fwd_shmem(128) > mtk::kMaxDynamicShmem);
    const mtk::Geom f = mtk::attn_tiled_fwd_geom(70, 12, 3, 64);
    CHECK(f.gx == 2);  // 64 queries per block
    CHECK(f.gy == 12);
    CHECK(f.gz == 3);
    CHECK(f.block == 128);
    CHECK(f.shmem == mtk::attn_tiled_fwd_shmem(64));
    const mtk::Geom b = mtk::attn_tiled_bwd_geom(70, 4, 3, 32);
    CHECK(b.gx == 3);  // 32 queries (dq) or keys (dk/dv) per block
    CHECK(b.block == 64);
    CHECK(b.shmem == mtk::attn_tiled_bwd_shmem(32));
}

// Harness tests of kernels_cuda/attention_tiled.cuh (the register-tiled fp32 attention, head_dim
// 32, 64, 96 and 128) against the naive float64 reference: MHA / GQA / MQA, query counts that are
// not a multiple of a block (64 forward, 32 backward) or of the 32-column tile, several query and
// key blocks, a KV cache (Tq < Tk <= S with spare capacity, Tq = 1 included), batches;
// bit-identical results under two scheduling seeds and with part of Tk as a device length, and a
// device length outside [Tq, S] reported with nothing written. Also its shape logic in launch.h.
#include <algorithm>
#include <cmath>
#include <tuple>

#include "attention_cases.h"  // first: the harness (simt.h)

#include "attention_tiled.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;

namespace {
struct TiledCase {
    AttnCase c;
    int64_t kv_blocks_wanted;  // attn_kv_plan's target: GQA / MQA head splits
};
const TiledCase kTiledCases[] = {
    {{1, 1, 1, 1, 1, 1, 32}, mtk::kAttnKvBlocksWanted},     // the smallest
    {{1, 37, 37, 37, 2, 2, 64}, mtk::kAttnKvBlocksWanted},  // MHA, T off every block size
    {{2, 20, 20, 24, 4, 2, 32}, mtk::kAttnKvBlocksWanted},  // GQA, batches, spare capacity
    {{1, 70, 70, 72, 2, 1, 64}, mtk::kAttnKvBlocksWanted},  // MQA, 2 forward / 3 dq blocks
    {{1, 5, 45, 48, 2, 2, 64}, mtk::kAttnKvBlocksWanted},   // KV cache: 5 queries after 40
    {{1, 1, 50, 64, 3, 1, 32}, mtk::kAttnKvBlocksWanted},   // one query over 50 keys
    {{1, 40, 50, 56, 8, 2, 32}, 8},  // KV offset 10: dk/dv query tiles off a multiple of 32;
                                     // GQA 4 heads per kv head, 2 per split
    {{1, 40, 50, 56, 2, 1, 64}, mtk::kAttnKvBlocksWanted},  // the same, MQA at hd 64
    {{2, 70, 70, 72, 4, 2, 32}, mtk::kAttnKvBlocksWanted},  // hd 32: blocks, skipped tiles
    {{1, 65, 97, 100, 4, 1, 64}, 8},  // a 1-row last block, 2 heads per split of 4
    {{1, 0, 0, 40, 2, 1, 64}, mtk::kAttnKvBlocksWanted},     // no query: dk, dv zeros
    {{1, 40, 40, 44, 4, 2, 128}, mtk::kAttnKvBlocksWanted},  // hd 128 (opt-in), GQA
    {{1, 3, 35, 36, 2, 1, 128}, mtk::kAttnKvBlocksWanted},   // hd 128, KV cache
    {{1, 33, 33, 33, 3, 1, 96}, 2},                          // hd 96, 2 heads per split
};

// Rows [Tk, S) of a [B,S,K,hd] cache set to NaN: the kernels must never read them into a sum.
FVec with_junk(FVec x, const AttnCase& c) {
    for (int64_t b = 0; b < c.B; ++b)
        for (int64_t u = c.Tk; u < c.S; ++u)
            for (int64_t e = 0; e < c.K * c.hd; ++e) x[(b * c.S + u) * c.K * c.hd + e] = NAN;
    return x;
}
}  // namespace

TEST_CASE("simt: tiled fp32 attention forward and backward match the float64 reference") {
    for (const TiledCase& tc : kTiledCases) {
        const AttnCase& c = tc.c;
        INFO(c << " kv blocks wanted " << tc.kv_blocks_wanted);
        const int64_t nq = c.nq(), nk = c.nk();
        const float scale = c.scale();
        Rng rng(static_cast<uint64_t>(c.Tq * 1000 + c.hd + c.Tk));
        const Vec q = rng.normal(nq), k = rng.normal(nk), v = rng.normal(nk), dout = rng.normal(nq);
        const FVec fq = to_f32(q), fk = with_junk(to_f32(k), c), fv = with_junk(to_f32(v), c),
                   fd = to_f32(dout);
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
        const size_t part_floats =
            mtk::attn_kv_part_bytes(c.B, c.S, c.H, c.K, c.hd, tc.kv_blocks_wanted) / sizeof(float);
        auto run_bwd = [&](const mtk::AttnShape& shape, const char* what) {
            return two_schedules(what, [&] {
                FVec dq(nq, NAN), dk(nk, NAN), dv(nk, NAN), part(part_floats, NAN);
                mtk::attention_tiled_bwd(nullptr, dq.data(), dk.data(), dv.data(), fd.data(),
                                         fq.data(), fk.data(), fv.data(), fwd.second.data(),
                                         D.data(), shape, scale, part.data(), tc.kv_blocks_wanted);
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
        if (c.Tq == 0) continue;  // no device length below a query
        const DeviceLength dl(c);
        check_same_bits(run_fwd(dl.shape, "attention_tiled_fwd (device length)"), fwd);
        check_same_bits(run_bwd(dl.shape, "attention_tiled_bwd (device length)"), bwd);
        CHECK(dl.err[0] == 0);
    }
}

TEST_CASE("simt: tiled attention reports a device length outside [Tq, S] and writes nothing") {
    check_device_length_refused(
        32,
        [](const mtk::AttnShape& d, const RefusalInputs& in, FVec& o, FVec& lse) {
            mtk::attention_tiled_fwd(nullptr, o.data(), lse.data(), in.q.data(), in.k.data(),
                                     in.v.data(), d, 0.125f);
        },
        [](const mtk::AttnShape& d, const RefusalInputs& in, FVec& dq, FVec& dk, FVec& dv) {
            const AttnCase& c = in.c;
            FVec part(mtk::attn_kv_part_bytes(c.B, c.S, c.H, c.K, c.hd) / sizeof(float), NAN);
            mtk::attention_tiled_bwd(nullptr, dq.data(), dk.data(), dv.data(), in.q.data(),
                                     in.q.data(), in.k.data(), in.v.data(), in.rows.data(),
                                     in.rows.data(), d, 0.125f, part.data());
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
    CHECK(mtk::attn_kernel(false, 96, 90) == AttnKernel::tiled);
    CHECK(mtk::attn_kernel(true, 96, 86) == AttnKernel::tiled);  // no wmma kernel for 96
    CHECK(mtk::attn_kernel(false, 96, 75) == AttnKernel::scalar);
    CHECK(mtk::attn_kernel(false, 80, 90) == AttnKernel::scalar);
    for (int64_t hd : {int64_t{32}, int64_t{64}, int64_t{96}, int64_t{128}}) {
        CAPTURE(hd);
        // Within the budget at 32 / 64; hd 96 and 128 opt in (cc >= 8.0 only).
        const size_t limit = hd > 64 ? mtk::kMaxOptInShmem : mtk::kMaxDynamicShmem;
        CHECK(mtk::attn_tiled_fwd_shmem(hd) <= limit);
        CHECK(mtk::attn_tiled_bwd_shmem(hd) <= limit);
        CHECK(hd % (mtk::kAttnTiledGroupThreads * 4) == 0);  // float4 columns per thread
    }
    CHECK(mtk::attn_tiled_fwd_shmem(128) > mtk::kMaxDynamicShmem);
    // dk/dv head splits: seed-moe at B 8, T 1024 (MQA, 12 heads): 256 blocks -> 4 splits of 3.
    auto plan = [](int64_t B, int64_t S, int64_t H, int64_t K, int64_t wanted) {
        const mtk::AttnKvPlan p = mtk::attn_kv_plan(B, S, H, K, wanted);
        return std::make_pair(p.splits, p.heads_per);
    };
    CHECK(plan(8, 1024, 12, 1, mtk::kAttnKvBlocksWanted) == std::make_pair(int64_t{4}, int64_t{3}));
    CHECK(plan(16, 1024, 12, 12, mtk::kAttnKvBlocksWanted) ==
          std::make_pair(int64_t{1}, int64_t{1}));  // MHA
    CHECK(plan(1, 50, 6, 2, mtk::kAttnKvBlocksWanted) == std::make_pair(int64_t{3}, int64_t{1}));
    CHECK(plan(64, 256, 8, 1, mtk::kAttnKvBlocksWanted) ==
          std::make_pair(int64_t{2}, int64_t{4}));  // moe-mini
    CHECK(plan(1, 100, 4, 1, 8) == std::make_pair(int64_t{2}, int64_t{2}));
    CHECK(plan(1, 100, 5, 1, 8) == std::make_pair(int64_t{2}, int64_t{3}));  // 3 + 2 heads
    CHECK(plan(0, 100, 4, 1, 8) == std::make_pair(int64_t{1}, int64_t{4}));  // no block
    CHECK(mtk::attn_kv_part_bytes(16, 1024, 12, 12, 64) == 0);
    CHECK(mtk::attn_kv_part_bytes(8, 1024, 12, 1, 64) == size_t{2} * 4 * 8 * 1024 * 64 * 4);
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

// Which shapes the CUDA Device offers cuDNN's fused attention (backends/cuda/cudnn_attention.h):
// a 16-bit precision's training shapes only, on compute capability 8.0 and newer.
TEST_CASE("simt: cuDNN attention shape logic (launch.h)") {
    CHECK(mtk::attn_cudnn_shape(true, 1024, 1024, 1024, 64, false, 90));
    CHECK(mtk::attn_cudnn_shape(true, 37, 37, 37, 128, false, 80));
    CHECK(mtk::attn_cudnn_shape(true, 256, 256, 256, 8, false, 90));
    CHECK_FALSE(mtk::attn_cudnn_shape(false, 1024, 1024, 1024, 64, false, 90));  // fp32
    CHECK_FALSE(mtk::attn_cudnn_shape(true, 1, 40, 48, 64, false, 90));          // decode
    CHECK_FALSE(mtk::attn_cudnn_shape(true, 40, 40, 48, 64, false, 90));         // capacity > Tk
    CHECK_FALSE(mtk::attn_cudnn_shape(true, 3, 40, 40, 64, false, 90));    // Tq < Tk (prefill)
    CHECK_FALSE(mtk::attn_cudnn_shape(true, 40, 40, 40, 64, true, 90));    // device length
    CHECK_FALSE(mtk::attn_cudnn_shape(true, 40, 40, 40, 60, false, 90));   // hd % 8
    CHECK_FALSE(mtk::attn_cudnn_shape(true, 40, 40, 40, 136, false, 90));  // hd > 128
    CHECK_FALSE(mtk::attn_cudnn_shape(true, 40, 40, 40, 64, false, 75));   // sm_75
    CHECK_FALSE(mtk::attn_cudnn_shape(true, 0, 0, 0, 64, false, 90));      // empty
}

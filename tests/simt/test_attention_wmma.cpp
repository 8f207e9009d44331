// Harness tests of kernels_cuda/attention_wmma.cuh (tensor-core attention on the emulated
// nvcuda::wmma of simt_wmma.h) against the naive float64 reference evaluated on the operands
// rounded to the 16-bit type (bf16 and f16): MHA / GQA / MQA, head_dim 64 and 128, a KV cache
// (Tq < Tk <= S, the decode offset, Tq = 1 included), lengths that are not a multiple of a tile;
// bit-identical results under five scheduling seeds and with part of Tk as a device length;
// dk/dv head splits (launch.h attn_kv_plan) of one head and of several.
// Also the shape logic of launch.h (which kernel, shared memory within the launch budget).
#include <algorithm>
#include <cmath>
#include <tuple>

#include "attention_cases.h"  // first: the harness (simt.h)

#include "attention_wmma.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;

namespace {
const AttnCase kWmmaCases[] = {
    {1, 37, 37, 37, 2, 2, 64},   // MHA, T not a multiple of 16 or of the 64-key tile
    {2, 20, 20, 24, 4, 2, 64},   // GQA, spare cache capacity
    {1, 70, 70, 70, 2, 1, 64},   // MQA, two query blocks, keys past one tile
    {1, 33, 33, 33, 2, 1, 128},  // MQA, hd 128 (32-key tiles)
    {1, 5, 45, 48, 2, 2, 128},   // KV cache: 5 queries after 40 cached keys
    {1, 1, 50, 64, 3, 1, 64},    // a decode step: one query, 50 keys
};
constexpr uint64_t kMoreSeeds[] = {0, 3, 4};

// Rounds every element to bf16 (else f16), as the kernels do when they stage an operand.
Vec rounded(const Vec& x, bool bf16) {
    Vec r(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
        const auto f = static_cast<float>(x[i]);
        r[i] = bf16 ? moetrain::bf16_to_f32(moetrain::f32_to_bf16(f))
                    : moetrain::f16_to_f32(moetrain::f32_to_f16(f));
    }
    return r;
}

// Runs op under the two standard schedules and kMoreSeeds, requiring the same bits each time.
template <typename Op>
auto every_schedule(const std::string& what, Op op) {
    auto first = two_schedules(what, op);
    for (uint64_t seed : kMoreSeeds) {
        CAPTURE(seed);
        simt::set_seed(seed);
        INFO(what << ": result differs under another scheduling seed");
        CHECK((op() == first));
    }
    simt::set_seed(0);
    return first;
}
}  // namespace

TEST_CASE("simt: wmma attention forward matches the float64 reference of the rounded operands") {
    for (bool bf16 : {true, false}) {
        for (AttnCase c : kWmmaCases) {
            CAPTURE(bf16);
            INFO(c);
            const int64_t nq = c.nq(), nk = c.nk();
            const float scale = c.scale();
            Rng rng(static_cast<uint64_t>(c.Tq * 1000 + c.hd + c.Tk));
            const Vec q = rng.normal(nq), k = rng.normal(nk), v = rng.normal(nk);
            auto run = [&](const mtk::AttnShape& shape, const char* what) {
                return every_schedule(what, [&] {
                    FVec o(nq, NAN), lse(c.rows(), NAN), fq = to_f32(q), fk = to_f32(k),
                                                         fv = to_f32(v);
                    mtk::attention_wmma_fwd(nullptr, bf16, o.data(), lse.data(), fq.data(),
                                            fk.data(), fv.data(), shape, scale);
                    return std::make_pair(o, lse);
                });
            };
            const auto got = run(c.shape(), "attention_wmma_fwd");
            Vec wo(nq), wl(c.rows());
            ref::attention_fwd(wo, wl, rounded(q, bf16), rounded(k, bf16), rounded(v, bf16),
                               c.dims(), scale);
            // P is rounded to 16 bits before P V: a relative error of 2^-9 (bf16) / 2^-12 (f16)
            // per probability.
            const Tol tol = bf16 ? Tol{2e-2, 1e-2} : Tol{4e-3, 2e-3};
            check_close(got.first, wo, tol, "o");
            check_close(got.second, wl, Tol{1e-5, 1e-5}, "lse");

            const DeviceLength dl(c);
            check_same_bits(run(dl.shape, "attention_wmma_fwd (device length)"), got);
            CHECK(dl.err[0] == 0);
        }
    }
}

TEST_CASE("simt: wmma attention backward matches the float64 reference of the rounded operands") {
    for (bool bf16 : {true, false}) {
        for (AttnCase c : kWmmaCases)
            // The dk/dv head splits of launch.h's plan (one head each on these small grids), and
            // for 3+ query heads per kv head also splits of several heads (4 blocks wanted).
            for (int64_t wanted : {mtk::kAttnKvBlocksWanted, int64_t{4}}) {
                if (wanted == 4 && c.H / c.K < 3) continue;
                CAPTURE(bf16);
                CAPTURE(wanted);
                INFO(c);
                const moetrain::AttnDims d = c.dims();
                const int64_t nq = c.nq(), nk = c.nk(), rows = c.rows();
                const float scale = c.scale();
                Rng rng(static_cast<uint64_t>(c.Tq * 7000 + c.hd + c.Tk));
                const Vec q = rng.normal(nq), k = rng.normal(nk), v = rng.normal(nk),
                          dout = rng.normal(nq);
                const Vec rq = rounded(q, bf16), rk = rounded(k, bf16), rv = rounded(v, bf16),
                          rdo = rounded(dout, bf16);
                // o and lse of the reference (the forward is tested above); D = rowsum(dout * o)
                // in [B,H,Tq] order, as attention_bwd_dot writes it.
                Vec wo(nq), wl(rows);
                ref::attention_fwd(wo, wl, rq, rk, rv, d, scale);
                const FVec D = rowsum_dout_o(c, dout, wo);
                const FVec lse = to_f32(wl);
                const size_t part_floats =
                    mtk::attn_kv_part_bytes(c.B, c.S, c.H, c.K, c.hd, wanted) / sizeof(float);
                auto run = [&](const mtk::AttnShape& shape, const char* what) {
                    return every_schedule(what, [&] {
                        FVec dq(nq, NAN), dk(nk, NAN), dv(nk, NAN),
                            fq = to_f32(q), fk = to_f32(k), fv = to_f32(v), fd = to_f32(dout),
                            part(part_floats, NAN);
                        mtk::attention_wmma_bwd(nullptr, bf16, dq.data(), dk.data(), dv.data(),
                                                fd.data(), fq.data(), fk.data(), fv.data(),
                                                lse.data(), D.data(), shape, scale, part.data(),
                                                wanted);
                        return std::make_tuple(dq, dk, dv);
                    });
                };
                const auto got = run(c.shape(), "attention_wmma_bwd");
                Vec wdq(nq), wdk(nk), wdv(nk);
                ref::attention_bwd(wdq, wdk, wdv, rdo, rq, rk, rv, d, scale);
                // P and dS are rounded to 16 bits before the products that read them.
                const Tol tol = bf16 ? Tol{3e-2, 2e-2} : Tol{6e-3, 4e-3};
                check_close(std::get<0>(got), wdq, tol, "dq");
                check_close(std::get<1>(got), wdk, tol, "dk");
                check_close(std::get<2>(got), wdv, tol, "dv");

                const DeviceLength dl(c);
                check_same_bits(run(dl.shape, "attention_wmma_bwd (device length)"), got);
                CHECK(dl.err[0] == 0);
            }
    }
}

TEST_CASE("simt: wmma attention reports a device length outside [Tq, S] and writes nothing") {
    check_device_length_refused(
        64,
        [](const mtk::AttnShape& d, const RefusalInputs& in, FVec& o, FVec& lse) {
            mtk::attention_wmma_fwd(nullptr, true, o.data(), lse.data(), in.q.data(), in.k.data(),
                                    in.v.data(), d, 0.125f);
        },
        [](const mtk::AttnShape& d, const RefusalInputs& in, FVec& dq, FVec& dk, FVec& dv) {
            const AttnCase& c = in.c;
            FVec part(mtk::attn_kv_part_bytes(c.B, c.S, c.H, c.K, c.hd) / sizeof(float), NAN);
            mtk::attention_wmma_bwd(nullptr, false, dq.data(), dk.data(), dv.data(), in.q.data(),
                                    in.q.data(), in.k.data(), in.v.data(), in.rows.data(),
                                    in.rows.data(), d, 0.125f, part.data());
        });
}

TEST_CASE("simt: wmma attention shape logic (launch.h)") {
    using mtk::AttnKernel;
    CHECK(mtk::attn_kernel(true, 64, 90) == AttnKernel::wmma);
    CHECK(mtk::attn_kernel(true, 128, 80) == AttnKernel::wmma);
    CHECK(mtk::attn_kernel(false, 64, 90) == AttnKernel::tiled);  // fp32 attention precision
    CHECK(mtk::attn_kernel(true, 80, 90) == AttnKernel::scalar);  // head_dim without a kernel
    CHECK(mtk::attn_kernel(true, 64, 75) == AttnKernel::tiled);   // no bf16 fragments on sm_75
    for (int64_t hd : {int64_t{64}, int64_t{128}}) {
        CAPTURE(hd);
        CHECK(mtk::attn_wmma_fwd_shmem(hd) <= mtk::kMaxDynamicShmem);
        CHECK(mtk::attn_wmma_bwd_shmem(hd) <= mtk::kMaxDynamicShmem);
        CHECK(mtk::attn_wmma_ld(hd) * 2 % 16 == 0);  // WMMA ldm: a multiple of 16 bytes
        CHECK(mtk::attn_wmma_fwd_keys(hd) % 16 == 0);
        CHECK(mtk::attn_wmma_bwd_tile(hd) % 16 == 0);
    }
    const mtk::Geom g = mtk::attn_wmma_rows(70, mtk::kAttnWmmaFwdWarps, 12, 3, 1024);
    CHECK(g.gx == 2);  // 64 queries per block
    CHECK(g.gy == 12);
    CHECK(g.gz == 3);
    CHECK(g.block == 128);
    CHECK(g.shmem == 1024);
}

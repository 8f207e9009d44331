// Harness tests of kernels_cuda/attention_decode.cuh (split-K decode attention: one query per
// (batch, head) over a KV cache) against the naive float64 reference: every per-lane width (hd up
// to 32, 64, 128, 256), MHA / GQA / MQA with more query heads per kv head than one warp serves,
// Tk of one key, of a partial tile and of several chunks, chunks of several tiles, spare cache
// capacity, several sequences; bit-identical under five scheduling seeds and with part of Tk as a
// device length; a device length outside [1, S] reported with nothing written. Also the plan of
// launch.h: the chunks cover the capacity, the shared memory fits the launch budget, the geometry
// ignores Tk.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "attention_cases.h"  // first: the harness (simt.h)

#include "attention_decode.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;

namespace {
// {B, Tq, Tk, S, H, K, hd}: Tq is 1 (a decode step).
const AttnCase kDecodeCases[] = {
    {1, 1, 1, 2, 1, 1, 1},        // one cached key, the smallest head
    {2, 1, 37, 40, 4, 2, 7},      // GQA, odd hd, keys straddle a tile
    {1, 1, 50, 64, 12, 1, 64},    // MQA: 12 query heads per kv head (two row groups of 8)
    {1, 1, 300, 1024, 2, 2, 64},  // many chunks, most of the capacity unused
    {3, 1, 129, 160, 3, 3, 100},  // several sequences, 4 values per lane
    {1, 1, 70, 70, 6, 1, 130},    // 8 values per lane (4 query heads per warp), full cache
    {1, 1, 33, 40, 2, 1, 256},    // the largest head_dim (one warp per block)
};
// Chunks of several tiles (keys 160, Tk inside the last chunk's last tile): a small grid target
// gives them on a small problem (the default target needs ~1024 warps' worth of work, too slow
// for the harness under the sanitizers).
const AttnCase kLongChunks{2, 1, 290, 300, 4, 2, 16};
constexpr int64_t kLongChunksWarps = 8;
constexpr uint64_t kMoreSeeds[] = {0, 3, 4};

using Outputs = std::pair<FVec, FVec>;  // o, lse

Outputs run_decode(const AttnCase& c, const mtk::AttnShape& shape, const FVec& q, const FVec& k,
                   const FVec& v, int64_t warps = mtk::kAttnDecodeWarpsWanted) {
    const mtk::AttnDecodePlan p = mtk::attn_decode_plan(c.B, c.S, c.H, c.K, c.hd, warps);
    FVec o(c.nq(), NAN), lse(c.rows(), NAN), scratch(p.scratch / sizeof(float), NAN);
    mtk::attention_decode_fwd(nullptr, o.data(), lse.data(), q.data(), k.data(), v.data(), shape,
                              c.scale(), scratch.data(), warps);
    return {o, lse};
}

// Case c against the reference: the same bits under the standard two schedules and kMoreSeeds,
// and with Tk = 1 on the host + the rest on the device (a replayed decode step).
void check_case(const AttnCase& c, int64_t warps) {
    INFO(c);
    CAPTURE(warps);
    REQUIRE(mtk::attn_decode(c.Tq, c.S));
    Rng rng(static_cast<uint64_t>(c.Tk * 1000 + c.hd));
    const Vec q = rng.normal(c.nq()), k = rng.normal(c.nk()), v = rng.normal(c.nk());
    const FVec fq = to_f32(q), fk = to_f32(k), fv = to_f32(v);
    const Outputs got = two_schedules("attention_decode_fwd",
                                      [&] { return run_decode(c, c.shape(), fq, fk, fv, warps); });
    for (uint64_t seed : kMoreSeeds) {
        CAPTURE(seed);
        simt::set_seed(seed);
        INFO("result differs under another scheduling seed");
        CHECK((run_decode(c, c.shape(), fq, fk, fv, warps) == got));
    }
    simt::set_seed(0);
    Vec wo(c.nq()), wl(c.rows());
    ref::attention_fwd(wo, wl, q, k, v, c.dims(), c.scale());
    check_close(got.first, wo, Tol{1e-4, 1e-5}, "o");
    check_close(got.second, wl, Tol{1e-5, 1e-5}, "lse");

    const DeviceLength dl(c);
    CHECK(same_bits(run_decode(c, dl.shape, fq, fk, fv, warps).first, got.first));
    CHECK(same_bits(run_decode(c, dl.shape, fq, fk, fv, warps).second, got.second));
    CHECK(dl.err[0] == 0);
}
}  // namespace

TEST_CASE("simt: decode attention matches the float64 reference, the same bits every run") {
    for (const AttnCase& c : kDecodeCases) check_case(c, mtk::kAttnDecodeWarpsWanted);
    check_case(kLongChunks, kLongChunksWarps);
}

TEST_CASE("simt: decode attention reports a device length outside [1, S] and writes nothing") {
    const AttnCase c{1, 1, 1, 6, 2, 1, 8};
    Rng rng(5);
    const FVec q = to_f32(rng.normal(c.nq())), k = to_f32(rng.normal(c.nk())),
               v = to_f32(rng.normal(c.nk()));
    for (int32_t extra : {int32_t{-1}, int32_t{6}}) {
        CAPTURE(extra);
        const int32_t tk_dev[1] = {extra};
        IVec err = {0, 0};
        const mtk::AttnShape d{c.B, c.Tq, c.Tk, c.S, c.H, c.K, c.hd, tk_dev, err.data()};
        const Outputs got = run_decode(c, d, q, k, v);
        CHECK(err[0] == mtk::kErrAttnLength);
        CHECK(err[1] == extra);
        for (const FVec* out : {&got.first, &got.second})
            CHECK(std::all_of(out->begin(), out->end(), [](float x) { return std::isnan(x); }));
    }
}

TEST_CASE("simt: the decode attention plan covers the cache and fits the launch budget") {
    CHECK(mtk::attn_decode(1, 2));
    CHECK_FALSE(mtk::attn_decode(1, 1));   // training at T = 1: no cache
    CHECK_FALSE(mtk::attn_decode(2, 40));  // several queries: the flash kernels
    for (int64_t hd = 1; hd <= mtk::kMaxHeadDim; ++hd)
        for (auto [H, K] : {std::pair{1, 1}, std::pair{12, 1}, std::pair{32, 8}}) {
            for (int64_t S : {2, 31, 33, 1024, 40000}) {
                CAPTURE(hd);
                CAPTURE(H);
                CAPTURE(S);
                const mtk::AttnDecodePlan p = mtk::attn_decode_plan(2, S, H, K, hd);
                CHECK(p.shmem <= mtk::kMaxDynamicShmem);
                CHECK(p.warps >= 1);
                CHECK(p.keys % mtk::kAttnDecodeTile == 0);
                CHECK(p.chunks * p.keys >= S);
                CHECK((p.chunks - 1) * p.keys < S);  // no chunk wholly past the capacity
                CHECK(p.row_groups * p.rows >= H / K);
                CHECK(p.rows == mtk::attn_decode_rows(mtk::attn_lane_chunks(hd)));
                CHECK(int64_t{p.partial.gx} * p.warps >= p.chunks);
                CHECK(p.scratch == static_cast<size_t>(2 * H * p.chunks * (hd + 2)) * 4);
            }
        }
    // Longer chunks: several tiles per warp, on a small problem with a small grid target (the
    // kLongChunks case above), on a long cache with the default target.
    const AttnCase& lc = kLongChunks;
    const mtk::AttnDecodePlan longer =
        mtk::attn_decode_plan(lc.B, lc.S, lc.H, lc.K, lc.hd, kLongChunksWarps);
    CHECK(longer.keys == 160);
    CHECK(longer.chunks == 2);
    CHECK(mtk::attn_decode_plan(1, 40000, 12, 12, 64).keys == 480);
    // No sequences: no work and no scratch (the op returns before any launch).
    CHECK(mtk::attn_decode_plan(0, 64, 4, 2, 64).scratch == 0);
    // Enough warps to fill a GPU when the cache is long: gpt2 decode at batch 1, S = 1024.
    const mtk::AttnDecodePlan gpt2 = mtk::attn_decode_plan(1, 1024, 12, 12, 64);
    CHECK(gpt2.keys == 32);
    CHECK(gpt2.chunks * 12 >= 384);
}

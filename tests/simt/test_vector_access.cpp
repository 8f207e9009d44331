// Tests of the 16-byte access support: the harness's CUDA vector types (size, alignment,
// misaligned accesses throw like a GPU faults, every access is counted) and
// kernels_cuda/vector_access.cuh's split of a range by its streams' common alignment.
#include <doctest/doctest.h>

#include <vector>

#include "simt.h"
// After simt.h: the kernel-side helpers under test.
#include "vector_access.cuh"

namespace {

__global__ void copy4_kernel(float* out, const float* in) {
    mtk::store_vec(out, mtk::load_vec<float4>(in));
}

// Vector groups at the float index (bytes / 4) of `p` relative to an aligned base.
mtk::VecSplit split_at(int64_t n, std::vector<int> float_offsets) {
    alignas(16) static float base[64];
    const float* p[4] = {nullptr, nullptr, nullptr, nullptr};
    for (size_t i = 0; i < float_offsets.size(); ++i) p[i] = base + float_offsets[i];
    return mtk::vec_split(n, p[0], p[1], p[2], p[3]);
}

}  // namespace

TEST_CASE("simt: vector types have CUDA's size and alignment") {
    CHECK(sizeof(float4) == 16);
    CHECK(alignof(float4) == 16);
    CHECK(sizeof(uint4) == 16);
    CHECK(alignof(uint4) == 16);
    CHECK(sizeof(uint2) == 8);
    CHECK(alignof(uint2) == 8);
    const float4 f = make_float4(1, 2, 3, 4);
    CHECK((f.x == 1 && f.y == 2 && f.z == 3 && f.w == 4));
    const uint2 u = make_uint2(5, 6);
    CHECK((u.x == 5 && u.y == 6));
}

TEST_CASE("simt: a misaligned vector access throws, an aligned one is counted") {
    alignas(16) float in[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    alignas(16) float out[8] = {};
    const uint64_t before = simt::vector_accesses();
    MT_LAUNCH(copy4_kernel, (mtk::Geom{1, 1, 1, 1, 0}), nullptr, out + 4, in);
    CHECK(simt::vector_accesses() - before == 2);
    CHECK((out[4] == 1 && out[7] == 4 && out[0] == 0));
    CHECK_THROWS_WITH_AS(MT_LAUNCH(copy4_kernel, (mtk::Geom{1, 1, 1, 1, 0}), nullptr, out, in + 1),
                         doctest::Contains("misaligned 16-byte vector access"), simt::Error);
    CHECK_THROWS_WITH_AS(MT_LAUNCH(copy4_kernel, (mtk::Geom{1, 1, 1, 1, 0}), nullptr, out + 2, in),
                         doctest::Contains("misaligned 16-byte vector access"), simt::Error);
}

TEST_CASE("simt: vector_access splits a range by its streams' common alignment") {
    // All aligned: groups from element 0, the rest single.
    mtk::VecSplit s = split_at(11, {0, 0, 0});
    CHECK((s.n == 11 && s.head == 0 && s.groups == 2));
    CHECK(mtk::vec_singles(s) == 3);
    // A common offset of 1 element: a head of 3, then groups.
    s = split_at(11, {1, 5, 9});
    CHECK((s.head == 3 && s.groups == 2));
    // Offset 3: a head of 1.
    s = split_at(6, {3, 3});
    CHECK((s.head == 1 && s.groups == 1));
    // Streams that disagree: everything single.
    s = split_at(100, {0, 1});
    CHECK((s.head == 0 && s.groups == 0 && mtk::vec_singles(s) == 100));
    // Shorter than the head: all head.
    s = split_at(2, {1, 1});
    CHECK((s.head == 2 && s.groups == 0));
    // A null stream takes no part.
    s = split_at(8, {2});
    CHECK((s.head == 2 && s.groups == 1));

    // 16-bit and f32 streams agree when their element offsets do (8- and 16-byte groups).
    alignas(16) uint16_t h[16];
    alignas(16) float f[16];
    s = mtk::vec_split(9, mtk::VecPtr{h + 1, 2}, mtk::VecPtr{f + 1, 4});
    CHECK((s.head == 3 && s.groups == 1));
    s = mtk::vec_split(9, h + 2, f + 1);
    CHECK(s.groups == 0);
    // Fills: 16 one-byte elements per group.
    alignas(16) uint8_t bytes[64];
    s = mtk::vec_split<16>(40, bytes + 5);
    CHECK((s.head == 11 && s.groups == 1));
    CHECK(mtk::vec_singles<16>(s) == 24);
    // An address that is not a multiple of the element size never forms groups.
    s = mtk::vec_split(9, reinterpret_cast<const float*>(bytes + 2));
    CHECK(s.groups == 0);
    // Rows: every row starts a group only for dim % 4 == 0 and aligned starts.
    CHECK(mtk::rows_vectorisable(8, f, f + 4));
    CHECK_FALSE(mtk::rows_vectorisable(6, f, f + 4));
    CHECK_FALSE(mtk::rows_vectorisable(8, f, f + 1));
}

// Harness tests of kernels_cuda/kv_cache.cuh: the KV-cache append for 4-, 2- and 1-byte
// elements at host and device-side positions (awkward row lengths, T = 1, the last rows of the
// cache) against the reference, and an offset that leaves the cache reported with nothing
// written.
#include "harness_util.h"
#include "kv_cache.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;

namespace {

// Runs kv_append on elements of type E holding the values of `cache` / `rows` (small integers,
// exact in every element type) and returns the cache as doubles.
template <typename E>
Vec append_as(const Vec& cache, const Vec& rows, int64_t B, int64_t T, int64_t S, int64_t row_len,
              int64_t pos0, const int32_t* pos_dev, IVec& err) {
    std::vector<E> c(cache.begin(), cache.end()), r(rows.begin(), rows.end());
    mtk::kv_append(nullptr, c.data(), r.data(), static_cast<int>(sizeof(E)), B, T, S, row_len, pos0,
                   pos_dev, err.data());
    return Vec(c.begin(), c.end());
}

}  // namespace

TEST_CASE("simt: kv_append at host and device positions, 4/2/1-byte elements") {
    struct Case {
        int64_t B, T, S, row_len, pos0;
        int32_t dev;  // device-side part (0 and no pos_dev when -1000)
    };
    for (Case c : {Case{1, 1, 1, 1, 0, -1000}, Case{2, 3, 9, 7, 2, -1000}, Case{3, 1, 6, 130, 0, 5},
                   Case{2, 4, 11, 5, 7, -2}, Case{1, 2, 300, 33, 100, 150}}) {
        INFO("B " << c.B << " T " << c.T << " S " << c.S << " row_len " << c.row_len << " pos0 "
                  << c.pos0 << " device part " << c.dev);
        Rng rng(static_cast<uint64_t>(c.S * 31 + c.row_len));
        const Vec cache = rng.grid(c.B * c.S * c.row_len, 0, 100, 1);
        const Vec rows = rng.grid(c.B * c.T * c.row_len, 100, 200, 1);
        const int32_t pos_dev[1] = {c.dev};
        const int32_t* pd = c.dev == -1000 ? nullptr : pos_dev;
        Vec want = cache;
        ref::kv_append(want, rows, c.B, c.T, c.S, c.row_len, c.pos0 + (pd ? c.dev : 0));
        auto run = [&](auto tag) {
            using E = decltype(tag);
            return two_schedules("kv_append", [&] {
                IVec err = {0, 0};
                Vec got = append_as<E>(cache, rows, c.B, c.T, c.S, c.row_len, c.pos0, pd, err);
                CHECK(err[0] == 0);
                return got;
            });
        };
        CHECK(run(uint32_t{}) == want);
        CHECK(run(uint16_t{}) == want);
        CHECK(run(uint8_t{}) == want);
    }
}

TEST_CASE("simt: kv_append reports a device offset outside the cache and writes nothing") {
    const int64_t B = 2, T = 2, S = 5, row_len = 3;
    Rng rng(9);
    const Vec cache = rng.grid(B * S * row_len, 0, 100, 1),
              rows = rng.grid(B * T * row_len, 0, 100, 1);
    for (int32_t offset : {int32_t{-2}, int32_t{3}}) {  // rows -1..0 and 4..5 of 0..4
        CAPTURE(offset);
        const int32_t pos_dev[1] = {offset};
        IVec err = {0, 0};
        CHECK(append_as<uint32_t>(cache, rows, B, T, S, row_len, 1, pos_dev, err) == cache);
        CHECK(err[0] == mtk::kErrKvAppendPosition);
        CHECK(err[1] == offset);
    }
}

// Harness tests of kernels_cuda/embedding.cuh: lookup (overwrite / accumulate) and the
// deterministic gradient (sort by id, chunk sums, the runs crossing chunks) against a float64
// reference: many duplicate ids, one id everywhere, ids at both ends of the table, ids outside it,
// token counts around the chunk size, accumulation into a non-zero table, widths that are no
// multiple of 4 and wider than a column block, bit-identical under two interleavings.
#include "harness_util.h"

#include <limits>

#include "cuda/cub_sort.h"
#include "embedding.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;

namespace {

const mtk::RadixSortPairs kSort = moetrain::cuda::radix_sort_pairs_i32();

// embedding_bwd with its scratch: 256-byte aligned like the backend's, every byte 0xff (int -1,
// float NaN) so that a read of an entry no kernel wrote shows.
void run_embedding_bwd(FVec& dtable, int64_t rows, const FVec& dout, const IVec& ids, int64_t n,
                       int64_t dim, IVec& err) {
    const size_t temp = kSort.temp_bytes(n, mtk::embedding_key_bits(rows));
    IVec scratch(mtk::embedding_bwd_scratch_bytes(n, dim, temp) / sizeof(int32_t) + 64, -1);
    auto* p = scratch.data();
    while (reinterpret_cast<uintptr_t>(p) % 256 != 0) ++p;
    mtk::embedding_bwd(nullptr, dtable.data(), rows, dout.data(), ids.data(), n, dim, kSort, temp,
                       p, err.data());
}

// dtable[ids[t]] += dout[t] in float64 for the tokens whose id is inside the table.
Vec embedding_bwd_ref(Vec dtable, const Vec& dout, const IVec& ids, int64_t rows, int64_t dim) {
    for (size_t t = 0; t < ids.size(); ++t)
        if (ids[t] >= 0 && ids[t] < rows)
            for (int64_t c = 0; c < dim; ++c)
                dtable[static_cast<size_t>(ids[t] * dim + c)] +=
                    dout[static_cast<size_t>(static_cast<int64_t>(t) * dim + c)];
    return dtable;
}

}  // namespace

TEST_CASE("simt: embedding forward and backward") {
    const int64_t V = 11;
    for (auto [n, dim] : {std::pair<int64_t, int64_t>{1, 1}, {17, 33}, {130, 129}, {3, 300}}) {
        CAPTURE(n);
        CAPTURE(dim);
        Rng rng(static_cast<uint64_t>(n * 13 + dim));
        Vec table = rng.normal(V * dim), out0 = rng.normal(n * dim), dout = rng.normal(n * dim);
        Vec dtable0 = rng.normal(V * dim);
        IVec ids = rng.ints(n, 0, static_cast<int32_t>(V - 1));
        for (bool acc : {false, true}) {
            CAPTURE(acc);
            auto got = two_schedules("embedding_fwd", [&] {
                FVec out = to_f32(out0), ft = to_f32(table);
                IVec err = {0, 0};
                mtk::embedding_fwd(nullptr, out.data(), ft.data(), V, ids.data(), n, dim, acc,
                                   err.data());
                CHECK(err[0] == 0);
                return out;
            });
            Vec want = out0;
            ref::embedding_fwd(want, table, ids, n, dim, acc);
            check_close(got, want, Tol{}, "embedding_fwd");
        }
        auto got = two_schedules("embedding_bwd", [&] {
            FVec dt = to_f32(dtable0), fd = to_f32(dout);
            IVec err = {0, 0};
            run_embedding_bwd(dt, V, fd, ids, n, dim, err);
            CHECK(err[0] == 0);
            return dt;
        });
        Vec want = dtable0;
        ref::embedding_bwd(want, dout, ids, n, dim);
        check_close(got, want, Tol{1e-5, 1e-5}, "embedding_bwd");
    }
}

TEST_CASE("simt: embedding ids outside the table are skipped and reported") {
    const int64_t V = 5, dim = 3, n = 4;
    IVec ids = {1, 7, 0, -2};
    FVec table(V * dim, 1.0f), out(n * dim, -1.0f), dtable(V * dim, 0.0f), dout(n * dim, 1.0f);
    IVec err = {0, 0};
    mtk::embedding_fwd(nullptr, out.data(), table.data(), V, ids.data(), n, dim, false, err.data());
    CHECK(err[0] == mtk::kErrEmbeddingFwdId);
    CHECK((err[1] == 7 || err[1] == -2));
    CHECK(out[0] == 1.0f);
    CHECK(out[dim] == -1.0f);  // the bad token's row is left alone
    err = {0, 0};
    run_embedding_bwd(dtable, V, dout, ids, n, dim, err);
    CHECK(err[0] == mtk::kErrEmbeddingBwdId);
    CHECK(dtable[1 * dim] == 1.0f);
    CHECK(dtable[0] == 1.0f);
}

TEST_CASE("simt: embedding backward sort keys cover the out-of-table key") {
    // Keys 0 .. rows: `rows` marks an id outside the table and must sort after every valid id.
    CHECK(mtk::embedding_key_bits(0) == 1);
    CHECK(mtk::embedding_key_bits(1) == 1);
    CHECK(mtk::embedding_key_bits(2) == 2);
    CHECK(mtk::embedding_key_bits(63) == 6);
    CHECK(mtk::embedding_key_bits(64) == 7);
    CHECK(mtk::embedding_key_bits(50304) == 16);
    CHECK(mtk::embedding_key_bits(65536) == 17);
    CHECK(mtk::embedding_key_bits(INT32_MAX - 1) == 31);
    for (int64_t rows : {int64_t{1}, int64_t{63}, int64_t{64}, int64_t{50304}, int64_t{65536},
                         int64_t{INT32_MAX} - 1})
        CHECK((rows >> mtk::embedding_key_bits(rows)) == 0);
}

TEST_CASE("simt: embedding backward runs across chunks, invalid ids, accumulation") {
    const int64_t R = mtk::kEmbeddingChunk;
    struct Case {
        const char* what;
        int64_t rows, n, dim;
        int kind;  // 0: one id everywhere, 1: only ids 0 and rows - 1, 2: random with bad ids
    };
    const Case cases[] = {
        {"one id, one token", 9, 1, 7, 0},
        {"one id, one chunk", 9, R, 7, 0},
        {"one id, a chunk and one", 9, R + 1, 5, 0},
        {"one id, 5 chunks and a part", 9, 5 * R + 17, 7, 0},
        {"one id, two column blocks", 3, 3 * R - 1, mtk::kEmbeddingBlock + 3, 0},
        {"ids 0 and rows - 1", 64, 4 * R + 3, 6, 1},
        {"ids 0 and rows - 1, one row", 1, 2 * R + 9, 3, 1},
        {"random ids, bad ids, rows 64", 64, 7 * R + 13, 9, 2},
        {"random ids, bad ids, gpt2 vocabulary", 50304, 3 * R + 1, 3, 2},
        {"random ids, bad ids, wide rows", 13, 2 * R + 40, 2 * mtk::kEmbeddingBlock + 1, 2},
    };
    for (const Case& cs : cases) {
        CAPTURE(cs.what);
        CAPTURE(cs.n);
        CAPTURE(cs.dim);
        Rng rng(static_cast<uint64_t>(cs.n * 31 + cs.dim * 7 + cs.kind));
        const int32_t top = static_cast<int32_t>(cs.rows - 1);
        IVec ids;
        if (cs.kind == 0) {
            ids.assign(static_cast<size_t>(cs.n), top / 2);
        } else if (cs.kind == 1) {
            for (int32_t b : rng.ints(cs.n, 0, 1)) ids.push_back(b ? top : 0);
        } else {
            // Mostly few ids (long runs), some spread over the table, and ids outside it.
            const IVec bad = {-1, static_cast<int32_t>(cs.rows),
                              std::numeric_limits<int32_t>::min(),
                              std::numeric_limits<int32_t>::max(), -7};
            for (int64_t t = 0; t < cs.n; ++t) {
                const int32_t pick = rng.integer(0, 9);
                ids.push_back(pick < 5   ? rng.integer(0, 2)
                              : pick < 8 ? rng.integer(0, top)
                              : pick < 9 ? top
                                         : bad[static_cast<size_t>(rng.integer(0, 4))]);
            }
        }
        bool any_bad = false;
        for (int32_t id : ids) any_bad = any_bad || id < 0 || id >= cs.rows;
        CHECK(any_bad == (cs.kind == 2));
        const Vec dout = rng.normal(cs.n * cs.dim), dtable0 = rng.normal(cs.rows * cs.dim);
        for (bool zero_table : {true, false}) {
            CAPTURE(zero_table);
            const Vec start = zero_table ? Vec(dtable0.size(), 0.0) : dtable0;
            IVec err_seen;
            auto got = two_schedules("embedding_bwd", [&] {
                FVec dt = to_f32(start), fd = to_f32(dout);
                IVec err = {0, 0};
                run_embedding_bwd(dt, cs.rows, fd, ids, cs.n, cs.dim, err);
                err_seen = err;
                return dt;
            });
            if (any_bad) {
                CHECK(err_seen[0] == mtk::kErrEmbeddingBwdId);
                CHECK((err_seen[1] < 0 || err_seen[1] >= cs.rows));
            } else {
                CHECK(err_seen[0] == 0);
            }
            // Sums of up to ~340 float rows: a few ulps of the running sum each.
            check_close(got, embedding_bwd_ref(start, dout, ids, cs.rows, cs.dim), Tol{1e-5, 1e-5},
                        "embedding_bwd");
        }
    }
}

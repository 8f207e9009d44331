// Harness tests of kernels_cuda/embedding.cuh: lookup (overwrite / accumulate) and the
// deterministic gradient with many duplicate ids (more tokens than buckets, and fewer).
#include "harness_util.h"
#include "embedding.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;

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
            mtk::embedding_bwd(nullptr, dt.data(), V, fd.data(), ids.data(), n, dim, err.data());
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
    mtk::embedding_bwd(nullptr, dtable.data(), V, dout.data(), ids.data(), n, dim, err.data());
    CHECK(err[0] == mtk::kErrEmbeddingBwdId);
    CHECK(dtable[1 * dim] == 1.0f);
    CHECK(dtable[0] == 1.0f);
}

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
                mtk::embedding_fwd(nullptr, out.data(), ft.data(), ids.data(), n, dim, acc);
                return out;
            });
            Vec want = out0;
            ref::embedding_fwd(want, table, ids, n, dim, acc);
            check_close(got, want, Tol{}, "embedding_fwd");
        }
        auto got = two_schedules("embedding_bwd", [&] {
            FVec dt = to_f32(dtable0), fd = to_f32(dout);
            mtk::embedding_bwd(nullptr, dt.data(), fd.data(), ids.data(), n, dim);
            return dt;
        });
        Vec want = dtable0;
        ref::embedding_bwd(want, dout, ids, n, dim);
        check_close(got, want, Tol{1e-5, 1e-5}, "embedding_bwd");
    }
}

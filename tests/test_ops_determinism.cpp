// Op tests, determinism: on every device the reductions and backward ops give bit-identical
// results when repeated; on the CPU also with 1 thread versus the default thread count
// (fixed partitioning, fixed combine order; the GEMM library is not part of this check).
#include <cstdlib>
#include <thread>

#include "op_test_util.h"

using namespace moetrain;
using namespace moetrain::test;

namespace {
// Runs a set of reduction-heavy ops on dev and returns every output, concatenated.
std::vector<double> reduction_outputs(Device& dev) {
    Rng rng(77);
    const int64_t rows = 300, dim = 129, n = rows * dim;
    auto x = rng.normal(n), dy = rng.normal(n), g = rng.uniform(dim, 0.5, 1.5);
    Tensor tx = to_device(dev, x), tdy = to_device(dev, dy), tg = to_device(dev, g);
    Tensor y = zeros(dev, n), rs = zeros(dev, rows), dx = zeros(dev, n), dg = zeros(dev, dim);
    dev.rmsnorm_fwd(y, rs, tx, tg, rows, dim, 1e-5f);
    dev.rmsnorm_bwd(dx, dg, tdy, tx, tg, rs, rows, dim, false);
    Tensor db = zeros(dev, dim), s = zeros(dev, 2);
    dev.bias_grad(db, tdy, rows, dim);
    dev.sum(s.view(0, Shape{1}), tx, n, 1.0f, false);
    dev.sum_squares(s.view(1, Shape{1}), tdy, n, false);
    AttnDims a{1, 40, 40, 40, 4, 1, 16};
    const int64_t nq = 40 * 4 * 16, nk = 40 * 16;
    Tensor q = to_device(dev, rng.normal(nq)), k = to_device(dev, rng.normal(nk)),
           v = to_device(dev, rng.normal(nk));
    Tensor o = zeros(dev, nq), lse = zeros(dev, 160), dq = zeros(dev, nq), dk = zeros(dev, nk),
           dv = zeros(dev, nk);
    dev.attention_fwd(o, lse, q, k, v, a, 0.25f);
    dev.attention_bwd(dq, dk, dv, to_device(dev, rng.normal(nq)), q, k, v, o, lse, a, 0.25f);
    Tensor table = zeros(dev, 10 * dim);
    dev.embedding_bwd(table, tdy, to_device(dev, rng.ints(rows, 0, 9)), rows, dim);
    std::vector<double> all;
    for (const Tensor& t : {dx, dg, db, s, o, lse, dq, dk, dv, table}) {
        auto h = from_device(dev, t);
        all.insert(all.end(), h.begin(), h.end());
    }
    return all;
}

int default_threads() {
    if (const char* env = std::getenv("OMP_NUM_THREADS")) return std::max(1, std::atoi(env));
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}
}  // namespace

TEST_CASE("ops: determinism, repeated runs are bit-identical") {
    for_each_test_device([&](Device& dev) {
        auto first = reduction_outputs(dev);
        auto second = reduction_outputs(dev);
        check_close(second, first, Tol{0, 0}, "second run");
    });
}

TEST_CASE("ops: determinism, cpu gives the same bits with 1 thread and with all threads") {
    DeviceOptions one;
    one.threads = 1;
    auto single = reduction_outputs(*open_device("cpu", one));
    DeviceOptions all;
    all.threads = default_threads();  // also restores the process-wide OpenMP setting
    auto multi = reduction_outputs(*open_device("cpu", all));
    check_close(multi, single, Tol{0, 0}, "1 thread vs default threads");
}

// Op tests, the front door: every op checks its host arguments once, in Device (device.h,
// backends/device_checks.cpp), so a wrong argument gives the same one-line message on every
// backend. One case per op family on each available device, compared word for word, plus the
// rules that used to differ between backends (rmsnorm's dim > 0, the owner of a tensor).
#include <string>

#include "moetrain/profiling.h"
#include "op_test_util.h"

using namespace moetrain;
using namespace moetrain::test;

TEST_CASE("ops: the front door gives one message per problem on every backend") {
    std::unique_ptr<Device> other = open_device("cpu");  // a second device: foreign tensors
    for_each_test_device([&](Device& dev) {
        Tensor t = zeros(dev, 64), small = zeros(dev, 4), ints = zeros(dev, 64, DType::i32);
        // memory: dtypes and view bounds
        CHECK(error_message([&] { dev.copy(t, ints); }) == "copy: dtype mismatch (f32 <- i32)");
        Tensor past = small;
        past.offset = 2;  // 4 elements from element 2 of a 4-element buffer
        CHECK(error_message([&] { dev.fill(past, 1.0f); }) ==
              "fill: tensor 'dst' view exceeds its buffer");
        // dense algebra: element counts, the owning device, GEMM leading dimensions
        CHECK(error_message([&] { dev.add(t, small, t, 16); }) ==
              "add: tensor 'a' has 4 elements, the op needs 16");
        CHECK(error_message([&] { dev.add(t, t, zeros(*other, 16), 16); }) ==
              "add: tensor 'b' lives on another device");
        GemmArgs g;
        g.m = g.n = g.k = 4;
        g.a = g.b = g.c = t;
        g.lda = 2;
        g.ldb = g.ldc = 4;
        CHECK(error_message([&] { dev.gemm(g); }) == "gemm: lda 2 < 4");
        // embedding, normalisation (rmsnorm's dim > 0 holds on every backend now)
        CHECK(error_message([&] { dev.embedding_fwd(t, t, ints, 2, 0, false); }) ==
              "embedding_fwd: dim must be positive");
        CHECK(error_message([&] { dev.rmsnorm_fwd(t, t, t, t, 2, 0, 1e-5f); }) ==
              "rmsnorm_fwd: dim must be positive");
        // positions, KV cache, attention
        CHECK(error_message([&] { dev.rope(t, 1, 1, 2, 3, 10000.0f, 0, Tensor{}, false); }) ==
              "rope: head_dim 3 is odd");
        CHECK(error_message([&] { dev.kv_append(t, t, 1, 2, 5, 4, 4, Tensor{}); }) ==
              "kv_append: rows 4..5 exceed the capacity 5");
        AttnDims a;
        a.B = a.Tq = a.Tk = a.S = 1;
        a.H = 3;
        a.K = 2;
        a.hd = 4;
        CHECK(error_message([&] { dev.attention_fwd(t, t, t, t, t, a, 0.5f); }) ==
              "attention_fwd: n_heads 3 is not a multiple of n_kv_heads 2");
        // activations, routing, loss, reductions, optimizers, sampling
        CHECK(error_message([&] { dev.act_fwd(Act::relu, t, t, -1); }) ==
              "act_fwd: negative size -1");
        CHECK(error_message([&] {
                  dev.router_fwd(t, t, ints, t, t, Tensor{}, 2, 3, 4, RouterArgs{});
              }) == "router_fwd: top_k 4 outside 1..n_experts (3)");
        CHECK(error_message([&] { dev.cross_entropy(t, t, t, 2, 4, 1.0f, Tensor{}); }) ==
              "cross_entropy: tensor 'targets' is f32, expected i32");
        CHECK(error_message([&] { dev.sum(Tensor{}, t, 4, 1.0f, false); }) ==
              "sum: tensor 'out' is empty");
        CHECK(error_message([&] { dev.sgd(t, t, 4, 0.1f, Tensor{}, 1.0f, 1.0f); }) ==
              "sgd: clipping (clip 1) needs the gnorm_sq tensor");
        SampleArgs s;
        s.top_p = 0.0f;
        CHECK(error_message([&] { dev.sample(ints, t, 2, 4, s); }) ==
              "sample: top_p 0 outside (0, 1]");

        // A decorator's ops accept the tensors of the device it wraps, and check them the same.
        ProfilingDevice prof(dev);
        CHECK(prof.tensor_owner() == dev.tensor_owner());
        CHECK_NOTHROW(prof.add(t, t, t, 16));
        CHECK(error_message([&] { prof.add(t, small, t, 16); }) ==
              "add: tensor 'a' has 4 elements, the op needs 16");
    });
}

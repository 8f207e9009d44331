// Op tests, causal attention: attention_fwd (o and lse) and attention_bwd (dq, dk, dv) against
// the naive float64 reference for MHA, GQA, MQA, T = 1, key counts across block edges,
// KV-cache decode (Tq = 1 < Tk) and chunked prefill (Tq < Tk), with capacity S > Tk (rows >= Tk
// of dk / dv must come back zero). Tolerance rel 1e-4, abs 2e-5. With part of Tk given as a
// device-side length (AttnDims::tk_dev) the results are the same bits; a device length outside
// [Tq, S] is reported. A 16-bit attention precision (AttnDims::compute): the reference of the
// rounded operands where the device runs tensor-core kernels, the fp32 bits elsewhere. The
// kernel names a device gives (cuda: wmma, tiled, scalar, decode) and the profile labels.
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "moetrain/profiling.h"
#include "op_test_util.h"
#include "reference_ops.h"

using namespace moetrain;
using namespace moetrain::test;

namespace {
const AttnDims kAttnCases[] = {
    // B, Tq, Tk, S, H, K, hd
    {1, 1, 1, 1, 1, 1, 4},      // T = 1
    {2, 7, 7, 7, 3, 3, 8},      // MHA
    {1, 17, 17, 20, 4, 2, 16},  // GQA, capacity S > Tk
    {2, 33, 33, 33, 4, 1, 32},  // MQA
    {1, 1, 9, 12, 4, 2, 8},     // decode: one query over a KV cache
    {2, 5, 13, 16, 2, 1, 64},   // chunked prefill: Tq < Tk
    {1, 70, 70, 70, 2, 1, 64},  // more keys than one block
    {1, 3, 130, 131, 2, 2, 6},  // decode of 3 with long cache, odd head_dim
};

std::string dims_str(const AttnDims& d) {
    std::ostringstream os;
    os << "B" << d.B << " Tq" << d.Tq << " Tk" << d.Tk << " S" << d.S << " H" << d.H << " K" << d.K
       << " hd" << d.hd;
    return os.str();
}
}  // namespace

TEST_CASE("ops: attention_fwd attention_bwd MHA GQA MQA decode capacity") {
    const Tol tol{1e-4, 2e-5};
    for_each_test_device([&](Device& dev) {
        uint64_t seed = 11;
        for (const AttnDims& a : kAttnCases) {
            INFO(dims_str(a));
            const int64_t nq = a.B * a.Tq * a.H * a.hd, nk = a.B * a.S * a.K * a.hd;
            const double scale = 1.0 / std::sqrt(static_cast<double>(a.hd));
            Rng rng(seed++);
            auto q = rng.normal(nq), k = rng.normal(nk), v = rng.normal(nk), dout = rng.normal(nq);
            // Rows >= Tk of the cache hold junk the op must not read.
            for (int64_t b = 0; b < a.B; ++b)
                for (int64_t u = a.Tk; u < a.S; ++u)
                    for (int64_t c = 0; c < a.K * a.hd; ++c)
                        k[(b * a.S + u) * a.K * a.hd + c] = 1e6;
            Tensor tq = to_device(dev, q), tk = to_device(dev, k), tv = to_device(dev, v);
            Tensor to = zeros(dev, nq), tlse = zeros(dev, a.B * a.H * a.Tq);
            dev.attention_fwd(to, tlse, tq, tk, tv, a, static_cast<float>(scale));
            ref::Vec o(static_cast<size_t>(nq)), lse(static_cast<size_t>(a.B * a.H * a.Tq));
            ref::attention_fwd(o, lse, q, k, v, a, scale);
            check_close(from_device(dev, to), o, tol, "attention o");
            check_close(from_device(dev, tlse), lse, tol, "attention lse");

            auto junk = rng.normal(std::max(nq, nk));  // outputs are overwritten, not accumulated
            Tensor tdq = to_device(dev, ref::Vec(junk.begin(), junk.begin() + nq));
            Tensor tdk = to_device(dev, ref::Vec(junk.begin(), junk.begin() + nk));
            Tensor tdv = to_device(dev, ref::Vec(junk.begin(), junk.begin() + nk));
            dev.attention_bwd(tdq, tdk, tdv, to_device(dev, dout), tq, tk, tv, to, tlse, a,
                              static_cast<float>(scale));
            ref::Vec dq(static_cast<size_t>(nq)), dk(static_cast<size_t>(nk)),
                dv(static_cast<size_t>(nk));
            ref::attention_bwd(dq, dk, dv, dout, q, k, v, a, scale);
            check_close(from_device(dev, tdq), dq, tol, "attention dq");
            check_close(from_device(dev, tdk), dk, tol, "attention dk");
            check_close(from_device(dev, tdv), dv, tol, "attention dv");

            // Tk = Tq on the host, Tk - Tq on the device: bit-identical outputs.
            AttnDims ad = a;
            ad.Tk = a.Tq;
            ad.tk_dev = to_device(dev, std::vector<int32_t>{static_cast<int32_t>(a.Tk - a.Tq)});
            Tensor to2 = zeros(dev, nq), tlse2 = zeros(dev, a.B * a.H * a.Tq);
            dev.attention_fwd(to2, tlse2, tq, tk, tv, ad, static_cast<float>(scale));
            CHECK(from_device(dev, to2) == from_device(dev, to));
            CHECK(from_device(dev, tlse2) == from_device(dev, tlse));
            Tensor dq2 = zeros(dev, nq), dk2 = zeros(dev, nk), dv2 = zeros(dev, nk);
            dev.attention_bwd(dq2, dk2, dv2, to_device(dev, dout), tq, tk, tv, to, tlse, ad,
                              static_cast<float>(scale));
            CHECK(from_device(dev, dq2) == from_device(dev, tdq));
            CHECK(from_device(dev, dk2) == from_device(dev, tdk));
            CHECK(from_device(dev, dv2) == from_device(dev, tdv));
        }
    });
}

TEST_CASE("ops: attention rejects inconsistent dims") {
    for_each_test_device([&](Device& dev) {
        Tensor t = zeros(dev, 4096);
        AttnDims bad_heads{1, 2, 2, 2, 3, 2, 4};  // H % K != 0
        CHECK_THROWS_AS(dev.attention_fwd(t, t, t, t, t, bad_heads, 0.5f), Error);
        AttnDims bad_len{1, 3, 2, 2, 2, 2, 4};  // Tq > Tk
        CHECK_THROWS_AS(dev.attention_fwd(t, t, t, t, t, bad_len, 0.5f), Error);
        AttnDims bad_cap{1, 2, 3, 2, 2, 2, 4};  // Tk > S
        CHECK_THROWS_AS(dev.attention_fwd(t, t, t, t, t, bad_cap, 0.5f), Error);
        // Device lengths making Tk = Tq - 1 and S + 1: reported at once or at the next wait.
        for (int32_t extra : {int32_t{-1}, int32_t{2}}) {
            CAPTURE(extra);
            AttnDims dev_len{1, 2, 2, 3, 2, 2, 4};
            dev_len.tk_dev = to_device(dev, std::vector<int32_t>{extra});
            CHECK_THROWS_AS((dev.attention_fwd(t, t, t, t, t, dev_len, 0.5f), dev.synchronize()),
                            Error);
            CHECK_THROWS_AS(
                (dev.attention_bwd(t, t, t, t, t, t, t, t, t, dev_len, 0.5f), dev.synchronize()),
                Error);
        }
    });
}

// A 16-bit attention precision (AttnDims::compute, Model::set_attention16): a device whose
// attention_kernel says "wmma" (cuda: tensor cores) or "cudnn" (cuda: cuDNN's fused attention,
// whose outputs and gradients are 16-bit too) matches the float64 reference of the operands
// rounded to that type; every other device computes in fp32, the same bits as with
// compute = f32. Under ProfilingDevice the op is booked with its kernel variant.
TEST_CASE("ops: attention with a 16-bit attention precision") {
    const AttnDims cases[] = {
        {1, 37, 37, 37, 4, 2, 64},   // GQA, T not a multiple of a tile
        {1, 3, 40, 48, 2, 1, 128},   // MQA, decode-like Tq < Tk, capacity S > Tk
        {2, 64, 64, 64, 4, 1, 64},   // MQA training shape (seed-moe's, moe-mini's kind)
        {1, 50, 50, 50, 2, 2, 128},  // head_dim 128 training shape
    };
    for_each_test_device([&](Device& dev) {
        for (const AttnDims& base : cases)
            for (DType t : {DType::bf16, DType::f16}) {
                INFO(dims_str(base) << " " << std::string(dtype_name(t)));
                const int64_t nq = base.B * base.Tq * base.H * base.hd,
                              nk = base.B * base.S * base.K * base.hd,
                              nl = base.B * base.H * base.Tq;
                const float scale = 1.0f / std::sqrt(static_cast<float>(base.hd));
                Rng rng(static_cast<uint64_t>(base.hd + base.Tq));
                const auto q = rng.normal(nq), k = rng.normal(nk), v = rng.normal(nk),
                           dout = rng.normal(nq);
                AttnDims a = base;
                a.compute = t;
                auto run = [&](const AttnDims& d) {
                    Tensor tq = to_device(dev, q), tk = to_device(dev, k), tv = to_device(dev, v);
                    Tensor to = zeros(dev, nq), tl = zeros(dev, nl), tdq = zeros(dev, nq),
                           tdk = zeros(dev, nk), tdv = zeros(dev, nk);
                    dev.attention_fwd(to, tl, tq, tk, tv, d, scale);
                    dev.attention_bwd(tdq, tdk, tdv, to_device(dev, dout), tq, tk, tv, to, tl, d,
                                      scale);
                    return std::vector<ref::Vec>{from_device(dev, to), from_device(dev, tl),
                                                 from_device(dev, tdq), from_device(dev, tdk),
                                                 from_device(dev, tdv)};
                };
                const auto got = run(a);
                const std::string kernel = dev.attention_kernel(a);
                MESSAGE(dev.backend_name()
                        << " " << dims_str(base) << " " << std::string(dtype_name(t)) << ": "
                        << (kernel.empty() ? "-" : kernel));
                if (kernel != "wmma" && kernel != "cudnn") {
                    CHECK(got == run(base));  // fp32 attention whatever the precision
                    continue;
                }
                auto rounded = [&](const ref::Vec& x) {
                    ref::Vec r(x.size());
                    for (size_t i = 0; i < x.size(); ++i) {
                        const auto f = static_cast<float>(x[i]);
                        r[i] = t == DType::bf16 ? bf16_to_f32(f32_to_bf16(f))
                                                : f16_to_f32(f32_to_f16(f));
                    }
                    return r;
                };
                const ref::Vec rq = rounded(q), rk = rounded(k), rv = rounded(v);
                ref::Vec o(static_cast<size_t>(nq)), lse(static_cast<size_t>(nl));
                ref::attention_fwd(o, lse, rq, rk, rv, base, scale);
                ref::Vec dq(static_cast<size_t>(nq)), dk(static_cast<size_t>(nk)),
                    dv(static_cast<size_t>(nk));
                ref::attention_bwd(dq, dk, dv, rounded(dout), rq, rk, rv, base, scale);
                const Tol tol = t == DType::bf16 ? Tol{3e-2, 2e-2} : Tol{6e-3, 4e-3};
                check_close(got[0], o, tol, "o");
                check_close(got[1], lse, Tol{1e-5, 1e-5}, "lse");
                check_close(got[2], dq, tol, "dq");
                check_close(got[3], dk, tol, "dk");
                check_close(got[4], dv, tol, "dv");
            }

        ProfilingDevice prof(dev);
        AttnDims a = cases[0];
        a.compute = DType::bf16;
        const int64_t nq = a.B * a.Tq * a.H * a.hd, nk = a.B * a.S * a.K * a.hd;
        Tensor tq = zeros(dev, nq), tk = zeros(dev, nk), tv = zeros(dev, nk), to = zeros(dev, nq),
               tl = zeros(dev, a.B * a.H * a.Tq);
        prof.attention_fwd(to, tl, tq, tk, tv, a, 0.125f);
        const std::string variant = dev.attention_kernel(a);
        const auto table = prof.table();
        REQUIRE(table.size() == 1);
        CHECK(table[0].op ==
              (variant.empty() ? "attention_fwd" : "attention_fwd[" + variant + "]"));
    });
}

TEST_CASE("ops: attention rejects an attention precision other than f32, bf16, f16") {
    for_each_test_device([&](Device& dev) {
        AttnDims a{1, 2, 2, 2, 1, 1, 8};
        a.compute = DType::i32;
        Tensor q = zeros(dev, 16), o = zeros(dev, 16), l = zeros(dev, 2);
        CHECK_THROWS_WITH(dev.attention_fwd(o, l, q, q, q, a, 1.0f),
                          doctest::Contains("attention precision i32 is not f32, bf16 or f16"));
    });
}

// A decode step (one query over a longer KV cache) runs cuda's split-K decode forward: the
// device names it, and ProfilingDevice books the op under that name. Training shapes (Tq = S)
// and several queries over a cache keep the flash kernels' names (register-tiled fp32 at
// head_dim 64, scalar at 48).
TEST_CASE("ops: attention_kernel names cuda's split-K decode forward") {
    for_each_test_device([&](Device& dev) {
        const AttnDims decode{2, 1, 30, 64, 4, 2, 64}, prefill{2, 30, 30, 64, 4, 2, 64},
            one_token{1, 1, 1, 1, 4, 2, 64}, odd_head{2, 30, 30, 64, 4, 2, 48};
        // A device with several attention kernels names them all (cuda, and cudasim, which
        // runs cuda's kernels); the others name none.
        const bool named = !dev.attention_kernel(prefill).empty();
        if (named) {
            CHECK(dev.attention_kernel(decode) == "decode");
            CHECK(dev.attention_kernel(prefill) == "tiled");  // fp32, head_dim 64
            CHECK(dev.attention_kernel(one_token) == "tiled");
            CHECK(dev.attention_kernel(odd_head) == "scalar");
        } else {
            CHECK(dev.attention_kernel(decode).empty());
        }
        ProfilingDevice prof(dev);
        const int64_t nq = decode.B * decode.H * decode.hd,
                      nk = decode.B * decode.S * decode.K * decode.hd;
        Tensor tq = zeros(dev, nq), tk = zeros(dev, nk), tv = zeros(dev, nk), to = zeros(dev, nq),
               tl = zeros(dev, decode.B * decode.H);
        prof.attention_fwd(to, tl, tq, tk, tv, decode, 0.125f);
        const auto table = prof.table();
        REQUIRE(table.size() == 1);
        CHECK(table[0].op == (named ? "attention_fwd[decode]" : "attention_fwd"));
        // No sequences: nothing to do, on every device.
        AttnDims none = decode;
        none.B = 0;
        dev.attention_fwd(to, tl, tq, tk, tv, none, 0.125f);
        dev.synchronize();
    });
}

// cuDNN's attention (the cuda backend's default where cuDNN loads and takes the shape) keeps
// the backend deterministic: its backward runs cuDNN's deterministic algorithm, so the same
// inputs give the same bits. A GQA training shape with several key blocks, run twice.
TEST_CASE("ops: attention with a 16-bit precision is bit-identical run after run") {
    for_each_test_device([&](Device& dev) {
        AttnDims a{2, 192, 192, 192, 4, 2, 64};
        a.compute = DType::bf16;
        const std::string kernel = dev.attention_kernel(a);
        MESSAGE(dev.backend_name() << " 16-bit attention at " << dims_str(a) << ": "
                                   << (kernel.empty() ? "-" : kernel));
        if (kernel != "cudnn") return;  // the other kernels are covered by ops: determinism
        const int64_t nq = a.B * a.Tq * a.H * a.hd, nk = a.B * a.S * a.K * a.hd;
        Rng rng(4242);
        const auto q = rng.normal(nq), k = rng.normal(nk), v = rng.normal(nk),
                   dout = rng.normal(nq);
        auto run = [&] {
            Tensor to = zeros(dev, nq), tl = zeros(dev, a.B * a.H * a.Tq), tdq = zeros(dev, nq),
                   tdk = zeros(dev, nk), tdv = zeros(dev, nk);
            Tensor tq = to_device(dev, q), tk = to_device(dev, k), tv = to_device(dev, v);
            dev.attention_fwd(to, tl, tq, tk, tv, a, 0.125f);
            dev.attention_bwd(tdq, tdk, tdv, to_device(dev, dout), tq, tk, tv, to, tl, a, 0.125f);
            std::vector<ref::Vec> out;
            for (const Tensor& t : {to, tl, tdq, tdk, tdv}) out.push_back(from_device(dev, t));
            return out;
        };
        const auto first = run(), second = run();
        for (size_t i = 0; i < first.size(); ++i)
            check_close(second[i], first[i], Tol{0, 0}, "rerun");
    });
}

// MOETRAIN_CUDA_ATTENTION is read when a cuda device opens: a value other than cudnn or own is
// refused in one line naming it; own keeps cuDNN out (moetrain's kernels only).
TEST_CASE("ops: attention's kernel choice refuses an unknown MOETRAIN_CUDA_ATTENTION") {
    for (auto& d : test_devices()) {
        if (!records_graphs(*d.dev)) continue;  // cuda and cudasim only
        CAPTURE(d.id);
        check_env_refused(d.id, "MOETRAIN_CUDA_ATTENTION", "cudnnn",
                          "MOETRAIN_CUDA_ATTENTION=cudnnn: expected cudnn or own");
        ScopedEnv env("MOETRAIN_CUDA_ATTENTION", "own");
        auto own = open_device(d.id);
        AttnDims a{1, 64, 64, 64, 2, 2, 64};
        a.compute = DType::bf16;
        CHECK(own->attention_kernel(a) != "cudnn");
    }
}

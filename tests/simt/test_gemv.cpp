// Harness tests of kernels_cuda/gemv.cuh, the skinny products of decode: C = alpha A B^T + beta C
// (+ bias, GELU with the pre-activation kept) for 1..4 rows against the float64 reference on the
// operands rounded to the compute type; f32 / bf16 / f16 weights, f32 and 16-bit activations,
// strided rows of A (the LM head's last positions); the 16-byte and the single-element paths
// giving the same bits; and the shape rule (mtk::gemv_shape) the CUDA backend dispatches by.
#include <cmath>
#include <cstdint>
#include <vector>

#include "harness_util.h"
#include "gemv.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;
using moetrain::Act;
using moetrain::DType;
using mtk::FloatKind;

namespace {

struct GemvCase {
    int64_t m, n, k, lda;  // lda >= k: A's rows may be strided
};

// An operand stored as `kind` (f32 values, or 16-bit bit patterns), `pad` elements in front so
// its start can be misaligned.
struct Operand {
    std::vector<float> f32;
    std::vector<uint16_t> h;
    FloatKind kind;
    int64_t pad;
    const void* data() const {
        return kind == FloatKind::f32 ? static_cast<const void*>(f32.data() + pad)
                                      : static_cast<const void*>(h.data() + pad);
    }
};
Operand store(const Vec& v, FloatKind kind, int64_t pad) {
    Operand o{{}, {}, kind, pad};
    if (kind == FloatKind::f32) {
        o.f32.assign(static_cast<size_t>(pad), 0.0f);
        for (double x : v) o.f32.push_back(static_cast<float>(x));
    } else {
        o.h.assign(static_cast<size_t>(pad), 0);
        for (double x : v) {
            const auto f = static_cast<float>(x);
            o.h.push_back(kind == FloatKind::bf16 ? moetrain::f32_to_bf16(f)
                                                  : moetrain::f32_to_f16(f));
        }
    }
    return o;
}
DType dtype(FloatKind k) {
    return static_cast<DType>(static_cast<int>(k));
}

struct Result {
    FVec c, pre;
    bool operator==(const Result& o) const { return same_bits(c, o.c) && same_bits(pre, o.pre); }
};

// Runs one product; pad_a / pad_b shift A's and B's starts by that many elements.
Result run(const GemvCase& s, const Vec& a, FloatKind ak, const Vec& b, FloatKind bk,
           FloatKind compute, const Vec& c0, float beta, const Vec* bias, bool gelu, int64_t pad_a,
           int64_t pad_b, bool want_vector) {
    const Operand A = store(a, ak, pad_a), B = store(b, bk, pad_b);
    const FVec fbias = bias ? to_f32(*bias) : FVec{};
    return two_schedules("gemv", [&] {
        Result r{to_f32(c0), FVec(static_cast<size_t>(s.m * s.n), NAN)};
        mtk::GemvArgs p;
        p.a = A.data();
        p.a_kind = ak;
        p.lda = s.lda;
        p.b = B.data();
        p.b_kind = bk;
        p.ldb = s.k;
        p.c = r.c.data();
        p.ldc = s.n;
        p.m = s.m;
        p.n = s.n;
        p.k = s.k;
        p.alpha = 0.75f;
        p.beta = beta;
        p.bias = bias ? fbias.data() : nullptr;
        p.pre_act = gelu ? r.pre.data() : nullptr;
        p.compute = compute;
        CHECK(mtk::gemv_vector_path(p) == want_vector);
        mtk::gemv_rows(nullptr, p);
        return r;
    });
}

}  // namespace

TEST_CASE("simt: gemv rows against the float64 reference") {
    // k = 2056 and 1100: groups beyond one batch of kGemvBatch x 32, the last batch partial.
    const GemvCase cases[] = {{1, 37, 64, 64},    {2, 5, 100, 100},  {3, 9, 8, 8},
                              {4, 33, 769, 800},  {1, 1, 1, 1},      {4, 8, 24, 48},
                              {2, 7, 2056, 2056}, {1, 3, 1100, 1100}};
    struct Types {
        FloatKind a, b, compute;
    };
    const Types types[] = {{FloatKind::f32, FloatKind::f32, FloatKind::f32},
                           {FloatKind::f32, FloatKind::bf16, FloatKind::bf16},
                           {FloatKind::bf16, FloatKind::bf16, FloatKind::bf16},
                           {FloatKind::f32, FloatKind::f16, FloatKind::f16},
                           {FloatKind::f16, FloatKind::f16, FloatKind::f16}};
    uint64_t seed = 1;
    for (const GemvCase& s : cases)
        for (const Types& t : types)
            for (int epi = 0; epi < 4; ++epi) {  // none, beta 1, bias, bias + GELU
                CAPTURE(s.m);
                CAPTURE(s.n);
                CAPTURE(s.k);
                CAPTURE(static_cast<int>(t.b));
                CAPTURE(epi);
                Rng rng(seed++);
                const Vec a = rng.normal(s.m * s.lda), b = rng.normal(s.n * s.k);
                const Vec c0 = rng.normal(s.m * s.n), bias = rng.normal(s.n);
                const float beta = epi == 1 ? 1.0f : 0.0f;
                const bool gelu = epi == 3;
                const bool vec = s.k % 8 == 0 && s.lda % 8 == 0;
                const Result got = run(s, a, t.a, b, t.b, t.compute, c0, beta,
                                       epi >= 2 ? &bias : nullptr, gelu, 0, 0, vec);
                // The reference: every operand rounded to the compute type (16-bit storage is
                // the compute type), f32 C and bias.
                const DType cd = dtype(t.compute);
                Vec pre(static_cast<size_t>(s.m * s.n));
                for (int64_t r = 0; r < s.m; ++r)
                    for (int64_t j = 0; j < s.n; ++j) {
                        double acc = 0;
                        for (int64_t i = 0; i < s.k; ++i)
                            acc += ref::round_to(a[r * s.lda + i], cd) *
                                   ref::round_to(b[j * s.k + i], cd);
                        double v = 0.75 * acc;
                        if (beta != 0.0f) v += static_cast<float>(c0[r * s.n + j]);
                        if (epi >= 2) v += static_cast<float>(bias[j]);
                        pre[r * s.n + j] = v;
                    }
                Vec want = pre;
                if (gelu) ref::act_fwd(Act::gelu, want, pre, s.m * s.n);
                const Tol tol{1e-4, 2e-5 * std::sqrt(static_cast<double>(s.k) + 1)};
                check_close(to_f64(got.c), want, tol, "C");
                if (gelu) check_close(to_f64(got.pre), pre, tol, "pre_act");
            }
}

TEST_CASE("simt: gemv's 16-byte and single-element paths give the same bits") {
    // k % 8 == 0 and aligned rows: the 16-byte path; A or B one element off: single loads.
    const GemvCase s{3, 19, 136, 136};
    for (FloatKind bk : {FloatKind::f32, FloatKind::bf16, FloatKind::f16}) {
        CAPTURE(static_cast<int>(bk));
        const FloatKind compute = bk;
        Rng rng(40 + static_cast<uint64_t>(bk));
        const Vec a = rng.normal(s.m * s.lda), b = rng.normal(s.n * s.k);
        const Vec c0 = rng.normal(s.m * s.n), bias = rng.normal(s.n);
        const Result vec =
            run(s, a, FloatKind::f32, b, bk, compute, c0, 1.0f, &bias, true, 0, 0, true);
        const Result b_off =
            run(s, a, FloatKind::f32, b, bk, compute, c0, 1.0f, &bias, true, 0, 1, false);
        const Result a_off =
            run(s, a, FloatKind::f32, b, bk, compute, c0, 1.0f, &bias, true, 1, 0, false);
        CHECK(same_bits(vec.c, b_off.c));
        CHECK(same_bits(vec.c, a_off.c));
        CHECK(same_bits(vec.pre, a_off.pre));
    }
}

TEST_CASE("simt: gemv_shape takes the decode products only") {
    CHECK(mtk::gemv_shape(1, 2304, 768, 1, false, true));        // qkv of one token
    CHECK(mtk::gemv_shape(4, 50304, 768, 1, false, true));       // LM head, batch 4
    CHECK_FALSE(mtk::gemv_shape(5, 768, 768, 1, false, true));   // more rows: cuBLAS
    CHECK_FALSE(mtk::gemv_shape(1, 768, 768, 2, false, true));   // batched
    CHECK_FALSE(mtk::gemv_shape(1, 768, 768, 1, true, true));    // op(A) = A^T
    CHECK_FALSE(mtk::gemv_shape(1, 768, 768, 1, false, false));  // B stored [k, n]
    CHECK_FALSE(mtk::gemv_shape(1, 768, 0, 1, false, true));     // k = 0
    CHECK_FALSE(mtk::gemv_shape(0, 768, 768, 1, false, true));   // no rows
}

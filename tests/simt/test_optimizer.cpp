// Harness tests of kernels_cuda/optimizer.cuh: AdamW and SGD with clipping active, inactive and
// without a norm buffer, and a gradient scale, also with their arguments aligned, at element
// offsets and mismatched (the 16-byte and the single-element paths, vector_paths.h); 8-bit
// AdamW against the float64 reference and bit for bit against the cpu backend.
#include "harness_util.h"
#include "optimizer.cuh"
// after simt.h:
#include "adamw8bit_test_util.h"
#include "shared/mt_qmap_table.h"
#include "vector_paths.h"

using namespace simt_test;
namespace ref = moetrain::ref;

namespace {
// Random parameters, gradients and moments of n elements and the AdamW hyper-parameters of
// step 2 (as the reference and as the kernel's parameter block).
struct AdamWCase {
    Vec p0, g, m0, v0;
    moetrain::AdamWArgs a;
    mtk::AdamWParams ka;
    // Checks the kernels' AdamW p, m, v and SGD (lr 0.01) p against the reference's steps from
    // this case.
    template <typename Got>
    void check_steps(const Got& p, const Got& m, const Got& v, const Got& sgd_p, float gsq,
                     float clip, float scale) const {
        const auto n = static_cast<int64_t>(p0.size());
        Vec wp = p0, wm = m0, wv = v0, wps = p0;
        ref::adamw(wp, g, wm, wv, n, a, gsq, clip, scale);
        ref::sgd(wps, g, n, 0.01, gsq, clip, scale);
        check_close(p, wp, Tol{1e-5, 1e-6}, "adamw p");
        check_close(m, wm, Tol{1e-5, 1e-7}, "adamw m");
        check_close(v, wv, Tol{1e-5, 1e-8}, "adamw v");
        check_close(sgd_p, wps, Tol{1e-5, 1e-7}, "sgd p");
    }
};
AdamWCase adamw_case(int64_t n, uint64_t seed) {
    Rng rng(seed);
    AdamWCase c;
    c.p0 = rng.normal(n);
    c.g = rng.normal(n);
    c.m0 = rng.normal(n, 0.1);
    c.v0 = rng.uniform(n, 0.0, 0.01);
    c.a.lr = 1e-3f;
    c.a.wd = 0.1f;
    c.a.bc1 = 1.0f - 0.9f * 0.9f;
    c.a.bc2 = 1.0f - 0.95f * 0.95f;
    c.ka = {c.a.lr, c.a.b1, c.a.b2, c.a.eps, c.a.wd, c.a.bc1, c.a.bc2};
    return c;
}
}  // namespace

TEST_CASE("simt: optimizer adamw and sgd") {
    for (int64_t n : {int64_t(1), int64_t(33), int64_t(4099)}) {
        CAPTURE(n);
        const AdamWCase c = adamw_case(n, static_cast<uint64_t>(n) + 99);
        const Vec &p0 = c.p0, &g = c.g, &m0 = c.m0, &v0 = c.v0;
        const mtk::AdamWParams& ka = c.ka;
        // (gnorm_sq, clip): clipping active, inactive (norm below clip), and off without a norm.
        for (auto [gsq, clip, with_norm] : {std::tuple<float, float, bool>{400.0f, 1.0f, true},
                                            {0.25f, 1.0f, true},
                                            {0.0f, 0.0f, false}}) {
            CAPTURE(gsq);
            CAPTURE(clip);
            const float scale = 0.5f;
            auto got = two_schedules("adamw/sgd", [&] {
                FVec p = to_f32(p0), fg = to_f32(g), m = to_f32(m0), v = to_f32(v0),
                     ps = to_f32(p0);
                FVec norm = {gsq};
                const float* pn = with_norm ? norm.data() : nullptr;
                mtk::adamw(nullptr, p.data(), fg.data(), m.data(), v.data(), n, ka, pn, clip,
                           scale);
                mtk::sgd(nullptr, ps.data(), fg.data(), n, 0.01f, pn, clip, scale);
                return std::make_tuple(p, m, v, ps);
            });
            c.check_steps(std::get<0>(got), std::get<1>(got), std::get<2>(got), std::get<3>(got),
                          gsq, clip, scale);
        }
    }
}

TEST_CASE("simt: optimizer adamw8bit") {
    namespace t = moetrain::test;
    for (int64_t n : {int64_t(1), int64_t(300), int64_t(1027)}) {
        for (auto [clip, scale, with_norm] : {std::tuple<float, float, bool>{1.0f, 1.0f, true},
                                              {1000.0f, 0.5f, true},
                                              {0.0f, 1.0f, false}}) {
            CAPTURE(n);
            CAPTURE(clip);
            const t::Case c = t::random_case(n, clip, scale, static_cast<uint64_t>(n) + 3);
            const moetrain::AdamWArgs& a = c.a;
            mtk::AdamWParams ka{a.lr, a.b1, a.b2, a.eps, a.wd, a.bc1, a.bc2};
            auto got = two_schedules("adamw8bit", [&] {
                FVec p = to_f32(c.p), g = to_f32(c.g), ma = to_f32(c.s.m_absmax),
                     va = to_f32(c.s.v_absmax), norm = {static_cast<float>(c.gnorm_sq)};
                t::Codes mc = c.s.m_codes, vc = c.s.v_codes;
                mtk::adamw8bit(nullptr, p.data(), g.data(), mc.data(), vc.data(), ma.data(),
                               va.data(), moetrain::qmap_host_table(), n, ka,
                               with_norm ? norm.data() : nullptr, clip, scale);
                return std::make_tuple(p, mc, vc, ma, va);
            });
            Vec wp = c.p;
            ref::Quantized8 w = c.s;
            ref::adamw8bit(wp, c.g, w, n, a, c.gnorm_sq, clip, scale);
            check_close(std::get<0>(got), wp, Tol{2e-6, 1e-7}, "adamw8bit p");
            check_close(std::get<3>(got), w.m_absmax, Tol{1e-5, 0}, "m_absmax");
            check_close(std::get<4>(got), w.v_absmax, Tol{1e-5, 0}, "v_absmax");
            t::check_codes(std::get<1>(got), w.m_codes, w.m_x, w.m_slack, true, "m",
                           &std::get<2>(got));
            t::check_codes(std::get<2>(got), w.v_codes, w.v_x, w.v_slack, false, "v");
            // The cpu backend computes the same floats (clip 0: no norm needed either way).
            const t::Result cpu = t::run_on(t::cpu_device(), c);
            CHECK(t::same_bits(std::get<0>(got), cpu.p));
            CHECK(t::same_bits(std::get<1>(got), cpu.m_codes));
            CHECK(t::same_bits(std::get<2>(got), cpu.v_codes));
            CHECK(t::same_bits(std::get<3>(got), cpu.m_absmax));
            CHECK(t::same_bits(std::get<4>(got), cpu.v_absmax));
        }
    }
}

TEST_CASE("simt: optimizer adamw and sgd on aligned, offset and mismatched arguments") {
    for (int64_t n : vector_sizes()) {
        CAPTURE(n);
        const AdamWCase c = adamw_case(n, static_cast<uint64_t>(n) + 7);
        const Vec &p0 = c.p0, &g = c.g, &m0 = c.m0, &v0 = c.v0;
        const mtk::AdamWParams& ka = c.ka;
        const float gsq = 400.0f, clip = 1.0f, scale = 0.5f;  // clipping active
        FVec norm = {gsq};
        auto groups = [&](const Placement& pl) { return groups_possible(pl, n, 4); };
        // p: argument 0; g, m, v: the others.
        auto adamw = across_placements(
            "adamw",
            [&](const Placement& pl) {
                Placed<float> p(to_f32(p0), pl.offset(0)), fg(to_f32(g), pl.offset(1)),
                    m(to_f32(m0), pl.offset(2)), v(to_f32(v0), pl.offset(3));
                mtk::adamw(nullptr, p.data(), fg.data(), m.data(), v.data(), n, ka, norm.data(),
                           clip, scale);
                return std::make_tuple(p.values(), m.values(), v.values());
            },
            groups);
        auto sgd = across_placements(
            "sgd",
            [&](const Placement& pl) {
                Placed<float> p(to_f32(p0), pl.offset(0)), fg(to_f32(g), pl.offset(1));
                mtk::sgd(nullptr, p.data(), fg.data(), n, 0.01f, norm.data(), clip, scale);
                return p.values();
            },
            groups);
        c.check_steps(std::get<0>(adamw), std::get<1>(adamw), std::get<2>(adamw), sgd, gsq, clip,
                      scale);
    }
}

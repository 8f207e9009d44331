// Op tests of adamw8bit (8-bit AdamW, block-wise dynamic quantisation): the shared maps equal
// an independent bitsandbytes-style construction and the shared nearest-code search agrees with
// a linear scan at every decision boundary; on every device the op matches the float64
// reference (codes equal, or within the fp32 rounding slack of a decision boundary; p and the
// block absmax close) and is bit-identical to the cpu backend; a zero state's first step is
// the fp32 AdamW element update bit for bit, and its state that update's moments quantised.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "adamw8bit_test_util.h"
#include "cpu/cpu_qmap_search.h"
#include "shared/mt_math.h"
#include "shared/mt_qmap_table.h"

using namespace moetrain;
using namespace moetrain::test;

TEST_CASE("ops: adamw8bit quantisation maps and nearest-code search") {
    std::vector<float> table(MT_QMAP_LEN);
    mt_qmap_fill(table.data());
    // The same bits, not just equal values (-0.0f and 0.0f differ here).
    // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison)
    CHECK(std::memcmp(table.data(), qmap_host_table(), MT_QMAP_LEN * sizeof(float)) == 0);
    for (int sgn = 0; sgn < 2; ++sgn) {
        const bool is_signed = sgn == 1;
        CAPTURE(is_signed);
        const float* map = table.data() + (is_signed ? 0 : MT_QMAP_UNSIGNED);
        for (int c = 0; c < 256; ++c) {
            CAPTURE(c);
            CHECK(map[c] == static_cast<float>(ref::qmap(is_signed, c)));  // bnb construction
            if (c > 0) CHECK(map[c - 1] < map[c]);                         // strictly sorted
            CHECK(mt_qmap_encode(map, map[c]) == c);
        }
        CHECK(map[255] == 1.0f);
        CHECK(map[is_signed ? 127 : 0] == 0.0f);  // zero is exact
        if (is_signed) CHECK(map[0] == doctest::Approx(-0.99296875).epsilon(1e-6));
        CHECK(mt_qmap_encode(map, -2.0f) == 0);
        CHECK(mt_qmap_encode(map, 2.0f) == 255);
        CHECK(mt_quantize(map, 0.5f, 0.0f) == (is_signed ? 127 : 0));  // empty block
        // At, and one float either side of, every decision boundary the binary search picks
        // what a linear scan picks (exact ties go to the lower code).
        for (int c = 0; c < 255; ++c) {
            const float mid = static_cast<float>((double{map[c]} + map[c + 1]) / 2);
            for (float x : {mid, std::nextafter(mid, -1.0f), std::nextafter(mid, 2.0f)}) {
                CAPTURE(x);
                CHECK(mt_qmap_encode(map, x) == ref::qmap_nearest(is_signed, x));
            }
        }
    }
}

TEST_CASE("ops: adamw8bit cpu table search gives the binary search's codes") {
    std::vector<float> table(MT_QMAP_LEN);
    mt_qmap_fill(table.data());
    auto bits_to_float = [](uint32_t u) {
        float x;
        std::memcpy(&x, &u, sizeof x);
        return x;
    };
    for (int sgn = 0; sgn < 2; ++sgn) {
        CAPTURE(sgn);
        const float* map = table.data() + (sgn ? 0 : MT_QMAP_UNSIGNED);
        const cpu::QmapSearch search(map);
        std::vector<float> xs = {0.0f,  -0.0f,  INFINITY, -INFINITY, NAN,   2.0f,
                                 -2.0f, 1e-30f, -1e-30f,  3e38f,     -3e38f};
        auto around = [&](float x) {  // x and its two float neighbours either side
            float lo = x, hi = x;
            xs.push_back(x);
            for (int k = 0; k < 2; ++k) {
                xs.push_back(lo = std::nextafter(lo, -INFINITY));
                xs.push_back(hi = std::nextafter(hi, INFINITY));
            }
        };
        for (size_t b = 0; b < cpu::QmapSearch::kBuckets; ++b)  // bucket edges, both signs
            for (uint32_t u : {cpu::QmapSearch::bucket_min(b), cpu::QmapSearch::bucket_max(b)}) {
                around(bits_to_float(u));
                around(bits_to_float(u | 0x80000000u));
            }
        for (int c = 0; c < 256; ++c) {  // map entries and the midpoints (the transitions)
            around(map[c]);
            if (c < 255) around(static_cast<float>((double{map[c]} + map[c + 1]) / 2));
        }
        for (uint32_t u = 0; u < 0x40000000u; u += 4099) {  // a sweep of all of (-2, 2)
            xs.push_back(bits_to_float(u));
            xs.push_back(bits_to_float(u | 0x80000000u));
        }
        Rng rng(17);
        for (double x : rng.uniform(200000, -1.1, 1.1)) xs.push_back(static_cast<float>(x));
        int mismatches = 0;
        for (float x : xs)
            if (search.encode(x) != mt_qmap_encode(map, x) && ++mismatches <= 5) {
                INFO("x = " << x << " (bits " << std::hex << std::bit_cast<uint32_t>(x) << ")");
                CHECK(search.encode(x) == mt_qmap_encode(map, x));
            }
        MESSAGE((sgn ? "signed" : "unsigned")
                << " map: " << xs.size() << " values, " << mismatches << " mismatches");
        CHECK(mismatches == 0);
    }
}

TEST_CASE("ops: adamw8bit matches the float64 reference and the cpu backend") {
    for (auto& d : test_devices()) {
        CAPTURE(d.id);
        Device& dev = *d.dev;
        int differ = 0, total = 0;
        for (int64_t n : {int64_t{1}, int64_t{256}, int64_t{257}, int64_t{1027}, int64_t{4099}}) {
            for (auto [clip, gscale] : {std::pair{0.0f, 1.0f}, {1.0f, 1.0f}, {1000.0f, 0.25f}}) {
                CAPTURE(n);
                CAPTURE(clip);
                CAPTURE(gscale);
                const Case c = random_case(n, clip, gscale, static_cast<uint64_t>(n) * 7 + 1);
                const Result got = run_on(dev, c);
                ref::Vec wp = c.p;
                ref::Quantized8 w = c.s;
                ref::adamw8bit(wp, c.g, w, n, c.a, c.gnorm_sq, clip, gscale);
                check_close(ref::Vec(got.p.begin(), got.p.end()), wp, Tol{2e-6, 1e-7}, "p");
                check_close(ref::Vec(got.m_absmax.begin(), got.m_absmax.end()), w.m_absmax,
                            Tol{1e-5, 0}, "m_absmax");
                check_close(ref::Vec(got.v_absmax.begin(), got.v_absmax.end()), w.v_absmax,
                            Tol{1e-5, 0}, "v_absmax");
                differ +=
                    check_codes(got.m_codes, w.m_codes, w.m_x, w.m_slack, true, "m", &got.v_codes);
                differ += check_codes(got.v_codes, w.v_codes, w.v_x, w.v_slack, false, "v");
                total += static_cast<int>(2 * n);
                if (dev.backend_name() != "cpu") {  // same float operations: same bits
                    const Result cpu = run_on(cpu_device(), c);
                    CHECK(same_bits(got.p, cpu.p));
                    CHECK(same_bits(got.m_codes, cpu.m_codes));
                    CHECK(same_bits(got.v_codes, cpu.v_codes));
                    CHECK(same_bits(got.m_absmax, cpu.m_absmax));
                    CHECK(same_bits(got.v_absmax, cpu.v_absmax));
                }
            }
        }
        MESSAGE(d.id << ": adamw8bit codes differing from the float64 reference (all within "
                        "the rounding slack of a boundary): "
                     << differ << " of " << total);
        CHECK(differ * 100 < total);  // boundary cases are rare

        // Argument errors name the tensor.
        const Case c = random_case(300, 0.0f, 1.0f, 5);
        Tensor tp = to_device(dev, c.p), tg = to_device(dev, c.g);
        Tensor codes = codes_to_device(dev, c.s.m_codes), absmax = to_device(dev, c.s.m_absmax);
        Tensor short_absmax = to_device(dev, ref::Vec{0.0});
        CHECK_THROWS_WITH_AS(dev.adamw8bit(tp, tg, tp, codes, absmax, absmax, 300, c.a, {}, 0, 1),
                             doctest::Contains("m_codes"), Error);
        CHECK_THROWS_WITH_AS(
            dev.adamw8bit(tp, tg, codes, codes, short_absmax, absmax, 300, c.a, {}, 0, 1),
            doctest::Contains("m_absmax"), Error);
    }
}

namespace {
// lr 1e-3, wd 0.1 and the bias corrections of step s (b1 0.9, b2 0.95).
AdamWArgs step_args(int s) {
    AdamWArgs a;
    a.lr = 1e-3f;
    a.wd = 0.1f;
    a.bc1 = 1.0f - std::pow(0.9f, static_cast<float>(s));
    a.bc2 = 1.0f - std::pow(0.95f, static_cast<float>(s));
    return a;
}

// p and a zero-filled 8-bit state on a device; step() runs adamw8bit without clipping.
struct FreshState {
    Device& dev;
    int64_t n;
    Tensor p, m_codes, v_codes, m_absmax, v_absmax;
    FreshState(Device& d, const ref::Vec& p0)
        : dev(d),
          n(static_cast<int64_t>(p0.size())),
          p(to_device(d, p0)),
          m_codes(d.alloc(DType::u8, {n})),
          v_codes(d.alloc(DType::u8, {n})),
          m_absmax(zeros(d, (n + 255) / 256)),
          v_absmax(zeros(d, (n + 255) / 256)) {}
    void step(const ref::Vec& g, const AdamWArgs& a) {
        dev.adamw8bit(p, to_device(dev, g), m_codes, v_codes, m_absmax, v_absmax, n, a, {}, 0.0f,
                      1.0f);
    }
};
}  // namespace

TEST_CASE("ops: adamw8bit from a zero state takes the fp32 AdamW first step bit for bit") {
    for_each_test_device([&](Device& dev) {
        const int64_t n = 1500;
        Rng rng(11);
        const ref::Vec p = rng.normal(n), g = rng.normal(n, 0.01);
        const AdamWArgs a = step_args(1);
        FreshState st(dev, p);
        st.step(g, a);
        // The fp32 AdamW element update (mt_math.h, no FMA contraction) from m = v = 0.
        std::vector<float> want(p.begin(), p.end()), m(static_cast<size_t>(n)), v(m);
        for (int64_t i = 0; i < n; ++i)
            mt_adamw_update(&want[i], &m[i], &v[i], static_cast<float>(g[i]), a.lr, a.b1, a.b2,
                            a.eps, a.wd, a.bc1, a.bc2);
        CHECK(same_bits(floats_from_device(dev, st.p), want));
        // The stored state is those moments, quantised with their block maxima.
        const std::vector<float> am = floats_from_device(dev, st.m_absmax),
                                 av = floats_from_device(dev, st.v_absmax);
        const Codes m_codes = codes_from_device(dev, st.m_codes),
                    v_codes = codes_from_device(dev, st.v_codes);
        for (int64_t b = 0; b * 256 < n; ++b) {
            const int64_t i0 = b * 256, i1 = std::min(n, i0 + 256);
            float m_max = 0, v_max = 0;
            for (int64_t i = i0; i < i1; ++i) {
                m_max = std::max(m_max, std::fabs(m[i]));
                v_max = std::max(v_max, v[i]);
            }
            CHECK(am[b] == m_max);
            CHECK(av[b] == v_max);
            for (int64_t i = i0; i < i1; ++i) {
                int m_code, v_code;
                mt_requantize(qmap_host_table(), m[i], v[i], m_max, v_max, &m_code, &v_code);
                CHECK(m_codes[i] == m_code);
                CHECK(v_codes[i] == v_code);
            }
        }
    });
}

TEST_CASE("ops: adamw8bit stores no m without v (a step without gradient stays bounded)") {
    // Element 0 has a gradient 1e-5 of its block's largest: its v (~1e-10 of the block's
    // absmax) rounds to 0, while its m (~1e-5) would not. Were m kept, the next step without a
    // gradient for it (an expert that got no tokens) would move it by lr * m_hat / eps ~ 0.5.
    for_each_test_device([&](Device& dev) {
        Rng rng(3);
        ref::Vec g = rng.normal(256);
        g[0] = 1e-5;
        FreshState st(dev, rng.normal(256));
        st.step(g, step_args(1));
        CHECK(codes_from_device(dev, st.v_codes)[0] == 0);
        CHECK(codes_from_device(dev, st.m_codes)[0] == 127);  // the code of 0
        const float p1 = floats_from_device(dev, st.p)[0];
        g[0] = 0.0;
        st.step(g, step_args(2));
        const float p2 = floats_from_device(dev, st.p)[0];
        CHECK(p2 == doctest::Approx(p1 - 1e-3 * 0.1 * p1).epsilon(1e-6));  // weight decay only
    });
}

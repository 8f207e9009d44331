// Helpers of the adamw8bit op tests (tests/test_ops_adamw8bit.cpp and the SIMT harness test
// tests/simt/test_optimizer.cpp): a random op case on the host, running it on a Device, and
// the check of quantisation codes against the float64 reference (equal, or within the fp32
// rounding slack of a decision boundary).
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "moetrain/backend.h"
#include "op_test_util.h"
#include "reference_ops.h"

namespace moetrain::test {

using Codes = std::vector<uint8_t>;

inline Tensor codes_to_device(Device& dev, const Codes& c) {
    Tensor t = dev.alloc(DType::u8, Shape{static_cast<int64_t>(c.size())});
    dev.upload(t, c.data());
    return t;
}
inline Codes codes_from_device(Device& dev, const Tensor& t) {
    Codes c(static_cast<size_t>(t.numel()));
    dev.download(c.data(), t);
    return c;
}
inline std::vector<float> floats_from_device(Device& dev, const Tensor& t) {
    std::vector<float> f(static_cast<size_t>(t.numel()));
    dev.download(f.data(), t);
    return f;
}
template <typename T>
inline bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

inline Device& cpu_device() {
    static std::unique_ptr<Device> cpu = open_device("cpu");
    return *cpu;
}

// The host side of one adamw8bit call and what the device returned.
struct Case {
    int64_t n = 0;
    ref::Vec p, g;
    ref::Quantized8 s;
    AdamWArgs a;
    float clip = 0, gscale = 1;
    double gnorm_sq = 0;
};
struct Result {
    std::vector<float> p, m_absmax, v_absmax;
    Codes m_codes, v_codes;
};

inline Result run_on(Device& dev, const Case& c) {
    Tensor tp = to_device(dev, c.p), tg = to_device(dev, c.g);
    Tensor mc = codes_to_device(dev, c.s.m_codes), vc = codes_to_device(dev, c.s.v_codes);
    Tensor ma = to_device(dev, c.s.m_absmax), va = to_device(dev, c.s.v_absmax);
    Tensor gn = to_device(dev, ref::Vec{c.gnorm_sq});
    dev.adamw8bit(tp, tg, mc, vc, ma, va, c.n, c.a, gn, c.clip, c.gscale);
    return {floats_from_device(dev, tp), floats_from_device(dev, ma), floats_from_device(dev, va),
            codes_from_device(dev, mc), codes_from_device(dev, vc)};
}

inline Case random_case(int64_t n, float clip, float gscale, uint64_t seed) {
    Rng rng(seed);
    Case c;
    c.n = n;
    c.clip = clip;
    c.gscale = gscale;
    c.p = rng.normal(n);
    c.g = rng.normal(n);
    const int64_t blocks = (n + 255) / 256;
    for (int32_t v : rng.ints(n, 0, 255)) c.s.m_codes.push_back(static_cast<uint8_t>(v));
    for (int32_t v : rng.ints(n, 0, 255)) c.s.v_codes.push_back(static_cast<uint8_t>(v));
    c.s.m_absmax = rng.uniform(blocks, 0.0, 0.2);
    c.s.v_absmax = rng.uniform(blocks, 0.0, 0.05);
    c.s.m_absmax[0] = c.s.v_absmax[0] = 0.0;  // a fresh block
    ref::Vec gn{0};
    ref::sum_squares(gn, c.g, n, false);
    c.gnorm_sq = static_cast<float>(gn[0]);
    c.a.lr = 3e-3f;
    c.a.wd = 0.1f;
    c.a.bc1 = 1.0f - std::pow(0.9f, 4.0f);
    c.a.bc2 = 1.0f - std::pow(0.95f, 4.0f);
    return c;
}

// Codes that differ from the reference's are allowed only within the fp32 rounding slack of a
// decision boundary; returns how many differ at all. For m codes, got_v holds the device's v
// codes: where one is 0 the m code must be the code of 0 (127), whatever m was.
inline int check_codes(const Codes& got, const Codes& want, const ref::Vec& x,
                       const ref::Vec& slack, bool is_signed, const char* what,
                       const Codes* got_v = nullptr) {
    int differ = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        if (got[i] == want[i]) continue;
        ++differ;
        if (got_v && (*got_v)[i] == 0) {
            INFO(what << " code at " << i << ": v rounds to 0 here, so m must be the zero code");
            CHECK(int{got[i]} == 127);
            continue;
        }
        INFO(what << " code at " << i << ": got " << int{got[i]} << ", reference " << int{want[i]}
                  << " for x = " << x[i] << " (slack " << slack[i] << ")");
        CHECK(ref::code_within_slack(is_signed, got[i], x[i], slack[i]));
    }
    return differ;
}

}  // namespace moetrain::test

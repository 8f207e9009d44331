// What the harness tests of the two attention kernels (test_attention.cpp: the scalar kernel of
// attention.cuh; test_attention_wmma.cpp: the tensor-core one of attention_wmma.cuh) share: a
// case's shape and sizes, the same case with part of Tk read from device memory (which must
// give the same bits), and the refusal of a device length outside [Tq, S].
#pragma once

#include <algorithm>
#include <cmath>
#include <ostream>
#include <tuple>
#include <utility>

#include "harness_util.h"  // first: simt.h defines what the .cuh files need

#include "attention_shape.cuh"

namespace simt_test {

struct AttnCase {
    int64_t B, Tq, Tk, S, H, K, hd;
    moetrain::AttnDims dims() const { return {B, Tq, Tk, S, H, K, hd}; }
    mtk::AttnShape shape() const { return {B, Tq, Tk, S, H, K, hd}; }
    int64_t nq() const { return B * Tq * H * hd; }  // q, o, dq, dout
    int64_t nk() const { return B * S * K * hd; }   // k, v, dk, dv (the cache capacity S)
    int64_t rows() const { return B * H * Tq; }     // lse
    float scale() const { return 1.0f / std::sqrt(static_cast<float>(hd)); }
};
inline std::ostream& operator<<(std::ostream& os, const AttnCase& c) {
    return os << "B=" << c.B << " Tq=" << c.Tq << " Tk=" << c.Tk << " S=" << c.S << " H=" << c.H
              << " K=" << c.K << " hd=" << c.hd;
}

// D = rowsum(dout * o) per query row in [B,H,Tq] order, as attention_bwd_dot writes it (the
// backward kernels' input), from the reference's o.
inline FVec rowsum_dout_o(const AttnCase& c, const Vec& dout, const Vec& o) {
    FVec D(c.rows());
    for (int64_t b = 0; b < c.B; ++b)
        for (int64_t t = 0; t < c.Tq; ++t)
            for (int64_t h = 0; h < c.H; ++h) {
                double acc = 0;
                for (int64_t e = 0; e < c.hd; ++e) {
                    const int64_t i = ((b * c.Tq + t) * c.H + h) * c.hd + e;
                    acc += dout[i] * o[i];
                }
                D[(b * c.H + h) * c.Tq + t] = static_cast<float>(acc);
            }
    return D;
}

// The case's shape with Tk = Tq on the host and Tk - Tq in device memory (AttnShape::tk_dev),
// errors reported into err. It points into itself: not copied.
struct DeviceLength {
    explicit DeviceLength(const AttnCase& c) : tk_dev{static_cast<int32_t>(c.Tk - c.Tq)} {
        shape = c.shape();
        shape.Tk = c.Tq;
        shape.tk_dev = tk_dev;
        shape.err = err.data();
    }
    DeviceLength(const DeviceLength&) = delete;
    DeviceLength& operator=(const DeviceLength&) = delete;
    int32_t tk_dev[1];
    IVec err = {0, 0};
    mtk::AttnShape shape;
};

// Every member of two results (a pair or a tuple of vectors) is bit-identical.
template <typename Tuple, size_t... I>
void check_same_bits_at(const Tuple& a, const Tuple& b, std::index_sequence<I...> /*members*/) {
    const bool same[] = {same_bits(std::get<I>(a), std::get<I>(b))...};
    for (size_t i = 0; i < sizeof...(I); ++i) {
        CAPTURE(i);
        CHECK(same[i]);
    }
}
template <typename Tuple>
void check_same_bits(const Tuple& a, const Tuple& b) {
    check_same_bits_at(a, b, std::make_index_sequence<std::tuple_size_v<Tuple>>{});
}

// The operands of check_device_length_refused's case: random q, k, v and a zero per query row
// (for the backward's log-sum-exp and D, unread there).
struct RefusalInputs {
    AttnCase c;
    FVec q, k, v, rows;
};

// A device length that leaves [Tq, S] (Tk < Tq, then Tk > S): `fwd(shape, in, o, lse)` and
// `bwd(shape, in, dq, dk, dv)` must report kErrAttnLength with the length and write nothing.
template <typename Fwd, typename Bwd>
void check_device_length_refused(int64_t hd, Fwd fwd, Bwd bwd) {
    const int64_t B = 1, Tq = 2, S = 6, H = 2, K = 1;
    const AttnCase c{B, Tq, Tq, S, H, K, hd};
    Rng rng(3);
    const RefusalInputs in{c, to_f32(rng.normal(c.nq())), to_f32(rng.normal(c.nk())),
                           to_f32(rng.normal(c.nk())), FVec(c.rows(), 0.0f)};
    for (int32_t extra : {int32_t{-1}, int32_t{3}}) {
        CAPTURE(extra);
        const int32_t tk_dev[1] = {extra};
        IVec err = {0, 0};
        const mtk::AttnShape d{B, Tq, extra < 0 ? Tq : S - 2, S, H, K, hd, tk_dev, err.data()};
        FVec o(c.nq(), NAN), lse(c.rows(), NAN), dq(c.nq(), NAN), dk(c.nk(), NAN), dv(c.nk(), NAN);
        fwd(d, in, o, lse);
        CHECK(err[0] == mtk::kErrAttnLength);
        CHECK(err[1] == extra);
        err = {0, 0};
        bwd(d, in, dq, dk, dv);
        CHECK(err[0] == mtk::kErrAttnLength);
        for (const FVec* out : {&o, &lse, &dq, &dk, &dv})
            CHECK(std::all_of(out->begin(), out->end(), [](float x) { return std::isnan(x); }));
    }
}

}  // namespace simt_test

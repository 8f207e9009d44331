// Checks shared by the MoE op tests (test_ops_moe.cpp, test_ops_moe_routing.cpp): moe_sort and
// moe_combine on a device against the float64 reference, for selections with or without
// dropped ones (-1). Named test_ops_* so that the op-coverage test (test_ops_coverage.cpp) sees
// the op calls made here.
#pragma once

#include <initializer_list>
#include <string>

#include "op_test_util.h"
#include "reference_ops.h"

namespace moetrain::test {

// One case of the sort / combine tests: N tokens with k selections each among E experts, rows
// of dim values, and the per-expert capacity (0: none; the dropping tests only).
struct MoeCase {
    int64_t N, k, E, dim, capacity;
};

// Runs body(dev, case, rng) on every test device for every case; rng is seeded first_seed,
// first_seed + 1, ... in case order, on each device alike.
template <typename Body>
void for_each_moe_case(std::initializer_list<MoeCase> cases, uint64_t first_seed, Body&& body) {
    for (auto& d : test_devices()) {
        CAPTURE(d.id);
        uint64_t seed = first_seed;
        for (const MoeCase& c : cases) {
            CAPTURE(c.N);
            CAPTURE(c.k);
            CAPTURE(c.dim);
            CAPTURE(c.capacity);
            Rng rng(seed++);
            body(*d.dev, c, rng);
        }
    }
}

// k distinct experts per token: token n's first is first(n) mod E, the next ones 3, 6, ...
// further on (mod E).
template <typename First>
ref::IVec spread_selections(const MoeCase& c, First first) {
    ref::IVec idx(static_cast<size_t>(c.N * c.k));
    for (int64_t n = 0; n < c.N; ++n)
        for (int64_t j = 0; j < c.k; ++j)
            idx[n * c.k + j] = static_cast<int32_t>((first(n) + j * 3) % c.E);
    return idx;
}

// The reference's sort and the device's slot_row, after both were checked equal.
struct MoeSorted {
    ref::IVec counts, row_token, slot_row;
    Tensor device_slot_row;
};

// moe_sort of the selections `idx` on `dev`: counts (which start at 99, so that an expert the
// op does not write shows), row_token and slot_row must equal the reference's exactly.
inline MoeSorted check_moe_sort(Device& dev, const ref::IVec& idx, int64_t N, int64_t k, int64_t E,
                                const std::string& counts_what) {
    const auto nk = static_cast<size_t>(N * k);
    Tensor tc = to_device(dev, ref::IVec(static_cast<size_t>(E), 99));
    Tensor trt = to_device(dev, ref::IVec(nk, 99));
    Tensor tsr = zeros(dev, N * k, DType::i32);
    dev.moe_sort(tc, trt, tsr, to_device(dev, idx), N, k, E);
    MoeSorted s{ref::IVec(static_cast<size_t>(E)), ref::IVec(nk), ref::IVec(nk), tsr};
    ref::moe_sort(s.counts, s.row_token, s.slot_row, idx, N, k, E);
    check_equal(from_device_i32(dev, tc), s.counts, counts_what);
    check_equal(from_device_i32(dev, trt), s.row_token, "moe_sort row_token");
    check_equal(from_device_i32(dev, tsr), s.slot_row, "moe_sort slot_row");
    return s;
}

// The expert outputs of the N * k selections and their routing weights, on the host and on
// the device.
struct MoeExpertOutputs {
    const ref::Vec &expert_out, &w;
    Tensor t_expert_out, t_w;
};

// moe_combine into y0, weighted and not, overwriting and accumulating, against the reference.
inline void check_moe_combine(Device& dev, const MoeExpertOutputs& o, const ref::IVec& slot_row,
                              const Tensor& tsr, const ref::Vec& y0, int64_t N, int64_t k,
                              int64_t dim) {
    for (bool weighted : {true, false})
        for (bool acc : {false, true}) {
            CAPTURE(weighted);
            CAPTURE(acc);
            Tensor ty = to_device(dev, y0);
            dev.moe_combine(ty, o.t_expert_out, tsr, weighted ? o.t_w : Tensor{}, N, k, dim, acc);
            auto y = y0;
            ref::moe_combine(y, o.expert_out, slot_row, weighted ? o.w : ref::Vec{}, N, k, dim,
                             acc);
            check_close(from_device(dev, ty), y, Tol{}, "moe_combine");
        }
}

}  // namespace moetrain::test

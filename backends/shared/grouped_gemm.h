// Host code shared by every backend's Device::gemm_grouped (api/moetrain/device.h): the
// argument checks (one set of error messages on every backend), the operand spans the capacity
// covers, and the host loop that runs the grouped product as one gemm() per group once the
// group sizes are readable on the host (cpu reads them in place, opencl downloads them).
#pragma once

#include <algorithm>
#include <cstdint>

#include "moetrain/device.h"
#include "moetrain/error.h"
#include "shared/gemm_dtypes.h"

namespace moetrain {

// The capacity: the rows the groups may fill at most (g.m for dim m, g.k for dim k).
inline int64_t grouped_capacity(const GemmArgs& g, GroupDim dim) {
    return dim == GroupDim::m ? g.m : g.k;
}

inline const char* group_dim_name(GroupDim dim) {
    return dim == GroupDim::m ? "m" : "k";
}

// Elements each operand must hold at the capacity (0 for an empty operand).
struct GroupedSpans {
    int64_t a = 0, b = 0, c = 0;
};
inline GroupedSpans grouped_spans(const GemmArgs& g, int64_t groups, GroupDim dim) {
    const int64_t cap = grouped_capacity(g, dim);
    if (dim == GroupDim::m) {
        const int64_t b_rows = g.tb == Trans::N ? g.k : g.n, b_cols = g.tb == Trans::N ? g.n : g.k;
        return {gemm_span(1, 0, cap, g.k, g.lda),
                groups > 0 ? gemm_span(groups, g.stride_b, b_rows, b_cols, g.ldb) : 0,
                gemm_span(1, 0, cap, g.n, g.ldc)};
    }
    return {gemm_span(1, 0, cap, g.m, g.lda), gemm_span(1, 0, cap, g.n, g.ldb),
            groups > 0 ? gemm_span(groups, g.stride_c, g.m, g.n, g.ldc) : 0};
}

// Throws moetrain::Error (one line naming the problem) when the arguments break the
// gemm_grouped contract; the group sizes themselves are checked where they are read.
inline void check_grouped_args(const GemmArgs& g, const Tensor& group_rows, int64_t groups,
                               GroupDim dim) {
    check_gemm_dtypes(g);
    const char* d = group_dim_name(dim);
    MT_CHECK(g.m >= 0 && g.n >= 0 && g.k >= 0 && groups >= 0,
             "gemm_grouped: negative size (m=", g.m, " n=", g.n, " k=", g.k, " groups=", groups,
             ")");
    MT_CHECK(g.batch == 1, "gemm_grouped: batch must be 1 (got ", g.batch, ")");
    if (dim == GroupDim::m) {
        MT_CHECK(g.ta == Trans::N, "gemm_grouped: dim m needs ta = N");
        MT_CHECK(g.stride_a == 0 && g.stride_c == 0 && g.stride_b >= 0,
                 "gemm_grouped: dim m uses stride_b only (stride_a and stride_c must be 0)");
    } else {
        MT_CHECK(g.ta == Trans::T && g.tb == Trans::N, "gemm_grouped: dim k needs ta = T, tb = N");
        MT_CHECK(g.stride_a == 0 && g.stride_b == 0 && g.stride_c >= 0,
                 "gemm_grouped: dim k uses stride_c only (stride_a and stride_b must be 0)");
    }
    const int64_t a_cols = dim == GroupDim::m ? g.k : g.m;
    const int64_t b_cols = dim == GroupDim::k || g.tb == Trans::N ? g.n : g.k;
    MT_CHECK(g.lda >= std::max<int64_t>(1, a_cols), "gemm_grouped: lda ", g.lda, " < ", a_cols);
    MT_CHECK(g.ldb >= std::max<int64_t>(1, b_cols), "gemm_grouped: ldb ", g.ldb, " < ", b_cols);
    MT_CHECK(g.ldc >= std::max<int64_t>(1, g.n), "gemm_grouped: ldc ", g.ldc, " < ", g.n);
    MT_CHECK(group_rows.buf, "gemm_grouped: group_rows is empty");
    MT_CHECK(group_rows.dtype == DType::i32, "gemm_grouped: group_rows is ",
             dtype_name(group_rows.dtype), ", must be i32");
    MT_CHECK(group_rows.numel() >= groups, "gemm_grouped: group_rows has ", group_rows.numel(),
             " elements for ", groups, " groups");
    const GroupedSpans s = grouped_spans(g, groups, dim);
    auto holds = [&](const Tensor& t, int64_t need, const char* name) {
        MT_CHECK(need == 0 || t.numel() >= need, "gemm_grouped (dim ", d, "): ", name, " has ",
                 t.numel(), " elements, the capacity needs ", need);
    };
    holds(g.a, s.a, "A");
    holds(g.b, s.b, "B");
    holds(g.c, s.c, "C");
}

// Checks host-readable group sizes: each >= 0, their sum <= the capacity.
inline void check_group_rows(const int32_t* rows, int64_t groups, int64_t capacity) {
    int64_t total = 0;
    for (int64_t i = 0; i < groups; ++i) {
        MT_CHECK(rows[i] >= 0, "gemm_grouped: negative group size: ", rows[i], " (group ", i, ")");
        total += rows[i];
    }
    // The same words as the CUDA backend's device-side report (kernels_cuda/kernel_interface.h).
    MT_CHECK(total <= capacity, "gemm_grouped: the group sizes sum past the capacity to ", total,
             " (capacity ", capacity, ")");
}

// The n elements of t from element `offset` on (t itself when n is 0: nothing is read).
inline Tensor grouped_part(const Tensor& t, int64_t offset, int64_t n) {
    return n == 0 ? t : t.view(offset, {n});
}

// Runs the grouped product as one gemm(GemmArgs) call per group from host-readable sizes
// (checked first): dim m skips empty groups; dim k calls gemm with k = 0 for them (C_i = beta
// C_i). Arguments must have passed check_grouped_args.
template <typename Gemm>
void run_grouped_on_host(const GemmArgs& g, const int32_t* rows, int64_t groups, GroupDim dim,
                         Gemm&& gemm) {
    check_group_rows(rows, groups, grouped_capacity(g, dim));
    if (g.m == 0 || g.n == 0) return;
    int64_t o = 0;
    for (int64_t i = 0; i < groups; o += rows[i], ++i) {
        const int64_t r = rows[i];
        GemmArgs e = g;
        if (dim == GroupDim::m) {
            if (r == 0) continue;
            const int64_t b_rows = g.tb == Trans::N ? g.k : g.n,
                          b_cols = g.tb == Trans::N ? g.n : g.k;
            e.m = r;
            e.a = grouped_part(g.a, o * g.lda, gemm_span(1, 0, r, g.k, g.lda));
            e.b = grouped_part(g.b, i * g.stride_b, gemm_span(1, 0, b_rows, b_cols, g.ldb));
            e.c = grouped_part(g.c, o * g.ldc, gemm_span(1, 0, r, g.n, g.ldc));
            e.stride_b = 0;
        } else {
            e.k = r;
            e.a = grouped_part(g.a, o * g.lda, gemm_span(1, 0, r, g.m, g.lda));
            e.b = grouped_part(g.b, o * g.ldb, gemm_span(1, 0, r, g.n, g.ldb));
            e.c = grouped_part(g.c, i * g.stride_c, gemm_span(1, 0, g.m, g.n, g.ldc));
            e.stride_c = 0;
        }
        gemm(e);
    }
}

}  // namespace moetrain

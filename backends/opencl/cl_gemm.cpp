// Every matrix product goes through CLBlast: Gemm for one product, GemmStridedBatched when
// batch > 1, row-major layout, buffer offsets in elements. Only the degenerate k == 0 case
// (C = beta * C) uses a kernel of our own (kernels_cl/elementwise.cl).
#include <clblast.h>

#include "cl_device.h"

namespace moetrain::opencl {
namespace {

const char* status_name(clblast::StatusCode s) {
    using S = clblast::StatusCode;
    switch (s) {
        case S::kNotImplemented: return "kNotImplemented";
        case S::kInvalidMatrixA: return "kInvalidMatrixA";
        case S::kInvalidMatrixB: return "kInvalidMatrixB";
        case S::kInvalidMatrixC: return "kInvalidMatrixC";
        case S::kInvalidDimension: return "kInvalidDimension";
        case S::kInvalidLeadDimA: return "kInvalidLeadDimA";
        case S::kInvalidLeadDimB: return "kInvalidLeadDimB";
        case S::kInvalidLeadDimC: return "kInvalidLeadDimC";
        case S::kInsufficientMemoryA: return "kInsufficientMemoryA";
        case S::kInsufficientMemoryB: return "kInsufficientMemoryB";
        case S::kInsufficientMemoryC: return "kInsufficientMemoryC";
        case S::kInsufficientMemoryTemp: return "kInsufficientMemoryTemp";
        case S::kInvalidBatchCount: return "kInvalidBatchCount";
        case S::kInvalidLocalMemUsage: return "kInvalidLocalMemUsage";
        case S::kDatabaseError: return "kDatabaseError";
        case S::kUnknownError: return "kUnknownError";
        case S::kUnexpectedError: return "kUnexpectedError";
        default: return cl_error_name(static_cast<cl_int>(s));
    }
}

clblast::Transpose trans(Trans t) {
    return t == Trans::N ? clblast::Transpose::kNo : clblast::Transpose::kYes;
}

// Elements spanned by a stored rows x cols matrix with row stride ld, repeated batch times.
int64_t extent(int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
    return (batch - 1) * stride + (rows - 1) * ld + cols;
}

}  // namespace

void ClDevice::gemm(const GemmArgs& g) {
    MT_CHECK(g.m >= 0 && g.n >= 0 && g.k >= 0 && g.batch >= 1, "gemm: bad sizes m=", g.m,
             " n=", g.n, " k=", g.k, " batch=", g.batch);
    if (g.m == 0 || g.n == 0) return;
    MT_CHECK(g.ldc >= g.n, "gemm: ldc ", g.ldc, " < n ", g.n);
    MT_CHECK(g.stride_a >= 0 && g.stride_b >= 0 && g.stride_c >= 0, "gemm: negative stride");
    DevPtr c = arg(g.c, extent(g.m, g.n, g.ldc, g.batch, g.stride_c), "gemm: C");
    if (g.k == 0) {  // C = beta * C
        for (int64_t i = 0; i < g.batch; ++i)
            launch("elementwise", "mt_scale_matrix", items2(g.n, g.m),
                   DevPtr{c.mem, c.off + i * g.stride_c}, cl_long{g.m}, cl_long{g.n},
                   cl_long{g.ldc}, g.beta);
        return;
    }
    int64_t ar = g.ta == Trans::N ? g.m : g.k, ac = g.ta == Trans::N ? g.k : g.m;
    int64_t br = g.tb == Trans::N ? g.k : g.n, bc = g.tb == Trans::N ? g.n : g.k;
    MT_CHECK(g.lda >= ac, "gemm: lda ", g.lda, " < ", ac);
    MT_CHECK(g.ldb >= bc, "gemm: ldb ", g.ldb, " < ", bc);
    DevPtr a = arg(g.a, extent(ar, ac, g.lda, g.batch, g.stride_a), "gemm: A");
    DevPtr b = arg(g.b, extent(br, bc, g.ldb, g.batch, g.stride_b), "gemm: B");
    auto sz = [](int64_t v) { return static_cast<size_t>(v); };
    cl_command_queue q = queue();
    clblast::StatusCode s;
    if (g.batch == 1) {
        s = clblast::Gemm<float>(clblast::Layout::kRowMajor, trans(g.ta), trans(g.tb), sz(g.m),
                                 sz(g.n), sz(g.k), g.alpha, a.mem, sz(a.off), sz(g.lda), b.mem,
                                 sz(b.off), sz(g.ldb), g.beta, c.mem, sz(c.off), sz(g.ldc), &q);
    } else {
        s = clblast::GemmStridedBatched<float>(
            clblast::Layout::kRowMajor, trans(g.ta), trans(g.tb), sz(g.m), sz(g.n), sz(g.k),
            g.alpha, a.mem, sz(a.off), sz(g.lda), sz(g.stride_a), b.mem, sz(b.off), sz(g.ldb),
            sz(g.stride_b), g.beta, c.mem, sz(c.off), sz(g.ldc), sz(g.stride_c), sz(g.batch), &q);
    }
    MT_CHECK(s == clblast::StatusCode::kSuccess, "gemm: CLBlast failed with ", status_name(s),
             " (", static_cast<int>(s), ") for m=", g.m, " n=", g.n, " k=", g.k,
             " batch=", g.batch);
}

}  // namespace moetrain::opencl

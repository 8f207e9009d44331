// Every matrix product goes through CLBlast: Gemm for one product, GemmStridedBatched when
// batch > 1, row-major layout, buffer offsets in elements. Only the degenerate k == 0 case
// (C = beta * C) uses a kernel of our own (kernels_cl/elementwise.cl). CLBlast has no bf16
// (and PoCL no cl_khr_fp16), so the 16-bit products (GemmArgs::compute bf16 / f16) first
// write each operand compact into device scratch as f32 values rounded through `compute`
// (kernels_cl/convert.cl; a 16-bit operand is widened exactly) and run sgemm on those: exact
// products of the rounded values, summed in fp32. gemm_grouped reads the group sizes back to
// the host (the one host wait of the op) and runs one gemm per group.
#include <clblast.h>

#include <vector>

#include "cl_device.h"
#include "moetrain/enum_names.h"
#include "shared/gemm_dtypes.h"
#include "shared/grouped_gemm.h"

namespace moetrain::opencl {
namespace {

// CLBlast's own status codes by name; the others are OpenCL codes (cl_error_name).
const char* status_name(clblast::StatusCode s) {
#define MT_CLBLAST_STATUS(x) \
    { clblast::StatusCode::x, #x }
    static constexpr EnumName<clblast::StatusCode> kNames[] = {
        MT_CLBLAST_STATUS(kNotImplemented),      MT_CLBLAST_STATUS(kInvalidMatrixA),
        MT_CLBLAST_STATUS(kInvalidMatrixB),      MT_CLBLAST_STATUS(kInvalidMatrixC),
        MT_CLBLAST_STATUS(kInvalidDimension),    MT_CLBLAST_STATUS(kInvalidLeadDimA),
        MT_CLBLAST_STATUS(kInvalidLeadDimB),     MT_CLBLAST_STATUS(kInvalidLeadDimC),
        MT_CLBLAST_STATUS(kInsufficientMemoryA), MT_CLBLAST_STATUS(kInsufficientMemoryB),
        MT_CLBLAST_STATUS(kInsufficientMemoryC), MT_CLBLAST_STATUS(kInsufficientMemoryTemp),
        MT_CLBLAST_STATUS(kInvalidBatchCount),   MT_CLBLAST_STATUS(kInvalidLocalMemUsage),
        MT_CLBLAST_STATUS(kDatabaseError),       MT_CLBLAST_STATUS(kUnknownError),
        MT_CLBLAST_STATUS(kUnexpectedError)};
#undef MT_CLBLAST_STATUS
    const char* name = enum_name(kNames, s, nullptr);
    return name ? name : cl_error_name(static_cast<cl_int>(s));
}

clblast::Transpose trans(Trans t) {
    return t == Trans::N ? clblast::Transpose::kNo : clblast::Transpose::kYes;
}

// A stored operand on the device: where it starts, its row stride and its batch stride.
struct Operand {
    DevPtr p;
    int64_t ld, stride;
};

// The operand of `batch` stored rows x cols matrices written compact as f32 rounded through
// `compute` into scratch slot `slot` (one matrix when stride is 0, as the product reads it).
Operand round_operand(ClDevice& dev, int slot, const Tensor& t, const Operand& in, int64_t rows,
                      int64_t cols, int64_t batch, DType compute) {
    const int64_t count = in.stride == 0 ? 1 : batch, packed_rows = count * rows;
    DevPtr dst = dev.scratch(slot, static_cast<size_t>(packed_rows * cols) * sizeof(float));
    const cl_int kind = float_code(compute);
    const char* kernel = t.dtype == DType::f32 ? "mt_gemm_round_f32" : "mt_gemm_widen_f32";
    dev.launch("convert", kernel, items2(cols, packed_rows), dst, in.p, cl_long{rows},
               cl_long{cols}, cl_long{in.ld}, cl_long{in.stride}, kind);
    return {dst, cols, in.stride == 0 ? 0 : rows * cols};
}

}  // namespace

void ClDevice::gemm_impl(const GemmArgs& g) {
    if (g.m == 0 || g.n == 0) return;
    DevPtr c = arg(g.c);
    if (g.k == 0) {  // C = beta * C
        for (int64_t i = 0; i < g.batch; ++i)
            launch("elementwise", "mt_scale_matrix", items2(g.n, g.m),
                   DevPtr{c.mem, c.off + i * g.stride_c}, cl_long{g.m}, cl_long{g.n},
                   cl_long{g.ldc}, g.beta);
        return;
    }
    int64_t ar = g.ta == Trans::N ? g.m : g.k, ac = g.ta == Trans::N ? g.k : g.m;
    int64_t br = g.tb == Trans::N ? g.k : g.n, bc = g.tb == Trans::N ? g.n : g.k;
    Operand a{arg(g.a), g.lda, g.stride_a};
    Operand b{arg(g.b), g.ldb, g.stride_b};
    if (g.compute != DType::f32) {
        a = round_operand(*this, 0, g.a, a, ar, ac, g.batch, g.compute);
        b = round_operand(*this, 1, g.b, b, br, bc, g.batch, g.compute);
    }
    auto sz = [](int64_t v) { return static_cast<size_t>(v); };
    cl_command_queue q = queue();
    clblast::StatusCode s;
    if (g.batch == 1) {
        s = clblast::Gemm<float>(clblast::Layout::kRowMajor, trans(g.ta), trans(g.tb), sz(g.m),
                                 sz(g.n), sz(g.k), g.alpha, a.p.mem, sz(a.p.off), sz(a.ld), b.p.mem,
                                 sz(b.p.off), sz(b.ld), g.beta, c.mem, sz(c.off), sz(g.ldc), &q);
    } else {
        s = clblast::GemmStridedBatched<float>(
            clblast::Layout::kRowMajor, trans(g.ta), trans(g.tb), sz(g.m), sz(g.n), sz(g.k),
            g.alpha, a.p.mem, sz(a.p.off), sz(a.ld), sz(a.stride), b.p.mem, sz(b.p.off), sz(b.ld),
            sz(b.stride), g.beta, c.mem, sz(c.off), sz(g.ldc), sz(g.stride_c), sz(g.batch), &q);
    }
    MT_CHECK(s == clblast::StatusCode::kSuccess, "gemm: CLBlast failed with ", status_name(s), " (",
             static_cast<int>(s), ") for m=", g.m, " n=", g.n, " k=", g.k, " batch=", g.batch);
}

void ClDevice::gemm_grouped_impl(const GemmArgs& g, const Tensor& group_rows, int64_t groups,
                                 GroupDim dim) {
    std::vector<int32_t> rows(static_cast<size_t>(groups));
    if (groups > 0) download(rows.data(), group_rows.view(0, {groups}));
    run_grouped_on_host(g, rows.data(), groups, dim, [&](const GemmArgs& e) { gemm(e); });
}

// The epilogue after the product, as add_bias, act_fwd / act_bwd and bias_grad
// (Device::gemm_epilogue_unfused).
void ClDevice::gemm_epilogue_impl(const GemmArgs& g, const GemmEpilogue& e) {
    gemm_epilogue_unfused(g, e);
}

}  // namespace moetrain::opencl

// The grouped CUTLASS kernels of cutlass_grouped.h: CUTLASS 4's Hopper ptr-array grouped GEMM
// (TMA + wgmma, warp-specialized cooperative, persistent tile scheduler over the groups' tiles),
// with the problem sizes on the device only (GroupProblemShape without host shapes: the grid is
// one CTA per SM and the scheduler reads each group's M, N, K as it reaches it). One kernel per
// (layout, dtype): A, B bf16 or f16 at 16-byte alignment, fp32 accumulation, C = D f32 row-major
// with alpha / beta (beta 0 does not read C). Built for sm_90a only (backends/cuda/CMakeLists.txt),
// with CUTLASS's headers as system headers; TMA descriptors are made through
// cudaGetDriverEntryPoint (never the driver library).
#include <type_traits>

#include "cuda/cutlass_grouped.h"
#include "moetrain/error.h"

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/version.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"

// Without the sm_90a feature set the kernels' bodies compile to an error message and return
// (D never written), and before CUDA 12.3 the per-group TMA descriptor updates trap: refuse to
// build either. The argument structs below are CUTLASS 4.2's.
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "cutlass_grouped.cu must be compiled for sm_90a (-gencode arch=compute_90a,code=sm_90a)"
#endif
#if !defined(CUTLASS_ARCH_MMA_MODIFIABLE_TMA_SM90_SUPPORTED)
#error "cutlass_grouped.cu needs CUDA 12.3 or newer (modifiable TMA descriptors)"
#endif
#if CUTLASS_MAJOR != 4 || CUTLASS_MINOR < 2
#error "cutlass_grouped.cu is written against CUTLASS 4.2 (tools/install-deps.sh installs it)"
#endif

namespace moetrain::cuda {
namespace {

using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
static_assert(sizeof(ProblemShape::UnderlyingProblemShape) == 3 * sizeof(int32_t),
              "a group's (M, N, K) must be three int32 as grouped_problems writes them");

// 128 x 128 x 64 tiles, one CTA per cluster. The epilogue is the same for every kernel (f32 C
// and D, row-major, alpha / beta); it is declared outside the kernel template, as is its shared
// memory, which sets the mainloop's stages (g++ 12 rejects the builder's result inside it).
using TileShape = cute::Shape<cute::_128, cute::_128, cute::_64>;
using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
using LayoutC = cutlass::layout::RowMajor;
constexpr int kAlignAB = 8, kAlignC = 4;  // 16 bytes
using Epilogue = cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float, float, LayoutC*, kAlignC, float,
    LayoutC*, kAlignC, cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
    cutlass::epilogue::fusion::LinearCombination<float, float>>::CollectiveOp;
constexpr int kEpilogueSmem = static_cast<int>(sizeof(Epilogue::SharedStorage));

// One grouped kernel: A and B of `Element` in the given layouts.
template <class Element, class LayoutA, class LayoutB>
struct Grouped {
    using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA*, kAlignAB, Element,
        LayoutB*, kAlignAB, float, TileShape, ClusterShape,
        cutlass::gemm::collective::StageCountAutoCarveout<kEpilogueSmem>,
        cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>::CollectiveOp;
    using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
    using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
    using StrideA = typename Kernel::InternalStrideA;
    using StrideB = typename Kernel::InternalStrideB;
    using StrideC = typename Kernel::InternalStrideC;
    using StrideD = typename Kernel::InternalStrideD;
};

// A stride of a (rows, cols, batch) operand whose one dynamic mode is the leading dimension.
template <class Stride>
Stride with_ld(int64_t ld) {
    Stride s{};
    constexpr bool first = std::is_integral_v<std::remove_cvref_t<decltype(cute::get<0>(s))>>;
    constexpr bool second = std::is_integral_v<std::remove_cvref_t<decltype(cute::get<1>(s))>>;
    static_assert(first != second, "one dynamic stride mode expected");
    if constexpr (first)
        cute::get<0>(s) = ld;
    else
        cute::get<1>(s) = ld;
    return s;
}

template <class SA, class SB, class SC>
__global__ void fill_strides_kernel(SA* sa, SA a, SB* sb, SB b, SC* sc, SC c, int64_t groups) {
    for (int64_t i = threadIdx.x; i < groups; i += blockDim.x) {
        sa[i] = a;
        sb[i] = b;
        sc[i] = c;
    }
}

size_t align256(size_t b) {
    return (b + 255) / 256 * 256;
}

// The scratch of one call: the A, B and C (= D) stride arrays, then CUTLASS's workspace.
template <class G>
struct Carved {
    typename G::StrideA* sa;
    typename G::StrideB* sb;
    typename G::StrideC* sc;
    void* workspace;
};
template <class G>
size_t strides_bytes(int64_t groups) {
    const auto n = static_cast<size_t>(groups);
    return align256(n * sizeof(typename G::StrideA)) + align256(n * sizeof(typename G::StrideB)) +
           align256(n * sizeof(typename G::StrideC));
}
template <class G>
Carved<G> carve(void* scratch, int64_t groups) {
    auto* p = static_cast<char*>(scratch);
    const auto n = static_cast<size_t>(groups);
    Carved<G> c{};
    c.sa = reinterpret_cast<typename G::StrideA*>(p);
    p += align256(n * sizeof(typename G::StrideA));
    c.sb = reinterpret_cast<typename G::StrideB*>(p);
    p += align256(n * sizeof(typename G::StrideB));
    c.sc = reinterpret_cast<typename G::StrideC*>(p);
    p += align256(n * sizeof(typename G::StrideC));
    c.workspace = p;
    return c;
}

template <class G>
typename G::Gemm::Arguments arguments(const CutlassGroupedCall& call, const Carved<G>& s) {
    using Element = typename G::Gemm::ElementA;
    cutlass::KernelHardwareInfo hw;
    cudaGetDevice(&hw.device_id);
    hw.sm_count = call.sm_count;
    typename G::Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGrouped,
        {static_cast<int>(call.groups),
         reinterpret_cast<ProblemShape::UnderlyingProblemShape*>(
             const_cast<int32_t*>(call.problems)),
         nullptr},
        {reinterpret_cast<const Element**>(const_cast<const void**>(call.a_ptrs)), s.sa,
         reinterpret_cast<const Element**>(const_cast<const void**>(call.b_ptrs)), s.sb},
        {{}, const_cast<const float**>(call.c_ptrs), s.sc, const_cast<float**>(call.c_ptrs), s.sc},
        hw};
    auto& f = args.epilogue.thread;
    f.alpha = call.alpha;
    f.beta = call.beta;
    f.alpha_ptr = nullptr;
    f.beta_ptr = nullptr;
    f.alpha_ptr_array = nullptr;
    f.beta_ptr_array = nullptr;
    f.dAlpha = {cute::_0{}, cute::_0{}, 0};
    f.dBeta = {cute::_0{}, cute::_0{}, 0};
    return args;
}

template <class G>
size_t scratch_of(int64_t groups, int sm_count) {
    CutlassGroupedCall call;
    call.groups = groups;
    call.sm_count = sm_count;
    const Carved<G> none{};
    return strides_bytes<G>(groups) + G::Gemm::get_workspace_size(arguments<G>(call, none));
}

void check_cutlass(cutlass::Status st, const char* what) {
    MT_CHECK(st == cutlass::Status::kSuccess, "gemm_grouped: CUTLASS ", what, ": ",
             cutlassGetStatusString(st));
}

template <class G>
void run(const CutlassGroupedCall& call) {
    const Carved<G> s = carve<G>(call.scratch, call.groups);
    fill_strides_kernel<<<1, 256, 0, call.stream>>>(
        s.sa, with_ld<typename G::StrideA>(call.lda), s.sb, with_ld<typename G::StrideB>(call.ldb),
        s.sc, with_ld<typename G::StrideC>(call.ldc), call.groups);
    const cudaError_t launch = cudaGetLastError();
    MT_CHECK(launch == cudaSuccess, "gemm_grouped: stride fill: ", cudaGetErrorString(launch));
    const typename G::Gemm::Arguments args = arguments<G>(call, s);
    typename G::Gemm gemm;
    check_cutlass(gemm.can_implement(args), "can_implement");
    check_cutlass(gemm.initialize(args, s.workspace, call.stream), "initialize");
    check_cutlass(gemm.run(call.stream), "run");
}

using RowMajor = cutlass::layout::RowMajor;
using ColumnMajor = cutlass::layout::ColumnMajor;

// Our row-major op(A) [M, K] is row-major for ta N and column-major for ta T; op(B) [K, N] is
// row-major for tb N and column-major for tb T.
template <class Element, class Fn>
bool with_kernel(Trans ta, Trans tb, Fn&& fn) {
    if (ta == Trans::N && tb == Trans::T) return fn(Grouped<Element, RowMajor, ColumnMajor>{});
    if (ta == Trans::N && tb == Trans::N) return fn(Grouped<Element, RowMajor, RowMajor>{});
    if (ta == Trans::T && tb == Trans::N) return fn(Grouped<Element, ColumnMajor, RowMajor>{});
    return false;
}
template <class Fn>
bool with_kernel(Trans ta, Trans tb, DType dtype, Fn&& fn) {
    if (dtype == DType::bf16) return with_kernel<cutlass::bfloat16_t>(ta, tb, fn);
    if (dtype == DType::f16) return with_kernel<cutlass::half_t>(ta, tb, fn);
    return false;
}

}  // namespace

bool cutlass_grouped_built() {
    return true;
}

bool cutlass_grouped_supports(Trans ta, Trans tb, DType dtype, int64_t lda, int64_t ldb,
                              int64_t ldc) {
    const bool aligned = lda % 8 == 0 && ldb % 8 == 0 && ldc % 4 == 0;
    return aligned && with_kernel(ta, tb, dtype, [](auto) { return true; });
}

size_t cutlass_grouped_scratch(Trans ta, Trans tb, DType dtype, int64_t groups, int sm_count) {
    size_t bytes = 0;
    with_kernel(ta, tb, dtype, [&](auto g) {
        bytes = scratch_of<decltype(g)>(groups, sm_count);
        return true;
    });
    return bytes;
}

void cutlass_grouped_run(const CutlassGroupedCall& call) {
    const bool ran = with_kernel(call.ta, call.tb, call.dtype, [&](auto g) {
        run<decltype(g)>(call);
        return true;
    });
    MT_CHECK(ran, "gemm_grouped: no CUTLASS kernel for this layout and dtype");
}

}  // namespace moetrain::cuda

// Which way the CPU runs its bf16 matrix products (cpu_gemm.h, Bf16Gemm): oneDNN's bf16 matmul
// primitive where this processor has a kernel for it, else the operands widened to f32 and the
// f32 GEMM. oneDNN 2.6 (Debian 12) has bf16 matmul kernels only for AVX-512 processors (AMX,
// AVX512-BF16, or AVX512 with bf16 emulation); on an AVX2-only CPU creating the primitive fails
// with "could not create a primitive descriptor iterator" (status 3). The probe below creates
// the primitive once, for the operand layouts gemm_bf16 uses, and remembers the answer.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "cpu/cpu_gemm.h"
#include "moetrain/error.h"

#if defined(MOETRAIN_GEMM_ONEDNN)
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace moetrain::cpu {
namespace {

constexpr const char* kEnv = "MOETRAIN_CPU_BF16_GEMM";

// The oneDNN kernel a bf16 matmul gets on this CPU ("" when there is none).
std::string probe_onednn_bf16_kernel() {
#if defined(MOETRAIN_GEMM_ONEDNN)
    try {
        using dnnl::memory;
        const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
        std::string kernel;
        // Both orientations of A and B that gemm_bf16 passes (row-major and transposed strides).
        for (const bool ta : {false, true})
            for (const bool tb : {false, true}) {
                const memory::dim n = 64;
                const memory::desc ad({n, n}, memory::data_type::bf16,
                                      ta ? memory::dims{1, n} : memory::dims{n, 1});
                const memory::desc bd({n, n}, memory::data_type::bf16,
                                      tb ? memory::dims{1, n} : memory::dims{n, 1});
                const memory::desc cd({n, n}, memory::data_type::f32, memory::dims{n, 1});
                const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), engine);
                if (kernel.empty()) kernel = pd.impl_info_str();
            }
        return kernel;
    } catch (const dnnl::error&) {
        return "";
    }
#else
    return "";
#endif
}

struct State {
    std::once_flag probed;
    std::string kernel;  // oneDNN's bf16 kernel on this CPU, "" when none
    std::atomic<int> path{-1};
};

State& state() {
    static State s;
    return s;
}

const std::string& onednn_kernel() {
    State& s = state();
    std::call_once(s.probed, [&] { s.kernel = probe_onednn_bf16_kernel(); });
    return s.kernel;
}

Bf16Gemm initial_path() {
    const char* env = std::getenv(kEnv);
    const std::string want = env ? env : "";
    MT_CHECK(want.empty() || want == "auto" || want == "widen", kEnv, "=", want,
             " is not 'auto' or 'widen'");
    if (want == "widen" || onednn_kernel().empty()) return Bf16Gemm::widen;
    return Bf16Gemm::onednn;
}

}  // namespace

Bf16Gemm bf16_gemm_path() {
    State& s = state();
    int p = s.path.load(std::memory_order_acquire);
    if (p < 0) {
        p = static_cast<int>(initial_path());
        int expected = -1;
        if (!s.path.compare_exchange_strong(expected, p, std::memory_order_acq_rel)) p = expected;
    }
    return static_cast<Bf16Gemm>(p);
}

bool onednn_bf16_available() {
    return !onednn_kernel().empty();
}

void set_bf16_gemm_path(Bf16Gemm path) {
    MT_CHECK(path == Bf16Gemm::widen || !onednn_kernel().empty(),
             "bf16 GEMM: oneDNN has no bf16 matmul kernel on this CPU");
    state().path.store(static_cast<int>(path), std::memory_order_release);
}

std::string bf16_gemm_description() {
    Bf16Gemm path = Bf16Gemm::widen;
    try {
        path = bf16_gemm_path();
    } catch (const Error& e) {  // a bad MOETRAIN_CPU_BF16_GEMM: opening the device fails with it
        return e.what();
    }
    if (path == Bf16Gemm::onednn) return "oneDNN bf16 matmul (" + onednn_kernel() + ")";
#if defined(MOETRAIN_GEMM_ONEDNN)
    if (onednn_kernel().empty())
        return "widened to f32 (oneDNN has no bf16 matmul kernel on this CPU)";
    return std::string("widened to f32 (") + kEnv + "=widen)";
#else
    return "widened to f32 (BLAS provider)";
#endif
}

}  // namespace moetrain::cpu

// oneDNN's matmul primitive (its brgemm kernels) for the products where it measured faster
// than dnnl_sgemm on this machine class: the weight gradients dW = dy^T x with a tall result
// (Trans::T, Trans::N, m >= n) and a long reduction (k >= 1024), e.g. the LM head and FFN
// up/gate gradients (docs/BENCHMARKS.md: 214 -> 288 GFLOP/s for 8192 x 512 x 2048 on 2
// threads). A primitive is built once per shape (~0.3 ms) and kept in a small cache; alpha is
// an output scale and beta a sum post-op, so C is not read when beta = 0, as with sgemm.
// The bf16 products (GemmArgs::compute = bf16) always take this path: bf16 src and weights,
// f32 dst, fp32 accumulation; on CPUs with AMX / AVX512-BF16 oneDNN picks its brgemm kernels
// for them (ONEDNN_VERBOSE=1 prints the implementation, e.g. brg:avx512_core_amx_bf16).
#include "cpu/cpu_gemm.h"

#if defined(MOETRAIN_GEMM_ONEDNN)

#include <list>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>

#include "moetrain/error.h"

namespace moetrain::cpu {
namespace {

using Key = std::tuple<dnnl::memory::data_type, char, char, int64_t, int64_t, int64_t, int64_t,
                       int64_t, int64_t, float, float>;

struct Entry {
    Key key;
    dnnl::matmul prim;
};

// Process-wide: the primitives do not depend on the device object, only on the shape.
class MatmulCache {
  public:
    static MatmulCache& get() {
        static MatmulCache c;
        return c;
    }

    // ab: the data type of A and B (f32 or bf16); C is f32.
    void run(dnnl::memory::data_type ab, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k,
             float alpha, const void* a, int64_t lda, const void* b, int64_t ldb, float beta,
             float* c, int64_t ldc) {
        using dnnl::memory;
        const memory::desc ad({m, k}, ab,
                              ta == Trans::N ? memory::dims{lda, 1} : memory::dims{1, lda});
        const memory::desc bd({k, n}, ab,
                              tb == Trans::N ? memory::dims{ldb, 1} : memory::dims{1, ldb});
        const memory::desc cd({m, n}, memory::data_type::f32, memory::dims{ldc, 1});
        const Key key{ab,
                      ta == Trans::N ? 'N' : 'T',
                      tb == Trans::N ? 'N' : 'T',
                      m,
                      n,
                      k,
                      lda,
                      ldb,
                      ldc,
                      alpha,
                      beta};
        std::lock_guard<std::mutex> lock(mu_);
        const dnnl::matmul& prim = find_or_make(key, ad, bd, cd, alpha, beta);
        memory am(ad, engine_, const_cast<void*>(a)), bm(bd, engine_, const_cast<void*>(b)),
            cm(cd, engine_, c);
        prim.execute(stream_, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
        stream_.wait();
    }

  private:
    static constexpr size_t kCapacity = 256;  // shapes kept; the oldest is dropped first

    MatmulCache() : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}

    const dnnl::matmul& find_or_make(const Key& key, const dnnl::memory::desc& ad,
                                     const dnnl::memory::desc& bd, const dnnl::memory::desc& cd,
                                     float alpha, float beta) {
        for (auto it = entries_.begin(); it != entries_.end(); ++it)
            if (it->key == key) {
                entries_.splice(entries_.begin(), entries_, it);  // most recent first
                return entries_.front().prim;
            }
        dnnl::primitive_attr attr;
        if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
        if (beta != 0.0f) {
            dnnl::post_ops po;
            po.append_sum(beta);
            attr.set_post_ops(po);
        }
        const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), attr, engine_);
        entries_.push_front({key, dnnl::matmul(pd)});
        if (entries_.size() > kCapacity) entries_.pop_back();
        return entries_.front().prim;
    }

    std::mutex mu_;
    dnnl::engine engine_;
    dnnl::stream stream_;
    std::list<Entry> entries_;
};

}  // namespace

bool matmul_preferred(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k) {
    return ta == Trans::T && tb == Trans::N && m >= n && k >= 1024;
}

namespace {
void run_matmul(dnnl::memory::data_type ab, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k,
                float alpha, const void* a, int64_t lda, const void* b, int64_t ldb, float beta,
                float* c, int64_t ldc) {
    try {
        MatmulCache::get().run(ab, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    } catch (const dnnl::error& e) {
        fail("gemm: oneDNN ", ab == dnnl::memory::data_type::bf16 ? "bf16" : "f32",
             " matmul failed (", e.what(), ", status ", static_cast<int>(e.status), ") for m=", m,
             " n=", n, " k=", k);
    }
}
}  // namespace

void matmul(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
            int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
    run_matmul(dnnl::memory::data_type::f32, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void matmul_bf16(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                 const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta,
                 float* c, int64_t ldc) {
    run_matmul(dnnl::memory::data_type::bf16, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace moetrain::cpu

#else  // BLAS provider: no matmul primitive, every product goes to cblas_sgemm

namespace moetrain::cpu {
bool matmul_preferred(Trans, Trans, int64_t, int64_t, int64_t) {
    return false;
}
void matmul(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
            int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
    sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
}  // namespace moetrain::cpu

#endif

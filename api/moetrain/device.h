// The Device interface: memory plus the smallest op set the docs/MODEL.md transformer needs.
// The model is written once against this class; the ops are listed once, in
// api/moetrain/device_ops.def, and each backend (cpu, opencl, cuda) implements every one of
// them. Ops are queued in order on the device's stream; download() and synchronize() wait
// for queued work.
//
// Conventions for every op:
//  - Tensors are views (buffer + element offset); sizes are passed explicitly and the
//    tensors must hold at least that many elements. Row-major everywhere.
//  - Floating tensors are f32 unless an op says otherwise; index tensors are i32.
//  - "accumulate" means out += result; otherwise out = result.
//  - Reductions accumulate in fp32 or wider and are deterministic for a fixed thread count.
//  - Device-side values: a few ops take an optional i32 [1] tensor (rope's pos_dev, kv_append's
//    pos_dev, AttnDims::tk_dev, SampleArgs::step_dev) whose value is added to a host argument
//    when the op runs, so that one recorded step (run_recorded) serves every decode position.
//    The host checks the host arguments at once; a device value that leaves the documented
//    range is reported like an invalid index (cpu: thrown at once; cuda / opencl: the op skips
//    its work and the next download() or synchronize() throws naming the op and the value).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "moetrain/tensor.h"

namespace moetrain {

enum class Trans : uint8_t { N, T };
// Which dimension of a grouped product the row groups split (Device::gemm_grouped).
enum class GroupDim : uint8_t { m, k };
enum class Act : uint8_t { gelu, relu, silu };  // gelu = tanh approximation (MODEL.md 2)

// C = alpha * op(A) @ op(B) + beta * C, row-major; op(A) is [m,k], op(B) is [k,n], C is [m,n].
// lda/ldb/ldc are the row strides of A, B, C as stored. batch > 1: strided-batched, the i-th
// product uses A + i*stride_a, B + i*stride_b, C + i*stride_c (element strides).
// compute (f32, bf16 or f16): every element of op(A) and op(B) is rounded to `compute` (round
// to nearest even, the dtype.h conversions) before it is multiplied; the products are summed
// in fp32 or wider and alpha / beta are applied in fp32. A and B may each be stored as f32 or
// as the 16-bit type of `compute` (a bf16 A with compute f16 is an error; compute f32 needs
// f32 A and B). C is always f32. Sizes, strides and ld are in elements of each operand's dtype.
struct GemmArgs {
    Trans ta = Trans::N, tb = Trans::N;
    int64_t m = 0, n = 0, k = 0;
    float alpha = 1.0f;
    Tensor a;
    int64_t lda = 0;
    Tensor b;
    int64_t ldb = 0;
    float beta = 0.0f;
    Tensor c;
    int64_t ldc = 0;
    int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
    DType compute = DType::f32;
};

// What Device::gemm_epilogue applies to one product before it is stored (on cuda: a cuBLASLt
// epilogue, so the product's output is written once instead of being re-read by add_bias or
// act_fwd; the GELU backward runs unfused there, and decode's 1-4 row products take the skinny
// kernel with the same epilogue). pre = alpha * op(A) @ op(B) + beta * C + bias (bias broadcast
// over the rows, fp32), then by `act` (GELU: the tanh approximation of Act::gelu):
enum class EpilogueAct : uint8_t {
    none,       // C = pre
    gelu,       // C = gelu(pre), and pre_act = pre (the backward's input)
    gelu_grad,  // C = pre * gelu'(pre_act): the GELU backward, pre_act read
};
struct GemmEpilogue {
    Tensor bias = {};                     // f32 [n], may be empty; not with gelu_grad
    EpilogueAct act = EpilogueAct::none;  // gelu / gelu_grad need beta == 0 and pre_act
    Tensor pre_act = {};                  // gelu / gelu_grad: f32 [m, n] (row stride n)
    // The bias gradient of a weight-gradient product dW [m, n] (+)= dy^T x, added to (f32 [m],
    // may be empty): dbias[i] += sum over the k rows of dy [k, m], i.e. of op(A)[i, :]. Needs A
    // = dy (f32, or stored in the 16-bit compute type) stored densely and transposed (ta T, lda
    // m), alpha 1, no bias and act none.
    Tensor dbias = {};
};

// GemmArgs for op(A) [m,k] @ op(B) [k,n] -> C [m,n] with every operand stored densely (each
// leading dimension is the operand's stored row length); alpha 1, beta 0, compute f32, one
// product. The tensors may be left empty and set later.
inline GemmArgs dense_gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, Tensor a = {},
                           Tensor b = {}, Tensor c = {}) {
    return GemmArgs{.ta = ta,
                    .tb = tb,
                    .m = m,
                    .n = n,
                    .k = k,
                    .a = std::move(a),
                    .lda = ta == Trans::N ? k : m,
                    .b = std::move(b),
                    .ldb = tb == Trans::N ? n : k,
                    .c = std::move(c),
                    .ldc = n};
}

// Attention sizes. q/o: [B,Tq,H,hd]; k/v: [B,S,K,hd] (S = capacity >= Tk, batch stride S*K*hd);
// lse: [B,H,Tq]. Query t sits at absolute position t + (Tk - Tq) and attends keys u <= it.
// Query head j uses kv head j / (H/K).
// tk_dev (i32 [1], may be empty) adds a length read from device memory when the op runs (a
// decode step replayed from a graph): the ops use Tk + tk_dev[0], which must lie in [Tq, S]
// (the host checks Tq <= Tk <= S on Tk alone). A device value outside that range is reported
// like an invalid index (see "Device-side values" at the top) and the op skips its work.
struct AttnDims {
    int64_t B = 0, Tq = 0, Tk = 0, S = 0, H = 0, K = 0, hd = 0;
    Tensor tk_dev = {};
    // The attention precision (Model::set_attention16, docs/MEMORY_AND_PRECISION.md): f32, or
    // bf16 / f16: the backend may round q, k, v, dout and the probabilities / score gradients
    // to that type before its products (fp32 accumulation, fp32 softmax and outputs). The cuda
    // backend's tensor-core kernels do (docs/CUDA.md); cpu and opencl compute in fp32.
    DType compute = DType::f32;
};

struct AdamWArgs {
    float lr = 0, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0;
    float bc1 = 1, bc2 = 1;  // bias corrections 1 - b1^s, 1 - b2^s
};

// The top-k router's options (MODEL.md 2): sigmoid scores instead of softmax, renormalisation
// of the k selected scores, and the routed scaling factor applied after it.
struct RouterArgs {
    bool sigmoid = false;
    bool norm_topk = true;
    float scaling = 1.0f;
};

struct SampleArgs {
    float temperature = 0;  // 0 = greedy (argmax, ties to the lower id)
    int64_t top_k = 0;      // 0 = off
    float top_p = 1.0f;     // 1 = off
    uint64_t seed = 0;
    uint64_t step = 0;  // Philox counter = (step, row)
    // i32 [1], may be empty: added to step when the op runs, read as an unsigned 32-bit count
    // (step + uint32(step_dev[0]), modulo 2^64), so a replayed decode step draws a new number.
    Tensor step_dev = {};
};

// How Device::run_recorded ran a step: called record() (eager), captured it into a graph and
// launched that (captured), or launched the graph captured earlier without calling record().
enum class StepRun : uint8_t { eager, captured, replayed };

class Device {
  public:
    virtual ~Device() = default;

    // ---- identity ----
    virtual std::string backend_name() const = 0;  // "cpu", "opencl", "cuda"
    virtual std::string name() const = 0;          // human description of the device
    // Which attention kernels attention_fwd / attention_bwd run for d ("" if just one): cuda
    // says "wmma" (tensor cores), "scalar" (fp32) or "decode" (a decode step's split-K forward),
    // and `bench --profile` books the ops as attention_fwd[wmma], attention_fwd[decode], ....
    virtual std::string attention_kernel(const AttnDims& d) const {
        (void)d;
        return "";
    }
    // How gemm_epilogue runs (g, e) when the device has more than one way ("" otherwise): cuda
    // says "cublaslt" (one product with the epilogue fused) or "unfused" (gemm, add_bias and
    // act_fwd in turn: cuBLASLt has no algorithm for the shape), and `bench --profile` books the
    // op as gemm_epilogue[cublaslt] / gemm_epilogue[unfused].
    virtual std::string gemm_epilogue_kernel(const GemmArgs& g, const GemmEpilogue& e) const {
        (void)g;
        (void)e;
        return "";
    }
    // How gemm_grouped runs (g, dim) when the device has more than one way ("" otherwise): cuda
    // says "cutlass" (CUTLASS's Hopper grouped kernels, the default where they apply) or
    // "cublas" (its tiling into cuBLAS batched calls; MOETRAIN_CUDA_GROUPED_GEMM=cublas),
    // and `bench --profile` books the op as gemm_grouped[cutlass] / gemm_grouped[cublas].
    virtual std::string gemm_grouped_kernel(const GemmArgs& g, GroupDim dim) const {
        (void)g;
        (void)dim;
        return "";
    }

    // ---- memory ----
    virtual std::shared_ptr<Buffer> alloc_buffer(size_t bytes) = 0;  // zero-initialised
    // The largest single buffer alloc_buffer accepts (OpenCL: CL_DEVICE_MAX_MEM_ALLOC_SIZE;
    // the others are bounded only by free memory). Planners cap their largest buffers to it.
    virtual size_t max_buffer_bytes() const { return SIZE_MAX; }
    Tensor alloc(DType dtype, Shape shape) {
        Tensor t;
        t.buf = alloc_buffer(static_cast<size_t>(shape.numel()) * dtype_size(dtype));
        t.dtype = dtype;
        t.shape = shape;
        return t;
    }
    virtual void synchronize() = 0;

    // ---- the ops (api/moetrain/device_ops.def: one row and its contract per op) ----
    // One front door per op: check_<op> checks the host arguments once, for every backend and
    // with one message per problem (sizes, dtypes, the device owning each tensor, view bounds,
    // the attention shape, GEMM leading dimensions; backends/device_checks.cpp), then the
    // backend's <op>_impl runs with arguments it no longer needs to check. Values that live in
    // device memory (index tensors, group sizes, the device-side values above) are checked by
    // the backends where they read them.
#define MT_DEVICE_OP(name, params, args, ...) \
    void name params {                        \
        check_##name args;                    \
        name##_impl args;                     \
    }
#include "moetrain/device_ops.def"

    // ---- recorded steps (CUDA Graphs) ----
    // Runs `record`, a function that only queues ops of this device: no upload, download,
    // synchronize or allocation inside, no host-side state it must update, and exactly the
    // same ops with the same arguments (tensors, sizes, scalars) every time it is called with
    // this `key` (the caller encodes whatever would change them in the key). A backend that
    // can record work (cuda with graphs on) runs it eagerly for its warm-up calls, then
    // captures it into a graph and from then on replays the graph instead of calling `record`;
    // a record that breaks the rules cannot be captured and keeps running eagerly (said once
    // on stderr). The results are the same either way. Other backends just call record().
    virtual StepRun run_recorded(const std::string& key, const std::function<void()>& record) {
        (void)key;
        record();
        return StepRun::eager;
    }

    // The device whose buffers the ops accept: this one, or the wrapped device of a decorator
    // (the profiling device forwards its tensors to the device that allocated them).
    virtual const Device* tensor_owner() const {
        return this;
    }

  protected:
    // gemm_epilogue as gemm_impl, add_bias_impl, act_fwd_impl / act_bwd_impl and bias_grad_impl
    // in turn (the cpu and opencl backends' gemm_epilogue, and cuda's when cuBLASLt has no
    // algorithm for the shape).
    void gemm_epilogue_unfused(const GemmArgs& g, const GemmEpilogue& e);

    // What each backend implements (pure virtual: a backend missing an op does not compile).
#define MT_DEVICE_OP(name, params, args, ...) virtual void name##_impl params = 0;
#include "moetrain/device_ops.def"

  private:
#define MT_DEVICE_OP(name, params, args, ...) void check_##name params const;
#include "moetrain/device_ops.def"
};

}  // namespace moetrain

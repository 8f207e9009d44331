// cuDNN's fused causal attention (cudnn_attention.h) through cudnn-frontend's graph API, with
// the library loaded at run time: cudnn-frontend's dynamic loading resolves every cuDNN call
// through dlsym on the handle opened here, so the module links no cuDNN library.
//
// One graph per shape and direction, built on first use (validate, operation graph, heuristic
// A plans, support check, plan build) and kept; a shape cuDNN refuses is remembered with its
// reason and attention runs moetrain's own kernels for it. The backward asks for cuDNN's
// deterministic algorithm (no atomic dQ accumulation), as every moetrain kernel is.
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
#define CUDNN_FRONTEND_SKIP_JSON_LIB
#include "cuda/cudnn_attention.h"
#include "launch.h"

#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "moetrain/error.h"

// cudnn-frontend's dynamic loading reads cuDNN's symbols from this handle.
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend

namespace moetrain::cuda {
namespace {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

// Tensor uids of the variant packs.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDout, kDq, kDk, kDv, kScale };

// libcudnn.so.9 opened once per process (its handle is cudnn-frontend's global). The CUDA
// runtime cudnn-frontend resolves its own calls from is the one this module links.
bool load_library(std::string* why) {
    if (fe::cudnn_dlhandle) return true;
    dlerror();
    void* h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char* e = dlerror();
        if (why) *why = std::string("libcudnn.so.9 not found: ") + (e ? e : "dlopen failed");
        return false;
    }
    if (!std::getenv("CUDNN_FRONTEND_CUDART_LIB_NAME"))
        setenv("CUDNN_FRONTEND_CUDART_LIB_NAME",
               ("libcudart.so." + std::to_string(CUDART_VERSION / 1000)).c_str(), 0);
    fe::cudnn_dlhandle = h;
    return true;
}

std::string version_string() {
    const int64_t v = static_cast<int64_t>(fe::detail::get_backend_version());  // 91900
    return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
           std::to_string(v % 100);
}

fe::DataType_t io_type(DType t) {
    return t == DType::bf16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF;
}

// [b, h, t, d] views of moetrain's [B,T,heads,hd] rows.
std::vector<int64_t> dims(const CudnnAttnShape& s, int64_t heads) {
    return {s.B, heads, s.T, s.hd};
}
std::vector<int64_t> strides(const CudnnAttnShape& s, int64_t heads) {
    return {s.T * heads * s.hd, s.hd, heads * s.hd, 1};
}
TensorPtr input(fe::graph::Graph& g, const char* name, Uid uid, const CudnnAttnShape& s,
                int64_t heads) {
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(name)
                        .set_uid(uid)
                        .set_dim(dims(s, heads))
                        .set_stride(strides(s, heads)));
}
void output(const TensorPtr& t, Uid uid, const CudnnAttnShape& s, int64_t heads) {
    t->set_output(true).set_uid(uid).set_dim(dims(s, heads)).set_stride(strides(s, heads));
}
// moetrain's lse [B,H,T] f32 as cuDNN's statistics tensor: the forward's output, the backward's
// input.
void as_stats(fe::graph::Tensor_attributes& t, const CudnnAttnShape& s) {
    t.set_uid(kStats)
        .set_dim({s.B, s.H, s.T, 1})
        .set_stride({s.H * s.T, s.T, 1, 1})
        .set_data_type(fe::DataType_t::FLOAT);
}
TensorPtr stats(fe::graph::Graph& g, const CudnnAttnShape& s) {
    fe::graph::Tensor_attributes t;
    t.set_name("lse");
    as_stats(t, s);
    return g.tensor(t);
}
TensorPtr scale_scalar(fe::graph::Graph& g) {
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name("scale")
                        .set_uid(kScale)
                        .set_dim({1, 1, 1, 1})
                        .set_stride({1, 1, 1, 1})
                        .set_is_pass_by_value(true)
                        .set_data_type(fe::DataType_t::FLOAT));
}

struct Built {
    std::shared_ptr<fe::graph::Graph> graph;  // null: refused
    int64_t workspace = 0;
    std::string why;
};

std::shared_ptr<fe::graph::Graph> new_graph(const CudnnAttnShape& s) {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(io_type(s.dtype))
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    return g;
}

std::shared_ptr<fe::graph::Graph> forward_graph(const CudnnAttnShape& s) {
    auto g = new_graph(s);
    auto q = input(*g, "q", kQ, s, s.H), k = input(*g, "k", kK, s, s.K),
         v = input(*g, "v", kV, s, s.K);
    auto opts = fe::graph::SDPA_attributes()
                    .set_name("attention_fwd")
                    .set_generate_stats(true)
                    .set_causal_mask(true)
                    .set_attn_scale(scale_scalar(*g));
    auto [o, lse] = g->sdpa(q, k, v, opts);
    output(o, kO, s, s.H);
    as_stats(lse->set_output(true), s);
    return g;
}

std::shared_ptr<fe::graph::Graph> backward_graph(const CudnnAttnShape& s) {
    auto g = new_graph(s);
    auto q = input(*g, "q", kQ, s, s.H), k = input(*g, "k", kK, s, s.K),
         v = input(*g, "v", kV, s, s.K), o = input(*g, "o", kO, s, s.H),
         dout = input(*g, "dout", kDout, s, s.H);
    auto opts = fe::graph::SDPA_backward_attributes()
                    .set_name("attention_bwd")
                    .set_causal_mask(true)
                    .set_deterministic_algorithm(true)
                    .set_attn_scale(scale_scalar(*g));
    auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, stats(*g, s), opts);
    output(dq, kDq, s, s.H);
    output(dk, kDk, s, s.K);
    output(dv, kDv, s, s.K);
    return g;
}

class CudnnAttentionImpl final : public CudnnAttention {
  public:
    explicit CudnnAttentionImpl(cudnnHandle_t h) : handle_(h) {}
    ~CudnnAttentionImpl() override {
        try {
            fe::detail::destroy_handle(handle_);
        } catch (const std::exception& ex) {  // dynamic loading: a symbol lookup failed
            std::fprintf(stderr, "moetrain: cudnnDestroy: %s\n", ex.what());
        }
    }
    CudnnAttentionImpl(const CudnnAttentionImpl&) = delete;
    CudnnAttentionImpl& operator=(const CudnnAttentionImpl&) = delete;

    bool supports(const CudnnAttnShape& s, bool backward, std::string* why) override {
        const Built& b = get(s, backward);
        if (!b.graph && why) *why = b.why;
        return b.graph != nullptr;
    }
    size_t workspace(const CudnnAttnShape& s, bool backward) override {
        return static_cast<size_t>(get(s, backward).workspace);
    }

    void forward(const CudnnAttnShape& s, const CudnnAttnFwd& a) override {
        float scale = a.scale;
        std::unordered_map<int64_t, void*> pack{{kQ, const_cast<void*>(a.q)},
                                                {kK, const_cast<void*>(a.k)},
                                                {kV, const_cast<void*>(a.v)},
                                                {kO, a.o},
                                                {kStats, a.lse},
                                                {kScale, &scale}};
        run(s, false, a.stream, pack, a.workspace, "attention_fwd");
    }
    void backward(const CudnnAttnShape& s, const CudnnAttnBwd& a) override {
        float scale = a.scale;
        std::unordered_map<int64_t, void*> pack{{kQ, const_cast<void*>(a.q)},
                                                {kK, const_cast<void*>(a.k)},
                                                {kV, const_cast<void*>(a.v)},
                                                {kO, const_cast<void*>(a.o)},
                                                {kDout, const_cast<void*>(a.dout)},
                                                {kStats, const_cast<float*>(a.lse)},
                                                {kDq, a.dq},
                                                {kDk, a.dk},
                                                {kDv, a.dv},
                                                {kScale, &scale}};
        run(s, true, a.stream, pack, a.workspace, "attention_bwd");
    }

  private:
    const Built& get(const CudnnAttnShape& s, bool backward) {
        auto& list = backward ? bwd_ : fwd_;
        for (const auto& [key, built] : list)
            if (key == s) return built;
        list.emplace_back(s, build(s, backward));
        return list.back().second;
    }

    Built build(const CudnnAttnShape& s, bool backward) {
        Built b;
        try {
            auto g = backward ? backward_graph(s) : forward_graph(s);
            fe::error_t e = g->build(handle_, {fe::HeurMode_t::A});
            if (e.is_good()) e = g->get_workspace_size(b.workspace);
            if (!e.is_good())
                b.why = e.get_message();
            else if (b.workspace > mtk::kAttnCudnnMaxWorkspace)
                b.why = "its workspace of " + std::to_string(b.workspace >> 20) +
                        " MiB is over the " + std::to_string(mtk::kAttnCudnnMaxWorkspace >> 20) +
                        " MiB limit";
            else
                b.graph = std::move(g);
        } catch (const std::exception& ex) {  // dynamic loading: a symbol this cuDNN lacks
            b.why = ex.what();
        }
        if (b.why.empty() && !b.graph) b.why = "cuDNN refused the graph";
        if (!b.graph)  // once per shape: the fallback is never silent
            std::fprintf(stderr,
                         "moetrain: cuDNN attention %s of B=%lld T=%lld H=%lld K=%lld hd=%lld: %s; "
                         "moetrain's own kernels run it\n",
                         backward ? "backward" : "forward", static_cast<long long>(s.B),
                         static_cast<long long>(s.T), static_cast<long long>(s.H),
                         static_cast<long long>(s.K), static_cast<long long>(s.hd), b.why.c_str());
        return b;
    }

    void run(const CudnnAttnShape& s, bool backward, CUstream_st* stream,
             std::unordered_map<int64_t, void*>& pack, void* workspace, const char* op) {
        const Built& b = get(s, backward);
        MT_CHECK(b.graph, op, ": cuDNN has no graph for this shape: ", b.why);
        const cudnnStatus_t st = fe::detail::set_stream(handle_, stream);
        MT_CHECK(st == CUDNN_STATUS_SUCCESS, op,
                 ": cudnnSetStream: ", fe::detail::get_error_string(st));
        fe::error_t e = b.graph->execute(handle_, pack, workspace);
        MT_CHECK(e.is_good(), op, ": cuDNN: ", e.get_message());
    }

    cudnnHandle_t handle_;
    std::vector<std::pair<CudnnAttnShape, Built>> fwd_, bwd_;
};

}  // namespace

bool cudnn_attention_built() {
    return true;
}

std::string cudnn_attention_probe() {
    std::string why;
    if (!load_library(&why)) return why;
    try {
        return "cuDNN " + version_string();
    } catch (const std::exception& ex) {
        return std::string("cuDNN unusable: ") + ex.what();
    }
}

std::unique_ptr<CudnnAttention> open_cudnn_attention(std::string* why) {
    if (!load_library(why)) return nullptr;
    try {
        cudnnHandle_t h = nullptr;
        const cudnnStatus_t st = fe::detail::create_handle(&h);
        if (st != CUDNN_STATUS_SUCCESS) {
            if (why) *why = std::string("cudnnCreate: ") + fe::detail::get_error_string(st);
            return nullptr;
        }
        return std::make_unique<CudnnAttentionImpl>(h);
    } catch (const std::exception& ex) {
        if (why) *why = std::string("cuDNN unusable: ") + ex.what();
        return nullptr;
    }
}

}  // namespace moetrain::cuda

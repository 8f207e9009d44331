// moetrain::Model: the public face of ModelImpl (parameters by name, init, forward/backward,
// the recompute mode and workspace size).

#include "model/model_impl.h"
#include "moetrain/enum_names.h"

namespace moetrain {

namespace {
constexpr EnumName<Recompute> kRecomputeNames[] = {
    {Recompute::none, "none"}, {Recompute::block, "block"}, {Recompute::ffn, "ffn"}};
}  // namespace

std::string to_string(Recompute r) {
    return enum_name(kRecomputeNames, r);
}

Recompute parse_recompute(const std::string& s) {
    if (auto r = enum_value(kRecomputeNames, s)) return *r;
    throw Error("unknown recompute mode '" + s + "' (" + enum_name_list(kRecomputeNames) + ")");
}

Model::Model(Device& device, const ModelConfig& config)
    : impl_(std::make_unique<ModelImpl>(device, config)) {}
Model::~Model() = default;

const ModelConfig& Model::config() const {
    return impl_->cfg;
}
Device& Model::device() const {
    return impl_->dev;
}
const std::vector<ParamInfo>& Model::params() const {
    return impl_->store.layout;
}

const ParamInfo& Model::param(const std::string& name) const {
    auto it = impl_->store.index.find(name);
    MT_CHECK(it != impl_->store.index.end(), "model has no parameter named '", name, "'");
    return impl_->store.layout[it->second];
}

int64_t Model::num_params() const {
    return impl_->store.n_params;
}
Tensor Model::params_flat() const {
    return impl_->store.params;
}
Tensor Model::grads_flat() const {
    return impl_->store.grads;
}

void Model::init_weights(uint64_t seed) {
    const std::vector<float> v = init_values(impl_->cfg, impl_->store.layout, seed);
    impl_->dev.upload(impl_->store.params, v.data());
    impl_->store.params_changed();
}

std::vector<float> Model::get_param(const std::string& name) const {
    const ParamInfo& p = param(name);
    std::vector<float> v(static_cast<size_t>(p.numel()));
    impl_->dev.download(v.data(), impl_->store.params.view(p.offset, p.shape));
    return v;
}

void Model::set_param(const std::string& name, const std::vector<float>& values) {
    const ParamInfo& p = param(name);
    MT_CHECK(static_cast<int64_t>(values.size()) == p.numel(), "parameter '", name, "' has ",
             p.numel(), " elements, got ", values.size());
    impl_->dev.upload(impl_->store.params.view(p.offset, p.shape), values.data());
    impl_->store.params_changed();
}

std::vector<float> Model::get_flat(const Tensor& flat) const {
    MT_CHECK(flat.numel() == impl_->store.n_params && flat.dtype == DType::f32,
             "get_flat needs a flat f32 buffer of ", impl_->store.n_params, " elements");
    std::vector<float> v(static_cast<size_t>(flat.numel()));
    impl_->dev.download(v.data(), flat);
    return v;
}

void Model::set_flat(const Tensor& flat, const std::vector<float>& values) {
    MT_CHECK(flat.numel() == impl_->store.n_params && flat.dtype == DType::f32,
             "set_flat needs a flat f32 buffer of ", impl_->store.n_params, " elements");
    MT_CHECK(static_cast<int64_t>(values.size()) == impl_->store.n_params, "set_flat got ",
             values.size(), " values for ", impl_->store.n_params, " parameters");
    impl_->dev.upload(flat, values.data());
    if (flat.buf == impl_->store.params.buf)
        impl_->store.params_changed();  // not for moments / gradients
}

void Model::params_changed() {
    impl_->store.params_changed();
}

void Model::set_precision(Precision p) {
    impl_->set_precision(p);
}

Precision Model::precision() const {
    return impl_->store.precision;
}

void Model::set_attention16(bool on) {
    impl_->passes.set_attention16(on);
}

bool Model::attention16() const {
    return impl_->passes.attention16();
}

void Model::zero_grads() {
    impl_->dev.fill(impl_->store.grads, 0.0f);
}

LossStats Model::forward_backward(const int32_t* x, const int32_t* y, int B, int T,
                                  float grad_scale) {
    impl_->passes.reset_stats();
    const int64_t n = impl_->passes.queue_micro_batch(x, y, B, T, grad_scale, 1.0f, true);
    return loss_from_stats(impl_->passes.read_stats(), n);
}

LossStats Model::forward_loss(const int32_t* x, const int32_t* y, int B, int T) {
    impl_->passes.reset_stats();
    const int64_t n = impl_->passes.queue_micro_batch(x, y, B, T, 0.0f, 1.0f, false);
    return loss_from_stats(impl_->passes.read_stats(), n);
}

std::vector<float> Model::forward_logits(const int32_t* x, int B, int T) {
    return impl_->passes.forward_all_logits(x, B, T);
}

const std::vector<ExpertLoad>& Model::expert_load() const {
    return impl_->routing.expert_load();  // downloads the loads of the last forward once
}

const std::vector<ParamInfo>& Model::buffers() const {
    return impl_->routing.buffer_layout;
}
Tensor Model::buffers_flat() const {
    return impl_->routing.expert_bias;
}

namespace {
const ParamInfo& buffer_info(const std::vector<ParamInfo>& buffers, const std::string& name) {
    for (const ParamInfo& b : buffers)
        if (b.name == name) return b;
    fail("model has no buffer named '", name, "'");
}
}  // namespace

std::vector<float> Model::get_buffer(const std::string& name) const {
    const ParamInfo& b = buffer_info(impl_->routing.buffer_layout, name);
    std::vector<float> v(static_cast<size_t>(b.numel()));
    impl_->dev.download(v.data(), impl_->routing.expert_bias.view(b.offset, b.shape));
    return v;
}

void Model::set_buffer(const std::string& name, const std::vector<float>& values) {
    const ParamInfo& b = buffer_info(impl_->routing.buffer_layout, name);
    MT_CHECK(static_cast<int64_t>(values.size()) == b.numel(), "buffer '", name, "' has ",
             b.numel(), " elements, got ", values.size());
    impl_->dev.upload(impl_->routing.expert_bias.view(b.offset, b.shape), values.data());
}

StepRun Model::last_step_run() const {
    return impl_->passes.last_run;
}

void Model::set_recompute(Recompute r) {
    impl_->workspaces.set_recompute(r);
}
Recompute Model::recompute() const {
    return impl_->workspaces.recompute();
}

int64_t Model::training_workspace_bytes(int B, int T) {
    MT_CHECK(B >= 1 && T >= 1, "batch shape B=", B, " T=", T, " must be positive");
    return impl_->workspaces.get(B, T, true).bytes;
}

}  // namespace moetrain

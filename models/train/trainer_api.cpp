// The Trainer of api/moetrain/train.h: each call goes to its implementation (trainer_impl.h).
#include "train/trainer_impl.h"

#include "model/train_passes.h"

namespace moetrain {

Trainer::Trainer(Model& model, const TrainOptions& opts, const DistOptions& dist)
    : impl_(std::make_unique<Impl>(model, opts, dist)) {}
Trainer::~Trainer() = default;

StepStats Trainer::step(const int32_t* xs, const int32_t* ys, int B, int T) {
    return impl_->step(xs, ys, B, T);
}
int64_t Trainer::steps_done() const {
    return impl_->step_;
}
void Trainer::set_steps_done(int64_t s) {
    impl_->step_ = s;
}
const TrainOptions& Trainer::options() const {
    return impl_->opts_;
}
Model& Trainer::model() {
    return impl_->model_;
}
Tensor Trainer::moment1() const {
    const OptimizerState& s = impl_->state_;
    return s.m_full ? s.m_full : s.m;
}
Tensor Trainer::moment2() const {
    const OptimizerState& s = impl_->state_;
    return s.v_full ? s.v_full : s.v;
}
void Trainer::gather_moments() {
    impl_->sync_->gather_state(impl_->state_);
}
void Trainer::scatter_moments() {
    impl_->sync_->scatter_state(impl_->state_);
}
int64_t Trainer::shard_first() const {
    return impl_->sync_->shard_first();
}
int64_t Trainer::shard_count() const {
    return impl_->sync_->shard_count();
}
bool Trainer::overlaps_gradients() const {
    return impl_->sync_->overlaps();
}
std::string Trainer::token_exchange() const {
    return TrainPasses(impl_->model_).token_exchange();
}
int64_t Trainer::optimizer_state_bytes() const {
    return impl_->optimizer_state_bytes();
}
const std::vector<QuantizedMoments>& Trainer::quantized_moments() const {
    const OptimizerState& s = impl_->state_;
    return s.q_full.empty() ? s.q : s.q_full;
}
double Trainer::loss_scale() const {
    return impl_->loss_scale_;
}
int64_t Trainer::clean_steps() const {
    return impl_->clean_steps_;
}
int64_t Trainer::skipped_steps() const {
    return impl_->skipped_steps_;
}
void Trainer::set_loss_scale_state(double scale, int64_t clean, int64_t skipped) {
    impl_->set_loss_scale_state(scale, clean, skipped);
}

}  // namespace moetrain

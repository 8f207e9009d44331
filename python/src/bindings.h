// Pieces of the moetrain._moetrain extension module: each bind_* registers one part of the
// API; the helpers convert between NumPy arrays and the library's host buffers.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "moetrain/model.h"

namespace moetrain {
class Tokenizer;
}

namespace moetrain::python {

namespace nb = nanobind;

void bind_device(nb::module_& m);
void bind_model(nb::module_& m);
void bind_train(nb::module_& m);
void bind_data(nb::module_& m);
void bind_generate(nb::module_& m);

// The tokenizer of the checkpoint a Python Model was loaded from (Model.from_checkpoint,
// Model.load), kept on the Python object; nullptr when the model has none recorded.
void set_model_tokenizer(nb::handle model, std::shared_ptr<const Tokenizer> tokenizer);
std::shared_ptr<const Tokenizer> model_tokenizer(nb::handle model);

// A NumPy array of token ids: C-contiguous int32 of the given rank (checked here, with a
// one-line moetrain::Error naming `what` and what was passed instead).
using AnyArray = nb::ndarray<nb::ro>;
struct TokenArray {
    const int32_t* data = nullptr;
    std::vector<int64_t> shape;
};
TokenArray token_array(const AnyArray& a, const char* what, int rank);

// A new NumPy array that owns `values`, with the given shape.
nb::object numpy_array(std::vector<float> values, const std::vector<size_t>& shape);
nb::object numpy_array(std::vector<int32_t> values, const std::vector<size_t>& shape);

// An instance of a dataclass of moetrain._types (StepStats, LossStats, ExpertLoad...).
template <typename... Args>
nb::object make_record(const char* type, Args&&... kwargs) {
    return nb::module_::import_("moetrain._types").attr(type)(std::forward<Args>(kwargs)...);
}

// The moetrain._types.ExpertLoad of every MoE layer (Model::expert_load()).
nb::list expert_load_records(const std::vector<ExpertLoad>& load);

}  // namespace moetrain::python

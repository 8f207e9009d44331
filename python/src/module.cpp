// moetrain._moetrain: the nanobind extension behind the `moetrain` Python package. Library
// errors (moetrain::Error) become moetrain.Error with the message the CLI prints after
// "moetrain: error: ".
#include <new>

#include "bindings.h"
#include "moetrain/error.h"

namespace moetrain::python {

TokenArray token_array(const AnyArray& a, const char* what, int rank) {
    auto describe = [&] {
        std::string s = "[";
        for (size_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
        return s + "]";
    };
    const bool i32 = a.dtype() == nb::dtype<int32_t>();
    MT_CHECK(i32 && static_cast<int>(a.ndim()) == rank, what, " must be a ", rank,
             "-d numpy int32 array, got ", i32 ? "int32 " : "another dtype with shape ",
             describe());
    int64_t stride = 1;
    for (int i = rank - 1; i >= 0; --i) {
        MT_CHECK(a.shape(i) <= 1 || a.stride(i) == stride, what,
                 " must be C-contiguous (use numpy.ascontiguousarray)");
        stride *= static_cast<int64_t>(a.shape(i));
    }
    TokenArray t;
    t.data = static_cast<const int32_t*>(a.data());
    for (int i = 0; i < rank; ++i) t.shape.push_back(static_cast<int64_t>(a.shape(i)));
    return t;
}

namespace {
template <typename T>
nb::object owned_array(std::vector<T> values, const std::vector<size_t>& shape) {
    auto* owner = new std::vector<T>(std::move(values));
    nb::capsule del(owner, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
    return nb::cast(nb::ndarray<nb::numpy, T>(owner->data(), shape.size(), shape.data(), del));
}
}  // namespace

nb::object numpy_array(std::vector<float> values, const std::vector<size_t>& shape) {
    return owned_array(std::move(values), shape);
}
nb::object numpy_array(std::vector<int32_t> values, const std::vector<size_t>& shape) {
    return owned_array(std::move(values), shape);
}

}  // namespace moetrain::python

NB_MODULE(_moetrain, m) {
    using namespace moetrain::python;
    m.doc() = "moetrain: train and run Mixture-of-Experts transformer language models";
    // Registers moetrain.Error (a RuntimeError) and the translation of moetrain::Error to it;
    // the registration outlives the object.
    const nb::exception<moetrain::Error> error_type(m, "Error", PyExc_RuntimeError);
    bind_device(m);
    bind_data(m);
    bind_model(m);
    bind_train(m);
    bind_generate(m);
}

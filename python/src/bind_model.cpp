// moetrain.Model: built from a preset, a config dict or a JSON file, or from a checkpoint;
// seeded init, checkpoint weights, parameters as NumPy arrays, evaluation and logits.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "moetrain/checkpoint.h"
#include "moetrain/model.h"
#include "moetrain/precision.h"

namespace moetrain::python {

namespace {
constexpr const char* kTokenizerAttr = "_checkpoint_tokenizer";
using TokenizerPtr = std::shared_ptr<const Tokenizer>;
}  // namespace

void set_model_tokenizer(nb::handle model, TokenizerPtr tokenizer) {
    nb::capsule cap(new TokenizerPtr(std::move(tokenizer)),
                    [](void* p) noexcept { delete static_cast<TokenizerPtr*>(p); });
    nb::setattr(model, kTokenizerAttr, cap);
}

TokenizerPtr model_tokenizer(nb::handle model) {
    if (!nb::hasattr(model, kTokenizerAttr)) return nullptr;
    nb::object cap = nb::getattr(model, kTokenizerAttr);
    if (!nb::isinstance<nb::capsule>(cap)) return nullptr;
    return *static_cast<TokenizerPtr*>(nb::borrow<nb::capsule>(cap).data());
}

namespace {
nb::object json_loads(const std::string& s) {
    return nb::module_::import_("json").attr("loads")(s);
}

std::vector<size_t> shape_of(const ParamInfo& p) {
    std::vector<size_t> s;
    s.reserve(static_cast<size_t>(p.shape.rank));
    for (int i = 0; i < p.shape.rank; ++i) s.push_back(static_cast<size_t>(p.shape[i]));
    return s;
}

nb::object loss_record(const LossStats& s) {
    return make_record("LossStats", nb::arg("loss") = s.loss, nb::arg("ce") = s.ce,
                       nb::arg("aux") = s.aux, nb::arg("z") = s.z, nb::arg("tokens") = s.tokens);
}

// x (and y) as [B, T] int32 arrays of the same shape.
struct Batch {
    TokenArray x, y;
    int B = 0, T = 0;
};
Batch batch_of(const AnyArray& x, const AnyArray* y) {
    Batch b;
    b.x = token_array(x, "x", 2);
    if (y) {
        b.y = token_array(*y, "y", 2);
        MT_CHECK(b.x.shape == b.y.shape, "x and y must have the same shape, got [", b.x.shape[0],
                 ", ", b.x.shape[1], "] and [", b.y.shape[0], ", ", b.y.shape[1], "]");
    }
    MT_CHECK(b.x.shape[0] > 0 && b.x.shape[1] > 0, "x must not be empty");
    b.B = static_cast<int>(b.x.shape[0]);
    b.T = static_cast<int>(b.x.shape[1]);
    return b;
}

Model* model_from_config(Device& d, const ModelConfig& c) {
    return new Model(d, c);
}

// A Model factory (device, name) -> the model of config_of(name), a preset or a JSON file.
auto model_of(ModelConfig (*config_of)(const std::string&)) {
    return [config_of](Device& d, const std::string& name) {
        return model_from_config(d, config_of(name));
    };
}
}  // namespace

void bind_model(nb::module_& m) {
    m.def("preset_names", &preset_names, "The built-in presets (tiny, dense-small, ...).");
    m.def(
        "preset_config",
        [](const std::string& n) { return json_loads(config_to_json(preset_config(n))); },
        nb::arg("name"), nb::sig("def preset_config(name: str) -> dict[str, typing.Any]"),
        "A preset's full config as a dict (every key of docs/MODEL.md section 1).");

    auto keep_device = nb::keep_alive<0, 1>();  // the model refers to its device
    nb::class_<Model>(m, "Model", nb::dynamic_attr(),
                      "The docs/MODEL.md transformer on one device.")
        .def_static(
            "from_preset", model_of(&preset_config), nb::arg("device"), nb::arg("preset"),
            keep_device, nb::rv_policy::take_ownership,
            "A model of a built-in preset (weights uninitialised: call init_weights or load).")
        .def_static(
            "from_config",
            [](Device& d, nb::dict config) {
                std::string text =
                    nb::cast<std::string>(nb::module_::import_("json").attr("dumps")(config));
                return model_from_config(d, parse_config(text));
            },
            nb::arg("device"), nb::arg("config"), keep_device, nb::rv_policy::take_ownership,
            "A model of a config dict with the keys of docs/MODEL.md section 1 (errors name the "
            "key).")
        .def_static("from_json", model_of(&load_config_file), nb::arg("device"), nb::arg("path"),
                    keep_device, nb::rv_policy::take_ownership, "A model of a JSON config file.")
        .def_static(
            "from_checkpoint",
            [](Device& d, const std::string& path) -> nb::typed<nb::object, Model> {
                std::string dir = resolve_checkpoint(path);
                const CheckpointInfo info = read_checkpoint_info(dir);
                TokenizerPtr tok = load_checkpoint_tokenizer(info);
                Model* model = model_from_config(d, info.config);
                try {
                    nb::gil_scoped_release nogil;
                    load_weights(dir, *model);
                } catch (...) {
                    delete model;
                    throw;
                }
                nb::object self = nb::cast(model, nb::rv_policy::take_ownership);
                set_model_tokenizer(self, std::move(tok));
                return self;
            },
            nb::arg("device"), nb::arg("path"), keep_device, nb::rv_policy::take_ownership,
            "A model with the config and weights of a checkpoint directory or a run directory "
            "(its newest complete step); generate_text uses the checkpoint's tokenizer.")
        .def_prop_ro(
            "config", [](const Model& mo) { return json_loads(config_to_json(mo.config())); },
            nb::sig("def config(self) -> dict[str, typing.Any]"))
        .def_prop_ro("device", &Model::device, nb::rv_policy::reference_internal)
        .def_prop_ro("num_params", &Model::num_params)
        .def("init_weights", &Model::init_weights, nb::arg("seed"),
             nb::call_guard<nb::gil_scoped_release>(),
             "Seeded init, identical on every backend (the CLI's --seed).")
        .def(
            "load",
            [](nb::handle self, const std::string& path) {
                Model& mo = nb::cast<Model&>(self);
                std::string dir = resolve_checkpoint(path);
                TokenizerPtr tok = load_checkpoint_tokenizer(read_checkpoint_info(dir));
                {
                    nb::gil_scoped_release nogil;
                    load_weights(dir, mo);
                }
                set_model_tokenizer(self, std::move(tok));
            },
            nb::arg("path"), nb::sig("def load(self, path: str) -> None"),
            "Load the weights of a checkpoint (or of a run directory's newest step); the "
            "stored config must equal this model's. generate_text then uses the checkpoint's "
            "tokenizer.")
        .def(
            "param_names",
            [](const Model& mo) {
                std::vector<std::string> n;
                for (const ParamInfo& p : mo.params()) n.push_back(p.name);
                return n;
            },
            "Every parameter tensor's docs/MODEL.md section 6 name, in storage order.")
        .def(
            "param_shape",
            [](const Model& mo, const std::string& name) {
                std::vector<int64_t> s;
                const ParamInfo& p = mo.param(name);
                s.reserve(static_cast<size_t>(p.shape.rank));
                for (int i = 0; i < p.shape.rank; ++i) s.push_back(p.shape[i]);
                return s;
            },
            nb::arg("name"))
        .def(
            "get_param",
            [](const Model& mo, const std::string& name) {
                const ParamInfo& p = mo.param(name);
                return numpy_array(mo.get_param(name), shape_of(p));
            },
            nb::arg("name"),
            nb::sig("def get_param(self, name: str) -> numpy.typing.NDArray[numpy.float32]"),
            "A copy of one parameter as a float32 array of its shape.")
        .def(
            "set_param",
            [](Model& mo, const std::string& name, const nb::ndarray<nb::ro>& a) {
                const ParamInfo& p = mo.param(name);
                MT_CHECK(a.dtype() == nb::dtype<float>(), "set_param('", name,
                         "'): values must be a float32 array");
                std::vector<size_t> want = shape_of(p), got;
                for (size_t i = 0; i < a.ndim(); ++i) got.push_back(a.shape(i));
                MT_CHECK(got == want, "set_param('", name, "'): shape mismatch, the parameter has ",
                         p.numel(), " elements in ", p.shape.rank, " dims");
                // Copy element by element through the strides (any layout is accepted).
                std::vector<float> v(static_cast<size_t>(p.numel()));
                const auto* base = static_cast<const float*>(a.data());
                for (size_t i = 0; i < v.size(); ++i) {
                    size_t rem = i;
                    int64_t off = 0;
                    for (size_t d = a.ndim(); d-- > 0;) {
                        off += static_cast<int64_t>(rem % want[d]) * a.stride(d);
                        rem /= want[d];
                    }
                    v[i] = base[off];
                }
                mo.set_param(name, v);
            },
            nb::arg("name"), nb::arg("values"),
            "Overwrite one parameter from a float32 array of its shape.")
        .def_prop_rw(
            "precision",
            [](const Model& mo) { return std::string(precision_name(mo.precision())); },
            [](Model& mo, const std::string& p) { mo.set_precision(parse_precision(p)); },
            "fp32 | bf16 | fp16 (the CLI's --precision)")
        .def_prop_rw(
            "recompute", [](const Model& mo) { return to_string(mo.recompute()); },
            [](Model& mo, const std::string& r) { mo.set_recompute(parse_recompute(r)); },
            "none | block | ffn (the CLI's --recompute)")
        .def(
            "evaluate",
            [](Model& mo, const AnyArray& x, const AnyArray& y) {
                Batch b = batch_of(x, &y);
                LossStats s;
                {
                    nb::gil_scoped_release nogil;
                    s = mo.forward_loss(b.x.data, b.y.data, b.B, b.T);
                }
                return loss_record(s);
            },
            nb::arg("x"), nb::arg("y"),
            nb::sig("def evaluate(self, x: numpy.typing.NDArray[numpy.int32], "
                    "y: numpy.typing.NDArray[numpy.int32]) -> "
                    "moetrain._types.LossStats"),
            "Forward + loss of one [B, T] batch (y = -1 is ignored), no gradients.")
        .def(
            "logits",
            [](Model& mo, const AnyArray& x) {
                Batch b = batch_of(x, nullptr);
                std::vector<float> l;
                {
                    nb::gil_scoped_release nogil;
                    l = mo.forward_logits(b.x.data, b.B, b.T);
                }
                return numpy_array(std::move(l),
                                   {static_cast<size_t>(b.B), static_cast<size_t>(b.T),
                                    static_cast<size_t>(mo.config().vocab_size)});
            },
            nb::arg("x"),
            nb::sig("def logits(self, x: numpy.typing.NDArray[numpy.int32]) -> "
                    "numpy.typing.NDArray[numpy.float32]"),
            "Logits [B, T, V] of a [B, T] batch.")
        .def(
            "expert_load", [](const Model& mo) { return expert_load_records(mo.expert_load()); },
            nb::sig("def expert_load(self) -> list[moetrain._types.ExpertLoad]"),
            "Rows each expert received in the last forward, per MoE layer (empty if dense), "
            "with the selections a capacity dropped and the expert bias range.");
}

nb::list expert_load_records(const std::vector<ExpertLoad>& load) {
    nb::list out;
    for (const ExpertLoad& l : load)
        out.append(make_record("ExpertLoad", nb::arg("layer") = l.layer,
                               nb::arg("counts") = l.counts, nb::arg("dropped") = l.dropped,
                               nb::arg("bias_min") = l.bias_min, nb::arg("bias_max") = l.bias_max));
    return out;
}

}  // namespace moetrain::python

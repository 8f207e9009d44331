// moetrain.Trainer (docs/MODEL.md section 4) and checkpoints: one optimizer step per call on
// NumPy batches, with the GIL released while the device works; save and resume.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "moetrain/checkpoint.h"
#include "moetrain/precision.h"
#include "moetrain/train.h"

namespace moetrain::python {

namespace {
nb::object step_record(const StepStats& s, const std::vector<ExpertLoad>& load) {
    const nb::list layers = expert_load_records(load);
    return make_record("StepStats", nb::arg("step") = s.step, nb::arg("loss") = s.loss.loss,
                       nb::arg("ce") = s.loss.ce, nb::arg("aux") = s.loss.aux,
                       nb::arg("z") = s.loss.z, nb::arg("tokens") = s.loss.tokens,
                       nb::arg("lr") = s.lr, nb::arg("grad_norm") = s.grad_norm,
                       nb::arg("loss_scale") = s.loss_scale, nb::arg("skipped") = s.skipped,
                       nb::arg("expert_load") = layers);
}

TrainOptions make_options(const std::string& optimizer, double lr, double min_lr, int64_t warmup,
                          int64_t total_steps, double wd, double b1, double b2, double eps,
                          double clip, int accum) {
    MT_CHECK(lr >= 0, "lr must be >= 0, not ", lr);
    MT_CHECK(warmup >= 0, "warmup must be >= 0, not ", warmup);
    MT_CHECK(accum >= 1, "accum must be >= 1, not ", accum);
    MT_CHECK(total_steps >= 1, "total_steps must be >= 1, not ", total_steps);
    TrainOptions o;
    o.optimizer = parse_optimizer(optimizer);
    o.lr = lr;
    o.min_lr = min_lr < 0 ? lr / 10 : min_lr;  // as the CLI's --min-lr default
    o.warmup = warmup;
    o.total_steps = total_steps;
    o.wd = wd;
    o.b1 = b1;
    o.b2 = b2;
    o.eps = eps;
    o.clip = clip;
    o.accum = accum;
    return o;
}
}  // namespace

void bind_train(nb::module_& m) {
    nb::class_<Trainer>(m, "Trainer", "The optimizer of a Model: AdamW, 8-bit AdamW or SGD.")
        .def(
            "__init__",
            [](Trainer* self, Model& model, const std::string& optimizer, double lr, double min_lr,
               int64_t warmup, int64_t total_steps, double wd, double b1, double b2, double eps,
               double clip, int accum) {
                new (self) Trainer(model, make_options(optimizer, lr, min_lr, warmup, total_steps,
                                                       wd, b1, b2, eps, clip, accum));
            },
            nb::arg("model"), nb::kw_only(), nb::arg("optimizer") = "adamw", nb::arg("lr") = 3e-4,
            nb::arg("min_lr") = -1.0, nb::arg("warmup") = 0, nb::arg("total_steps") = 1,
            nb::arg("wd") = 0.1, nb::arg("b1") = 0.9, nb::arg("b2") = 0.95, nb::arg("eps") = 1e-8,
            nb::arg("clip") = 1.0, nb::arg("accum") = 1, nb::keep_alive<1, 2>(),
            "Same options and defaults as `moetrain train` (min_lr < 0 = lr / 10; "
            "total_steps = the schedule length S, --steps).")
        .def(
            "step",
            [](Trainer& t, const AnyArray& x, const AnyArray& y) {
                TokenArray tx = token_array(x, "x", 2), ty = token_array(y, "y", 2);
                MT_CHECK(tx.shape == ty.shape, "x and y must have the same shape");
                const int accum = t.options().accum;
                MT_CHECK(tx.shape[0] > 0 && tx.shape[1] > 0 && tx.shape[0] % accum == 0,
                         "x must have accum * B rows (accum ", accum, "), got ", tx.shape[0]);
                const int B = static_cast<int>(tx.shape[0] / accum);
                const int T = static_cast<int>(tx.shape[1]);
                StepStats s;
                {
                    nb::gil_scoped_release nogil;
                    s = t.step(tx.data, ty.data, B, T);
                }
                return step_record(s, t.model().expert_load());
            },
            nb::arg("x"), nb::arg("y"),
            nb::sig("def step(self, x: numpy.typing.NDArray[numpy.int32], "
                    "y: numpy.typing.NDArray[numpy.int32]) -> "
                    "moetrain._types.StepStats"),
            "One optimizer step over int32 batches [accum * B, T] (micro-batch m is rows "
            "m*B .. m*B+B-1); y = -1 is ignored. Returns the step's stats.")
        .def_prop_rw("steps_done", &Trainer::steps_done, &Trainer::set_steps_done)
        .def(
            "lr_at", [](const Trainer& t, int64_t i) { return lr_at(t.options(), i); },
            nb::arg("step_index"), "The scheduled lr of 0-based optimizer step i.")
        .def_prop_ro("loss_scale", &Trainer::loss_scale)
        .def(
            "load",
            [](Trainer& t, const std::string& path) {
                std::string dir = resolve_checkpoint(path);
                nb::gil_scoped_release nogil;
                load_optimizer(dir, t);
            },
            nb::arg("path"),
            "Restore the optimizer state and step count of a checkpoint (load the weights "
            "with Model.load first).");

    m.def(
        "save_checkpoint",
        [](const std::string& dir, const Model& model, const Trainer* trainer, uint64_t seed,
           int batch, int seq, int64_t train_pos, const std::string& tokenizer,
           const std::string& data_path, int64_t data_tokens) {
            const TrainState s{.train_pos = train_pos,
                               .seed = seed,
                               .options = trainer ? trainer->options() : TrainOptions{},
                               .batch = batch,
                               .seq = seq,
                               .precision = precision_name(model.precision()),
                               .tokenizer = tokenizer,
                               .data_path = data_path,
                               .data_tokens = data_tokens};
            nb::gil_scoped_release nogil;
            save_checkpoint(dir, model, trainer, s);
        },
        nb::arg("dir"), nb::arg("model"), nb::arg("trainer").none() = nb::none(), nb::kw_only(),
        nb::arg("seed") = 0, nb::arg("batch") = 0, nb::arg("seq") = 0, nb::arg("train_pos") = 0,
        nb::arg("tokenizer") = "bytes", nb::arg("data_path") = "", nb::arg("data_tokens") = 0,
        "Write a checkpoint directory atomically (docs/CHECKPOINTS.md): the weights, and with "
        "a trainer its optimizer state and step count; the keywords fill state.json so that "
        "`moetrain train --resume` can continue the run.");

    m.def(
        "read_checkpoint_info",
        [](const std::string& path) {
            std::string dir = resolve_checkpoint(path);
            CheckpointInfo info = read_checkpoint_info(dir);
            nb::dict d;
            d["dir"] = info.dir;
            d["config"] = nb::module_::import_("json").attr("loads")(config_to_json(info.config));
            d["step"] = info.state.step;
            d["seed"] = info.state.seed;
            d["batch"] = info.state.batch;
            d["seq"] = info.state.seq;
            d["train_pos"] = info.state.train_pos;
            d["precision"] = info.state.precision;
            d["tokenizer"] = info.state.tokenizer;
            d["has_optimizer"] = info.has_optimizer();
            return d;
        },
        nb::arg("path"), nb::sig("def read_checkpoint_info(path: str) -> dict[str, typing.Any]"),
        "What a checkpoint (or a run directory's newest step) holds: dir, config, step, ...");
}

}  // namespace moetrain::python

// Generation (docs/MODEL.md 7) with the KV cache and on-device sampling, from token ids or
// from text (the checkpoint's tokenizer or a tokenizer spec, as `moetrain generate`), with the
// GIL released.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "moetrain/data.h"
#include "moetrain/generate.h"
#include "moetrain/model.h"
#include "moetrain/tokenizer.h"

namespace moetrain::python {

namespace {
GenerateOptions options(int max_new_tokens, float temperature, int64_t top_k, float top_p,
                        uint64_t seed) {
    return GenerateOptions{max_new_tokens, temperature, top_k, top_p, seed};
}

std::vector<int32_t> run(Model& model, const std::vector<int32_t>& prompt,
                         const GenerateOptions& g) {
    MT_CHECK(g.max_new_tokens >= 1, "max_new_tokens must be >= 1, not ", g.max_new_tokens);
    nb::gil_scoped_release nogil;
    return generate(model, prompt, g);
}
}  // namespace

void bind_generate(nb::module_& m) {
    m.def(
        "generate",
        [](Model& model, const AnyArray& prompt, int max_new_tokens, float temperature,
           int64_t top_k, float top_p, uint64_t seed) {
            TokenArray t = token_array(prompt, "prompt", 1);
            std::vector<int32_t> out =
                run(model, std::vector<int32_t>(t.data, t.data + t.shape[0]),
                    options(max_new_tokens, temperature, top_k, top_p, seed));
            const size_t n = out.size();
            return numpy_array(std::move(out), {n});
        },
        nb::arg("model"), nb::arg("prompt"), nb::kw_only(), nb::arg("max_new_tokens"),
        nb::arg("temperature") = 1.0f, nb::arg("top_k") = 0, nb::arg("top_p") = 1.0f,
        nb::arg("seed") = 1337,
        nb::sig("def generate(model: Model, prompt: numpy.typing.NDArray[numpy.int32], *, "
                "max_new_tokens: int, temperature: float = 1.0, "
                "top_k: int = 0, top_p: float = 1.0, seed: int = 1337) -> "
                "numpy.typing.NDArray[numpy.int32]"),
        "The new token ids after a prompt of ids (temperature 0 = greedy; top_k 0 and top_p 1 "
        "= off; the seed of `moetrain generate --seed`). prompt + max_new_tokens must fit in "
        "max_seq_len.");
    m.def(
        "generate_text",
        [](nb::handle model_obj, const std::string& prompt, int max_new_tokens, float temperature,
           int64_t top_k, float top_p, uint64_t seed, const std::optional<std::string>& spec) {
            Model& model = nb::cast<Model&>(model_obj);
            std::shared_ptr<const Tokenizer> tok;
            if (spec) {
                tok = load_tokenizer(*spec);
                check_tokenizer(*tok, *spec, model.config());
            } else {
                tok = model_tokenizer(model_obj);
                if (!tok) tok = make_bytes_tokenizer();
            }
            // As `moetrain generate`: an empty prompt starts from the end-of-text id, else
            // from a newline.
            std::vector<int32_t> ids = tok->encode(prompt);
            if (ids.empty()) {
                if (auto eot = tok->eot_id())
                    ids.push_back(*eot);
                else
                    ids = tok->encode("\n");
            }
            std::vector<int32_t> out =
                run(model, ids, options(max_new_tokens, temperature, top_k, top_p, seed));
            std::string s = tok->decode(out);
            return nb::steal<nb::str>(
                PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace"));
        },
        nb::arg("model"), nb::arg("prompt"), nb::kw_only(), nb::arg("max_new_tokens"),
        nb::arg("temperature") = 1.0f, nb::arg("top_k") = 0, nb::arg("top_p") = 1.0f,
        nb::arg("seed") = 1337, nb::arg("tokenizer") = nb::none(),
        nb::sig("def generate_text(model: Model, prompt: str, *, max_new_tokens: int, "
                "temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, "
                "seed: int = 1337, tokenizer: str | None = None) -> str"),
        "The text generated after `prompt`, encoded and decoded with `tokenizer` (a spec: "
        "bytes, a tokenizer.json, a .tiktoken or a .model file; default: the tokenizer of the "
        "checkpoint the model was loaded from, else bytes). An empty prompt starts from the "
        "end-of-text id or a newline, as `moetrain generate`.");
}

}  // namespace moetrain::python

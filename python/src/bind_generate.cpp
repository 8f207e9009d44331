// Generation (docs/MODEL.md 7) with the KV cache and on-device sampling, from token ids or
// from text (bytes tokenizer, as `moetrain generate`), with the GIL released.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "moetrain/data.h"
#include "moetrain/generate.h"

namespace moetrain::python {

namespace {
GenerateOptions options(int max_new_tokens, float temperature, int64_t top_k, float top_p,
                        uint64_t seed) {
    GenerateOptions g;
    g.max_new_tokens = max_new_tokens;
    g.temperature = temperature;
    g.top_k = top_k;
    g.top_p = top_p;
    g.seed = seed;
    return g;
}

std::vector<int32_t> run(Model& model, std::vector<int32_t> prompt, const GenerateOptions& g) {
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
        [](Model& model, const std::string& prompt, int max_new_tokens, float temperature,
           int64_t top_k, float top_p, uint64_t seed) {
            std::vector<int32_t> ids = encode_text(prompt, "bytes");
            if (ids.empty()) ids.push_back('\n');  // as `moetrain generate` with no prompt
            std::string s = decode_tokens(
                run(model, ids, options(max_new_tokens, temperature, top_k, top_p, seed)), "bytes");
            return nb::steal<nb::str>(
                PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace"));
        },
        nb::arg("model"), nb::arg("prompt"), nb::kw_only(), nb::arg("max_new_tokens"),
        nb::arg("temperature") = 1.0f, nb::arg("top_k") = 0, nb::arg("top_p") = 1.0f,
        nb::arg("seed") = 1337,
        "The text generated after `prompt` (bytes tokenizer; an empty prompt starts from a "
        "newline, as `moetrain generate`).");
}

}  // namespace moetrain::python

// Training data (docs/MODEL.md section 5): tokenising a file, the 90/10 split and the
// sequential batch loader, the same code `moetrain train` reads its batches with.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>

#include "bindings.h"
#include "moetrain/data.h"

namespace moetrain::python {

namespace {
nb::object token_numpy(const std::vector<int32_t>& v) {
    return numpy_array(std::vector<int32_t>(v), {v.size()});
}
nb::object token_numpy(const TokenSource& s) {
    const auto n = static_cast<size_t>(s.size());
    std::vector<int32_t> v(n);
    s.read(0, s.size(), v.data());
    return numpy_array(std::move(v), {n});
}
TokenStream stream_of(const AnyArray& a, const char* what) {
    TokenArray t = token_array(a, what, 1);
    return make_token_stream(std::vector<int32_t>(t.data, t.data + t.shape[0]));
}
// Binds `name(<input>: str, tokenizer: str = 'bytes')`: the int32 array of the ids
// `tokenize(input, tokenizer)` makes.
void def_tokenize(nb::module_& m, const char* name,
                  std::vector<int32_t> (*tokenize)(const std::string&, const std::string&),
                  nb::arg input, const nb::sig& sig, const char* doc) {
    m.def(
        name,
        [tokenize](const std::string& in, const std::string& tokenizer) {
            return token_numpy(tokenize(in, tokenizer));
        },
        input, nb::arg("tokenizer") = "bytes", sig, doc);
}
}  // namespace

void bind_data(nb::module_& m) {
    m.def("split_pattern_names", &split_pattern_names,
          "Split patterns a tiktoken rank file can be used with (--tokenizer-pattern).");
    def_tokenize(m, "load_tokens", &load_tokens, nb::arg("path"),
                 nb::sig("def load_tokens(path: str, tokenizer: str = 'bytes') -> "
                         "numpy.typing.NDArray[numpy.int32]"),
                 "Tokenise a whole text file into an int32 array.");
    m.def(
        "split_tokens",
        [](const AnyArray& tokens) {
            TokenArray t = token_array(tokens, "tokens", 1);
            TokenSplit s = split_tokens(std::vector<int32_t>(t.data, t.data + t.shape[0]));
            return std::make_pair(token_numpy(*s.train), token_numpy(*s.val));
        },
        nb::arg("tokens"),
        nb::sig("def split_tokens(tokens: numpy.typing.NDArray[numpy.int32]) -> "
                "tuple[numpy.typing.NDArray[numpy.int32], "
                "numpy.typing.NDArray[numpy.int32]]"),
        "The train (first floor(0.9 n) tokens) and validation split, as `moetrain train` makes.");
    def_tokenize(m, "encode_text", &encode_text, nb::arg("text"),
                 nb::sig("def encode_text(text: str, tokenizer: str = 'bytes') -> "
                         "numpy.typing.NDArray[numpy.int32]"),
                 "Token ids of a text.");
    m.def(
        "decode_tokens",
        [](const AnyArray& ids, const std::string& tokenizer) {
            TokenArray t = token_array(ids, "ids", 1);
            std::string s =
                decode_tokens(std::vector<int32_t>(t.data, t.data + t.shape[0]), tokenizer);
            return nb::steal<nb::str>(
                PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace"));
        },
        nb::arg("ids"), nb::arg("tokenizer") = "bytes",
        "Text of token ids (invalid UTF-8 and unknown ids become U+FFFD).");

    nb::class_<BatchLoader>(m, "BatchLoader",
                            "Consecutive windows of B*T+1 tokens (docs/MODEL.md 5): x = "
                            "tokens[pos:pos+B*T], y shifted by one; wraps to 0 at the end.")
        .def(
            "__init__",
            [](BatchLoader* self, const AnyArray& tokens, int batch, int seq,
               const std::string& split) {
                new (self) BatchLoader(stream_of(tokens, "tokens"), batch, seq, split);
            },
            nb::arg("tokens"), nb::arg("batch"), nb::arg("seq"), nb::arg("split") = "train")
        .def(
            "next",
            [](BatchLoader& l) {
                const size_t n = static_cast<size_t>(l.batch()) * static_cast<size_t>(l.seq());
                std::vector<int32_t> x(n), y(n);
                l.next(x.data(), y.data());
                std::vector<size_t> shape{static_cast<size_t>(l.batch()),
                                          static_cast<size_t>(l.seq())};
                return std::make_pair(numpy_array(std::move(x), shape),
                                      numpy_array(std::move(y), shape));
            },
            nb::sig("def next(self) -> tuple[numpy.typing.NDArray[numpy.int32], "
                    "numpy.typing.NDArray[numpy.int32]]"),
            "The next (x, y) batch, int32 arrays of shape [B, T]; then advance.")
        .def_prop_rw("position", &BatchLoader::position, &BatchLoader::set_position,
                     "token position of the next batch (saved in checkpoints)")
        .def_prop_ro("batch", &BatchLoader::batch)
        .def_prop_ro("seq", &BatchLoader::seq)
        .def("batches_per_epoch", &BatchLoader::batches_per_epoch);
}

}  // namespace moetrain::python

// A structural check of a serialized SentencePiece ModelProto, before libsentencepiece sees it.
// The library aborts the process (an uncatchable exception from its trie builder) on some
// malformed models (a piece with empty text or a NUL byte); this walks the protobuf wire format and
// refuses those in one line instead.
#pragma once

#include <string_view>

namespace moetrain {

// Throws moetrain::Error naming the first problem: not protobuf wire format, a piece message that
// does not parse, or a piece with empty text or a NUL byte.
void check_sentencepiece_proto(std::string_view model_proto);

}  // namespace moetrain

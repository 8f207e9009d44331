#include "tokenizer/nfc.h"

#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <vector>

#include "moetrain/error.h"
#include "tokenizer/unicode_class.h"

namespace moetrain::tok {
namespace {

void nfc_valid_run(std::string_view run, std::string& out) {
    UErrorCode err = U_ZERO_ERROR;
    const UNormalizer2* nfc = unorm2_getNFCInstance(&err);
    MT_CHECK(U_SUCCESS(err), "ICU: no NFC normalizer (", u_errorName(err), ")");
    thread_local std::vector<UChar> in16, out16;
    thread_local std::string bytes;
    in16.resize(run.size() + 1);
    int32_t n16 = 0;
    u_strFromUTF8(in16.data(), static_cast<int32_t>(in16.size()), &n16, run.data(),
                  static_cast<int32_t>(run.size()), &err);
    MT_CHECK(U_SUCCESS(err), "ICU: UTF-8 to UTF-16 failed (", u_errorName(err), ")");
    // NFC can grow a string (a composition exclusion decomposes), at most 3x in UTF-16.
    out16.resize(static_cast<size_t>(n16) * 3 + 16);
    const int32_t m16 = unorm2_normalize(nfc, in16.data(), n16, out16.data(),
                                         static_cast<int32_t>(out16.size()), &err);
    MT_CHECK(U_SUCCESS(err), "ICU: NFC normalization failed (", u_errorName(err), ")");
    bytes.resize(static_cast<size_t>(m16) * 3 + 4);
    int32_t n8 = 0;
    u_strToUTF8(bytes.data(), static_cast<int32_t>(bytes.size()), &n8, out16.data(), m16, &err);
    MT_CHECK(U_SUCCESS(err), "ICU: UTF-16 to UTF-8 failed (", u_errorName(err), ")");
    out.append(bytes.data(), static_cast<size_t>(n8));
}

}  // namespace

void nfc_normalize(std::string_view in, std::string& out) {
    out.clear();
    size_t i = 0;
    while (i < in.size() && static_cast<unsigned char>(in[i]) < 0x80) ++i;
    if (i == in.size()) {
        out.assign(in);
        return;
    }
    thread_local std::vector<Char> chars;
    decode_chars(in, chars);
    size_t run = 0;  // start of the current valid run
    for (size_t k = 0; k + 1 < chars.size(); ++k) {
        if (chars[k].cp != 0xFFFFFFFFu) continue;
        const size_t at = chars[k].offset;
        if (at > run) nfc_valid_run(in.substr(run, at - run), out);
        out += in[at];
        run = at + 1;
    }
    if (in.size() > run) nfc_valid_run(in.substr(run), out);
}

}  // namespace moetrain::tok

//===- Unicode.cpp - UTF-8, categories, folding and NFC ------------------------===//
#include "Unicode.h"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

namespace dstok {

size_t utf8Length(unsigned char b) {
  return b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 1;
}

namespace {
/// The valid sequence at `s[i]`: its length (0 when invalid) and code point; `prefix` the
/// bytes that were a valid start (the maximal subpart to replace).
size_t decodeAt(std::string_view s, size_t i, char32_t &c, size_t &prefix) {
  unsigned char b = s[i];
  prefix = 1;
  if (b < 0x80) {
    c = b;
    return 1;
  }
  size_t n = utf8Length(b);
  if (n == 1 || b == 0xC0 || b == 0xC1 || b > 0xF4)
    return 0;
  c = b & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    if (i + k >= s.size())
      return 0;
    unsigned char x = s[i + k];
    // The second byte's range excludes overlong forms, surrogates and values past U+10FFFF.
    unsigned char lo = 0x80, hi = 0xBF;
    if (k == 1) {
      if (b == 0xE0)
        lo = 0xA0;
      else if (b == 0xED)
        hi = 0x9F;
      else if (b == 0xF0)
        lo = 0x90;
      else if (b == 0xF4)
        hi = 0x8F;
    }
    if (x < lo || x > hi)
      return 0;
    c = (c << 6) | (x & 0x3F);
    prefix = k + 1;
  }
  return n;
}
} // namespace

std::vector<char32_t> codePoints(std::string_view text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    char32_t c;
    size_t prefix;
    size_t n = decodeAt(text, i, c, prefix);
    out.push_back(n ? c : 0xFFFD);
    i += n ? n : prefix;
  }
  return out;
}

void appendUtf8(std::string &out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string toUtf8(const std::u32string_view cps) {
  std::string out;
  for (char32_t c : cps)
    appendUtf8(out, c);
  return out;
}

std::string lossyUtf8(std::string_view bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size();) {
    char32_t c;
    size_t prefix;
    size_t n = decodeAt(bytes, i, c, prefix);
    if (n) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      appendUtf8(out, 0xFFFD);
      i += prefix;
    }
  }
  return out;
}

bool validUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    char32_t c;
    size_t prefix;
    size_t n = decodeAt(text, i, c, prefix);
    if (!n)
      return false;
    i += n;
  }
  return true;
}

bool inCategories(char32_t c, uint32_t mask) {
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & mask) != 0;
}

uint32_t categoryMask(std::string_view name) {
  static const struct {
    const char *name;
    uint32_t mask;
  } table[] = {{"L", U_GC_L_MASK},   {"Lu", U_GC_LU_MASK}, {"Ll", U_GC_LL_MASK},
               {"Lt", U_GC_LT_MASK}, {"Lm", U_GC_LM_MASK}, {"Lo", U_GC_LO_MASK},
               {"M", U_GC_M_MASK},   {"Mn", U_GC_MN_MASK}, {"Mc", U_GC_MC_MASK},
               {"Me", U_GC_ME_MASK}, {"N", U_GC_N_MASK},   {"Nd", U_GC_ND_MASK},
               {"Nl", U_GC_NL_MASK}, {"No", U_GC_NO_MASK}, {"P", U_GC_P_MASK},
               {"S", U_GC_S_MASK},   {"Z", U_GC_Z_MASK},   {"C", U_GC_C_MASK}};
  for (const auto &e : table)
    if (name == e.name)
      return e.mask;
  return 0;
}

bool isSpace(char32_t c) { return u_isUWhiteSpace(static_cast<UChar32>(c)); }

char32_t foldCase(char32_t c) {
  return static_cast<char32_t>(u_foldCase(static_cast<UChar32>(c), U_FOLD_CASE_DEFAULT));
}

std::string nfc(std::string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const UNormalizer2 *n = unorm2_getNFCInstance(&status);
  std::u16string in(text.size() + 1, u'\0'), out;
  int32_t len = 0;
  u_strFromUTF8(in.data(), static_cast<int32_t>(in.size()), &len, text.data(),
                static_cast<int32_t>(text.size()), &status);
  if (U_FAILURE(status))
    return std::string(text);
  out.resize(static_cast<size_t>(len) * 3 + 16);
  int32_t outLen = unorm2_normalize(n, in.data(), len, out.data(),
                                    static_cast<int32_t>(out.size()), &status);
  if (U_FAILURE(status))
    return std::string(text);
  std::string result(static_cast<size_t>(outLen) * 4 + 4, '\0');
  int32_t bytes = 0;
  u_strToUTF8(result.data(), static_cast<int32_t>(result.size()), &bytes, out.data(), outLen,
              &status);
  result.resize(bytes);
  return result;
}

} // namespace dstok

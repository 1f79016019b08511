//===- Unicode.h - UTF-8 and the Unicode properties the tokenizer reads ---------===//
//
// Code points in and out of UTF-8 (invalid bytes decoded as U+FFFD, one per maximal invalid
// subpart, as Rust's String::from_utf8_lossy does), the general categories and white space
// that tokenizer.json's regular expressions name, case folding and NFC, from ICU.
//
#ifndef DS_LIB_TOKENIZER_UNICODE_H
#define DS_LIB_TOKENIZER_UNICODE_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dstok {

/// The code points of `text` (which must be valid UTF-8: the tokenizer's input).
std::vector<char32_t> codePoints(std::string_view text);
/// Appends `c` as UTF-8.
void appendUtf8(std::string &out, char32_t c);
std::string toUtf8(const std::u32string_view cps);
/// `bytes` as text: each maximal invalid subpart replaced by U+FFFD.
std::string lossyUtf8(std::string_view bytes);
/// Whether `text` is valid UTF-8.
bool validUtf8(std::string_view text);
/// The length of the UTF-8 sequence that starts with byte `b` (1 for an invalid lead byte).
size_t utf8Length(unsigned char b);

/// A general-category mask (ICU's U_GC_*_MASK bits) and whether `c` is in it.
bool inCategories(char32_t c, uint32_t mask);
/// The mask of a property name as \p{...} writes it ("L", "Lu", "N", "Nd", "P", ...); 0 when
/// unknown.
uint32_t categoryMask(std::string_view name);
/// Unicode's White_Space (what \s matches).
bool isSpace(char32_t c);
/// Simple case folding (what (?i) compares).
char32_t foldCase(char32_t c);
/// `text` in Normalization Form C.
std::string nfc(std::string_view text);

} // namespace dstok

#endif

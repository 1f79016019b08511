//===- fuzz_checkpoint_index.cpp - the checkpoint index reader on arbitrary text ===//
#include "checkpoint/index.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size), err;
  dsrt::ckpt::Index x;
  if (!dsrt::ckpt::parseIndex(text, "fuzz/checkpoint.json", x, err))
    return 0;
  // What resume relies on: every piece inside its part of its tensor and a listed file, the
  // pieces covering each part exactly once; a split that divides the tensor; and the index
  // writes back to an equal index.
  for (const dsrt::ckpt::TensorEntry &t : x.tensors) {
    const dsrt::ckpt::Split &s = t.split;
    if (!s.whole() && (s.dim < 0 || static_cast<size_t>(s.dim) >= t.dims.size() ||
                       t.dims[s.dim] % (s.segments * s.parts) != 0))
      __builtin_trap();
    int64_t covered = 0;
    for (const dsrt::ckpt::Piece &p : t.pieces) {
      if (p.file < 0 || static_cast<size_t>(p.file) >= x.files.size() || p.start < 0 ||
          p.count <= 0 || p.start > t.partNumel() - p.count || p.part < 0 || p.part >= s.parts)
        __builtin_trap();
      covered += p.count;
    }
    if (covered != t.numel)
      __builtin_trap();
  }
  dsrt::ckpt::Index again;
  if (!dsrt::ckpt::parseIndex(dsrt::ckpt::formatIndex(x), "again", again, err) ||
      again.tensors.size() != x.tensors.size() || again.files != x.files)
    __builtin_trap();
  return 0;
}

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
  // What resume relies on: every piece inside its tensor and a listed file, the pieces
  // covering each tensor exactly once; and the index writes back to an equal index.
  for (const dsrt::ckpt::TensorEntry &t : x.tensors) {
    int64_t covered = 0;
    for (const dsrt::ckpt::Piece &p : t.pieces) {
      if (p.file < 0 || static_cast<size_t>(p.file) >= x.files.size() || p.start < 0 ||
          p.count <= 0 || p.start > t.numel - p.count)
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

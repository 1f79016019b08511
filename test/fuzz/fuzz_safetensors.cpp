//===- fuzz_safetensors.cpp - the safetensors reader on arbitrary bytes ---------===//
#include "dsrt/io.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size), err;
  std::vector<dsrt::io::NamedArray> out;
  if (dsrt::io::parseSafetensors(bytes, "fuzz.safetensors", out, err)) {
    for (const auto &n : out) {
      int64_t numel = 0;
      if (!dsrt::io::checkedNumel(n.second.dims, numel) ||
          n.second.data.size() != static_cast<size_t>(numel) * dsrt::io::elementSize(n.second.dtype))
        __builtin_trap();
    }
  }
  return 0;
}

//===- fuzz_npy.cpp - the .npy reader on arbitrary bytes ------------------------===//
#include "dsrt/io.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size), err;
  dsrt::io::Array a;
  if (dsrt::io::parseNpy(bytes, "fuzz.npy", a, err)) {
    // What the driver relies on: the data hold exactly the shape's elements.
    int64_t n = 0;
    if (!dsrt::io::checkedNumel(a.dims, n) ||
        a.data.size() != static_cast<size_t>(n) * dsrt::io::elementSize(a.dtype))
      __builtin_trap();
  }
  return 0;
}

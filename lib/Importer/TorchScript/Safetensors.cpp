//===- Safetensors.cpp - a writer of the safetensors format ----------------===//
//
// Layout: u64 little-endian header size, a JSON header {name: {dtype, shape, data_offsets}},
// padded with spaces to a multiple of 8, then the raw little-endian tensor bytes.
//
#include "Safetensors.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

std::string mlir::ds::writeSafetensors(const std::string &path,
                                       const std::vector<SafetensorsEntry> &entries) {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  size_t offset = 0;
  for (const SafetensorsEntry &e : entries) {
    header += ",\"" + e.name + "\":{\"dtype\":\"" + e.dtype + "\",\"shape\":[";
    for (size_t k = 0; k < e.shape.size(); ++k)
      header += (k ? "," : "") + std::to_string(e.shape[k]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + e.bytes) + "]}";
    offset += e.bytes;
  }
  header += "}";
  while (header.size() % 8)
    header += ' ';

  std::string tmp = path + ".tmp";
  FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    return "cannot write '" + tmp + "': " + std::strerror(errno);
  uint64_t size = header.size();
  unsigned char le[8];
  for (int k = 0; k < 8; ++k)
    le[k] = (size >> (8 * k)) & 0xff;
  bool ok = std::fwrite(le, 1, 8, f) == 8 &&
            std::fwrite(header.data(), 1, header.size(), f) == header.size();
  for (const SafetensorsEntry &e : entries)
    ok = ok && (e.bytes == 0 || std::fwrite(e.data, 1, e.bytes, f) == e.bytes);
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return "cannot write '" + path + "': " + std::strerror(errno);
  }
  return "";
}

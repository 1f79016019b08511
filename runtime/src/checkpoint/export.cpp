//===- export.cpp - the fp32 state_dict of a checkpoint ------------------------===//
#include "export.h"
#include "rank_file.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

namespace dsrt::ckpt {

bool exportStateDict(const std::string &dir, const Index &index, const std::string &out,
                     int64_t &tensors, uint64_t &bytes, std::string &err) {
  std::map<std::string, const TensorEntry *> masters;
  for (const TensorEntry &t : index.tensors)
    if (t.kind == kOptimizerStateKind && t.role == dsrt_slot_role_name(DSRT_ROLE_MASTER))
      masters[t.of] = &t;
  struct Item {
    std::string name;
    const TensorEntry *source; ///< what is read and written: the master, or the tensor
    std::vector<int64_t> dims;
  };
  std::vector<Item> items;
  for (const TensorEntry &t : index.tensors) {
    if (t.kind != parameterKind() && t.kind != bufferKind())
      continue;
    auto m = masters.find(t.name);
    const TensorEntry *src = m != masters.end() ? m->second : &t;
    items.push_back({t.name, src, t.dims});
    for (const std::string &a : t.aliases)
      items.push_back({a, src, t.dims});
  }
  std::vector<io::SafetensorsEntry> layout;
  uint64_t offset = 0;
  for (const Item &it : items) {
    uint64_t n = static_cast<uint64_t>(it.source->numel) * io::elementSize(it.source->dtype);
    layout.push_back({it.name, it.source->dtype, it.dims, nullptr, static_cast<size_t>(n)});
    offset += n;
  }
  std::string prefix = io::safetensorsPrefix(layout);
  std::string tmp = out + ".tmp";
  std::FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f) {
    err = "cannot write '" + tmp + "': " + std::strerror(errno);
    return false;
  }
  bool ok = std::fwrite(prefix.data(), 1, prefix.size(), f) == prefix.size();
  TensorReader reader(dir, index);
  std::vector<char> raw;
  for (const Item &it : items) {
    if (!ok)
      break;
    const TensorEntry &src = *it.source;
    raw.resize(static_cast<size_t>(src.numel) * io::elementSize(src.dtype));
    if (!reader.read(src, 0, src.numel, raw.data(), err)) {
      std::fclose(f);
      std::remove(tmp.c_str());
      return false;
    }
    ok = raw.empty() || std::fwrite(raw.data(), 1, raw.size(), f) == raw.size();
  }
  ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), out.c_str()) != 0) {
    err = "cannot write '" + out + "': " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  tensors = static_cast<int64_t>(items.size());
  bytes = offset;
  return true;
}

} // namespace dsrt::ckpt

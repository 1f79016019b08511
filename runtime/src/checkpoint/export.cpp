//===- export.cpp - reading tensors of a checkpoint, and its fp32 state_dict ----===//
#include "export.h"

#include "../core/half.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace dsrt::ckpt {

bool TensorReader::read(const TensorEntry &t, int64_t begin, int64_t end, void *dst,
                        std::string &err) {
  size_t es = io::elementSize(t.dtype);
  for (const Piece &p : t.pieces) {
    int64_t a = std::max(begin, p.start), b = std::min(end, p.start + p.count);
    if (a >= b)
      continue;
    auto f = files_.find(p.file);
    if (f == files_.end()) {
      auto file = std::make_unique<RankFile>();
      if (!file->open(dir_ + "/" + index_.files[p.file], err))
        return false;
      f = files_.emplace(p.file, std::move(file)).first;
    }
    if (!f->second->read(t.name, a - p.start, b - a, static_cast<char *>(dst) + (a - begin) * es,
                         err))
      return false;
  }
  return true;
}

bool exportStateDict(const std::string &dir, const Index &index, const std::string &out,
                     int64_t &tensors, uint64_t &bytes, std::string &err) {
  std::map<std::string, const TensorEntry *> masters;
  for (const TensorEntry &t : index.tensors)
    if (t.kind == "optimizer_state" && t.role == "master")
      masters[t.of] = &t;
  struct Item {
    std::string name;
    const TensorEntry *source; ///< what is read: the master, or the tensor itself
    int32_t dtype;             ///< what is written
    std::vector<int64_t> dims;
  };
  std::vector<Item> items;
  for (const TensorEntry &t : index.tensors) {
    if (t.kind != "parameter" && t.kind != "buffer")
      continue;
    auto m = masters.find(t.name);
    const TensorEntry *src = m != masters.end() ? m->second : &t;
    int32_t dtype = t.kind == "parameter" && isHalfType(src->dtype) ? DSRT_F32 : src->dtype;
    items.push_back({t.name, src, dtype, t.dims});
    for (const std::string &a : t.aliases)
      items.push_back({a, src, dtype, t.dims});
  }
  std::vector<io::SafetensorsEntry> layout;
  uint64_t offset = 0;
  for (const Item &it : items) {
    uint64_t n = static_cast<uint64_t>(it.source->numel) * io::elementSize(it.dtype);
    layout.push_back({it.name, it.dtype, it.dims, nullptr, static_cast<size_t>(n)});
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
  std::vector<char> raw, wide;
  for (const Item &it : items) {
    if (!ok)
      break;
    const TensorEntry &s = *it.source;
    raw.resize(static_cast<size_t>(s.numel) * io::elementSize(s.dtype));
    if (!reader.read(s, 0, s.numel, raw.data(), err)) {
      std::fclose(f);
      std::remove(tmp.c_str());
      return false;
    }
    const char *data = raw.data();
    if (it.dtype != s.dtype) { // a 16-bit parameter without a master
      wide.resize(static_cast<size_t>(s.numel) * sizeof(float));
      for (int64_t i = 0; i < s.numel; ++i) {
        uint16_t h;
        std::memcpy(&h, raw.data() + i * 2, 2);
        float v = halfToFloat(s.dtype, h);
        std::memcpy(wide.data() + i * 4, &v, 4);
      }
      data = wide.data();
    }
    size_t n = static_cast<size_t>(s.numel) * io::elementSize(it.dtype);
    ok = n == 0 || std::fwrite(data, 1, n, f) == n;
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

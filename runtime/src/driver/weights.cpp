//===- weights.cpp - initial weights, --save-weights and --dump-grads -----------===//
#include "weights.h"

#include "../core/half.h"

#include <algorithm>
#include <cstring>
#include <map>

namespace dsrt::driver {

using io::Array;

int32_t masterOf(const ProgramSpec &p, const SlotSpec &s, int64_t &offset) {
  offset = 0;
  if (!dsrt::isHalfType(s.dtype) || s.kind != "parameter")
    return -1;
  std::string flat = s.viewOf;
  if (!s.shardedBy.empty())
    flat = s.shardedBy.substr(0, s.shardedBy.rfind('@'));
  if (flat.empty())
    return p.slotNamed(s.name + "@master");
  offset = s.offset;
  return p.slotNamed(flat + "@master");
}

void copyElements(void *dst, int32_t to, const void *src, int32_t from, int64_t n) {
  if (to == from) {
    std::memcpy(dst, src, static_cast<size_t>(n) * dsrt_dtype_size(to));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    float v = from == DSRT_F32 ? static_cast<const float *>(src)[i]
                               : dsrt::halfToFloat(from, static_cast<const uint16_t *>(src)[i]);
    if (to == DSRT_F32)
      static_cast<float *>(dst)[i] = v;
    else
      static_cast<uint16_t *>(dst)[i] = dsrt::floatToHalf(to, v);
  }
}

namespace {
/// Writes elements [offset, offset + n) of a tensor whose rank-`rank` part of `shardNumel`
/// elements per rank is `part` (a ZeRO shard), or all of it when `part` is not sharded.
void writeIntoShard(int32_t rank, dsrt_tensor *part, bool sharded, int64_t offset,
                    const void *src, int32_t srcDtype, int64_t n) {
  int64_t lo = sharded ? part->numel * rank : 0, hi = lo + part->numel;
  int64_t from = std::max(lo, offset), to = std::min(hi, offset + n);
  if (from >= to)
    return;
  size_t es = dsrt_dtype_size(srcDtype), ed = dsrt_dtype_size(part->dtype);
  copyElements(static_cast<char *>(part->data) + (from - lo) * ed, part->dtype,
               static_cast<const char *>(src) + (from - offset) * es, srcDtype, to - from);
}

} // namespace

bool loadWeights(const ProgramSpec &p, const Group &g, const std::string &path,
                 std::string &err) {
  const std::vector<SlotSpec> &slots = p.slots;
  dsrt_context *ctx = g.ctx();
  std::vector<io::NamedArray> file;
  std::string e;
  if (!io::readSafetensors(path, file, e)) {
    err = "initial weights: " + e + " (pass --weights FILE.safetensors)";
    return false;
  }
  std::map<std::string, const Array *> byName;
  for (const auto &n : file)
    byName[n.first] = &n.second;
  for (size_t i = 0; i < slots.size(); ++i) {
    const SlotSpec &s = slots[i];
    if (s.kind != "parameter" && s.kind != "buffer")
      continue;
    const Array *a = nullptr;
    std::string key = s.name;
    for (size_t k = 0; k <= s.aliases.size() && !a; ++k) {
      const std::string &n = k == 0 ? s.name : s.aliases[k - 1];
      auto it = byName.find(n);
      if (it != byName.end()) {
        a = it->second;
        key = n;
      }
    }
    if (!a) {
      err = "weights '" + path + "' have no tensor '" + s.name + "' (" + s.kind + " " +
            io::formatDims(s.dims) + " " + io::dtypeName(s.dtype) +
            "); save the model's full state_dict";
      return false;
    }
    // Mixed precision: the model's f32 weights initialize the masters and, rounded, the
    // 16-bit parameters.
    bool widened = dsrt::isHalfType(s.dtype) && a->dtype == DSRT_F32;
    if (a->dims != s.dims || (a->dtype != s.dtype && !widened)) {
      err = "weights '" + path + "': tensor '" + key + "' is " + a->describe() + " but the " +
            s.kind + " is " + io::formatDims(s.dims) + " " +
            io::dtypeName(s.dtype) + "; use the weights of the compiled model";
      return false;
    }
    int64_t n = static_cast<int64_t>(s.bytes() / io::elementSize(s.dtype));
    int64_t masterOffset = 0;
    if (int32_t m = masterOf(p, s, masterOffset); m >= 0) {
      dsrt_tensor *master = dsrt_slot_get(ctx, m);
      writeIntoShard(g.rank(), master, slots[m].sharded, masterOffset, a->data.data(), a->dtype, n);
      dsrt_tensor_free(ctx, master);
    }
    if (!s.shardedBy.empty()) { // stage 3: this rank's part of the parameter, into its shard
      dsrt_tensor *part = dsrt_slot_get(ctx, p.slotNamed(s.shardedBy));
      writeIntoShard(g.rank(), part, true, s.offset, a->data.data(), a->dtype, n);
      dsrt_tensor_free(ctx, part);
      continue;
    }
    dsrt_tensor *t = dsrt_slot_get(ctx, static_cast<int32_t>(i));
    if (!a->data.empty())
      copyElements(t->data, t->dtype, a->data.data(), a->dtype, n);
    dsrt_tensor_free(ctx, t);
  }
  return true;
}

bool writeSlots(const ProgramSpec &p, const Group &g, const std::string &path, bool gradients,
                std::string &err) {
  const std::vector<SlotSpec> &slots = p.slots;
  dsrt_context *ctx = g.ctx();
  const int32_t worldSize = g.size(), rank = g.rank();
  std::vector<io::SafetensorsEntry> entries;
  std::vector<dsrt_tensor *> held;
  std::vector<std::vector<char>> summed; // gradients over all ranks (outside the arena)
  std::map<std::string, std::vector<char>> gathered; // stage-3 parameter shards, whole
  for (size_t i = 0; i < slots.size(); ++i) {
    const SlotSpec &s = slots[i];
    bool want = gradients ? s.kind == "gradient" : (s.kind == "parameter" || s.kind == "buffer");
    if (!want)
      continue;
    int64_t masterOffset = 0;
    if (int32_t m = gradients ? -1 : masterOf(p, s, masterOffset); m >= 0) {
      // Mixed precision: the export is the f32 masters (DeepSpeed's zero_to_fp32), gathered
      // when they are shards.
      std::string key = slots[m].name;
      auto it = gathered.find(key);
      if (it == gathered.end()) {
        dsrt_tensor *part = dsrt_slot_get(ctx, m);
        size_t bytes = static_cast<size_t>(part->numel) * dsrt_dtype_size(part->dtype);
        std::vector<char> all = slots[m].sharded && worldSize > 1
                                    ? g.gather(part->data, bytes)
                                    : std::vector<char>((char *)part->data,
                                                        (char *)part->data + bytes);
        dsrt_tensor_free(ctx, part);
        it = gathered.emplace(key, std::move(all)).first;
      }
      const char *data = it->second.data() + masterOffset * sizeof(float);
      uint64_t bytes = s.bytes() / dsrt_dtype_size(s.dtype) * sizeof(float);
      entries.push_back({s.name, DSRT_F32, s.dims, data, bytes});
      for (const std::string &a : s.aliases)
        entries.push_back({a, DSRT_F32, s.dims, data, bytes});
      continue;
    }
    if (!s.shardedBy.empty()) { // stage 3: gather the shard (every rank takes part)
      auto it = gathered.find(s.shardedBy);
      if (it == gathered.end()) {
        dsrt_tensor *part = dsrt_slot_get(ctx, p.slotNamed(s.shardedBy));
        size_t bytes = static_cast<size_t>(part->numel) * dsrt_dtype_size(part->dtype);
        std::vector<char> all = worldSize > 1 ? g.gather(part->data, bytes)
                                              : std::vector<char>((char *)part->data,
                                                                  (char *)part->data + bytes);
        dsrt_tensor_free(ctx, part);
        it = gathered.emplace(s.shardedBy, std::move(all)).first;
      }
      const char *data = it->second.data() + s.offset * io::elementSize(s.dtype);
      entries.push_back({s.name, s.dtype, s.dims, data, s.bytes()});
      for (const std::string &a : s.aliases)
        entries.push_back({a, s.dtype, s.dims, data, s.bytes()});
      continue;
    }
    dsrt_tensor *t = dsrt_slot_get(ctx, static_cast<int32_t>(i));
    held.push_back(t);
    size_t bytes = static_cast<size_t>(t->numel) * io::elementSize(t->dtype);
    std::vector<int64_t> dims(t->dims, t->dims + t->rank);
    if (gradients) {
      void *data = t->data;
      if (worldSize > 1) { // the data-parallel sum, which the optimizer step would apply
        summed.emplace_back(bytes);
        dsrt_tensor *sum = dsrt_tensor_borrow(ctx, t->dtype, t->rank, t->dims, summed.back().data());
        dsrt_event_release(dsrt_all_reduce(ctx, sum, t, DSRT_COMM_SUM));
        dsrt_tensor_free(ctx, sum);
        data = summed.back().data();
      }
      entries.push_back({s.of.empty() ? s.name : s.of, t->dtype, dims, data, bytes});
    } else {
      entries.push_back({s.name, t->dtype, dims, t->data, bytes});
      for (const std::string &a : s.aliases)
        entries.push_back({a, t->dtype, dims, t->data, bytes});
    }
  }
  bool ok = rank != 0 || io::writeSafetensors(path, entries, err);
  for (dsrt_tensor *t : held)
    dsrt_tensor_free(ctx, t);
  return ok;
}

} // namespace dsrt::driver

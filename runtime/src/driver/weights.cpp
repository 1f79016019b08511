//===- weights.cpp - initial weights, --save-weights and --dump-grads -----------===//
#include "weights.h"

#include "../checkpoint/rank_file.h"
#include "../core/half.h"

#include <algorithm>
#include <cstring>
#include <cerrno>
#include <cstdio>
#include <list>
#include <map>

namespace dsrt::driver {

using io::Array;

int32_t masterOf(const ProgramSpec &p, const SlotSpec &s, int64_t &offset) {
  offset = 0;
  if (!dsrt::isHalfType(s.dtype) || s.role != DSRT_ROLE_PARAMETER)
    return -1;
  std::string flat = s.viewOf;
  if (!s.shardedBy.empty())
    flat = s.shardedBy.substr(0, s.shardedBy.rfind('@'));
  const std::string master = std::string("@") + dsrt_slot_role_name(DSRT_ROLE_MASTER);
  if (flat.empty())
    return p.slotNamed(s.name + master);
  offset = s.offset;
  return p.slotNamed(flat + master);
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
// The driver reaches tensor data only by explicit copies between the device and the host.
/// Elements [offset, offset + n) of `t` into host memory.
void readElements(dsrt_context *ctx, dsrt_tensor *t, int64_t offset, int64_t n, void *host) {
  if (n <= 0)
    return;
  dsrt_tensor *v = dsrt_tensor_view_at(ctx, t, offset, 1, &n);
  dsrt_tensor_to_host(ctx, host, v);
  dsrt_tensor_free(ctx, v);
}
/// Drops a slot's value read for writing; an NVMe slot's is a copy, written back first.
void writeBack(dsrt_context *ctx, int32_t slot, dsrt_tensor *t) {
  if (dsrt_slot_space(ctx, slot) == DSRT_SPACE_NVME)
    dsrt_slot_set(ctx, slot, t);
  dsrt_tensor_free(ctx, t);
}
/// Host memory into elements [offset, offset + n) of `t`.
void writeElements(dsrt_context *ctx, dsrt_tensor *t, int64_t offset, int64_t n,
                   const void *host) {
  if (n <= 0)
    return;
  dsrt_tensor *v = dsrt_tensor_view_at(ctx, t, offset, 1, &n);
  dsrt_tensor_from_host(ctx, v, host);
  dsrt_tensor_free(ctx, v);
}

/// Writes elements [offset, offset + n) of a tensor whose rank-`rank` part of `shardNumel`
/// elements per rank is `part` (a ZeRO shard), or all of it when `part` is not sharded,
/// converted to `part`'s element type on the host first.
void writeIntoShard(dsrt_context *ctx, int32_t rank, dsrt_tensor *part, bool sharded,
                    int64_t offset, const void *src, int32_t srcDtype, int64_t n) {
  int64_t lo = sharded ? part->numel * rank : 0, hi = lo + part->numel;
  int64_t from = std::max(lo, offset), to = std::min(hi, offset + n);
  if (from >= to)
    return;
  size_t es = dsrt_dtype_size(srcDtype), ed = dsrt_dtype_size(part->dtype);
  std::vector<char> host(static_cast<size_t>(to - from) * ed);
  copyElements(host.data(), part->dtype, static_cast<const char *>(src) + (from - offset) * es,
               srcDtype, to - from);
  writeElements(ctx, part, from - lo, to - from, host.data());
}

/// Rank `index`'s part of a tensor split as `s` says (SlotSpec::splitDim): copies it out of the
/// whole tensor (`toWhole` false) or back into it, `es` bytes per element.
void movePart(const SlotSpec &s, char *whole, char *part, size_t es, int64_t index,
              bool toWhole) {
  // The checkpoint's geometry: each run of the part's elements that is contiguous in both.
  ckpt::forEachRun(s.globalDims(), s.tensorSplit(), index, 0, s.numel,
                   [&](int64_t global, int64_t local, int64_t n) {
                     char *w = whole + static_cast<size_t>(global) * es;
                     char *p = part + static_cast<size_t>(local) * es;
                     if (toWhole)
                       std::memcpy(w, p, static_cast<size_t>(n) * es);
                     else
                       std::memcpy(p, w, static_cast<size_t>(n) * es);
                   });
}

/// Whether this rank takes part in gathering split slot `s` whole (gatherParts): the ranks
/// along its split axis (tp, or ep for experts) whose other coordinates but the pipeline
/// stage are rank 0's.
bool gathersParts(const SlotSpec &s, const Group &g) {
  for (dsrt_mesh_axis a : {DSRT_AXIS_DP, DSRT_AXIS_EP, DSRT_AXIS_TP, DSRT_AXIS_SP})
    if (a != s.splitAxis && g.indexOn(a) != 0)
      return false;
  return true;
}

/// The whole tensor of a split slot on world rank 0, from every rank's `part` along the split
/// axis (the ranks for which gathersParts holds call this; `part` is their local tensor, `es`
/// bytes per element).
std::vector<char> gatherParts(const SlotSpec &s, const Group &g, const std::vector<char> &part,
                              size_t es) {
  const int32_t parts = static_cast<int32_t>(s.splitParts);
  std::vector<char> all(g.indexOn(s.splitAxis) == 0 ? part.size() * parts : 0);
  std::vector<int64_t> counts(parts, static_cast<int64_t>(part.size()));
  dsrt_event_release(dsrt_gather(g.ctx(), g.groupOf(s.splitAxis), all.data(), part.data(),
                                 counts.data(), 0));
  std::vector<char> whole;
  if (g.indexOn(s.splitAxis) != 0)
    return whole;
  whole.resize(all.size());
  for (int32_t q = 0; q < parts; ++q)
    movePart(s, whole.data(), all.data() + part.size() * q, es, q, true);
  return whole;
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
    if ((s.role != DSRT_ROLE_PARAMETER && s.role != DSRT_ROLE_BUFFER) ||
        !s.heldBy(g.indexOn(DSRT_AXIS_PP)))
      continue; // another pipeline stage's
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
      err = "weights '" + path + "' have no tensor '" + s.name + "' (" + s.kind() + " " +
            io::formatDims(s.dims) + " " + io::dtypeName(s.dtype) +
            "); save the model's full state_dict";
      return false;
    }
    // Mixed precision: the model's f32 weights initialize the masters and, rounded, the
    // 16-bit parameters.
    bool widened = dsrt::isHalfType(s.dtype) && a->dtype == DSRT_F32;
    if (a->dims != s.globalDims() || (a->dtype != s.dtype && !widened)) {
      err = "weights '" + path + "': tensor '" + key + "' is " + a->describe() + " but the " +
            s.kind() + " is " + io::formatDims(s.globalDims()) + " " +
            io::dtypeName(s.dtype) + "; use the weights of the compiled model";
      return false;
    }
    int64_t n = static_cast<int64_t>(s.bytes() / io::elementSize(s.dtype));
    // Tensor parallelism: this rank's part of the state_dict tensor.
    std::vector<char> part;
    const char *data = reinterpret_cast<const char *>(a->data.data());
    if (s.splitDim >= 0 && !a->data.empty()) {
      size_t es = io::elementSize(a->dtype);
      part.resize(static_cast<size_t>(n) * es);
      movePart(s, const_cast<char *>(data), part.data(), es, g.indexOn(s.splitAxis), false);
      data = part.data();
    }
    int64_t masterOffset = 0;
    if (int32_t m = masterOf(p, s, masterOffset); m >= 0) {
      dsrt_tensor *master = dsrt_slot_get(ctx, m);
      writeIntoShard(ctx, g.shardIndex(), master, slots[m].sharded, masterOffset, data, a->dtype, n);
      writeBack(ctx, m, master);
    }
    if (!s.shardedBy.empty()) { // stage 3: this rank's part of the parameter, into its shard
      dsrt_tensor *shard = dsrt_slot_get(ctx, p.slotNamed(s.shardedBy));
      writeIntoShard(ctx, g.shardIndex(), shard, true, s.offset, data, a->dtype, n);
      writeBack(ctx, p.slotNamed(s.shardedBy), shard);
      continue;
    }
    dsrt_tensor *t = dsrt_slot_get(ctx, static_cast<int32_t>(i));
    if (!a->data.empty())
      writeIntoShard(ctx, 0, t, false, 0, data, a->dtype, n);
    writeBack(ctx, static_cast<int32_t>(i), t);
  }
  return true;
}

bool exportWeights(const ProgramSpec &p, const Group &g, const std::string &path,
                   std::string &err) {
  const std::vector<SlotSpec> &slots = p.slots;
  dsrt_context *ctx = g.ctx();
  // ZeRO shards are over the ranks that hold replicas (dp x sp); tensor-parallel parts over
  // the tp ranks.
  const int32_t shards = g.shardCount(), shardIndex = g.shardIndex(), shardGroup = g.shardGroup();
  const int32_t rank = g.rank();
  // What each state_dict entry is read from: a slot this rank holds whole, or elements
  // [offset, offset + numel) of a state sharded over the data-parallel ranks; `split`, the
  // parameter's spec when this rank's slot is only its part along a mesh axis.
  struct Item {
    std::string name;
    int32_t dtype; ///< as written (and as held)
    std::vector<int64_t> dims;
    int64_t numel; ///< this rank's (its part's, when split)
    int32_t slot;
    bool sharded;
    int64_t offset;
    const SlotSpec *split;
  };
  std::vector<Item> items;
  for (size_t i = 0; i < slots.size(); ++i) {
    const SlotSpec &s = slots[i];
    if (s.role != DSRT_ROLE_PARAMETER && s.role != DSRT_ROLE_BUFFER)
      continue;
    Item it{s.name, s.dtype, s.globalDims(), s.numel, static_cast<int32_t>(i), false, 0,
            s.splitDim >= 0 ? &s : nullptr};
    int64_t masterOffset = 0;
    if (int32_t m = masterOf(p, s, masterOffset); m >= 0) {
      // Mixed precision: the export is the f32 masters (DeepSpeed's zero_to_fp32).
      it.dtype = DSRT_F32;
      it.slot = m;
      it.sharded = slots[m].sharded;
      it.offset = masterOffset;
    } else if (!s.shardedBy.empty()) { // stage 3: a part of every rank's parameter shard
      it.slot = p.slotNamed(s.shardedBy);
      it.sharded = true;
      it.offset = s.offset;
    }
    items.push_back(it);
    for (const std::string &a : s.aliases) {
      items.push_back(it);
      items.back().name = a;
    }
  }
  // Rank 0 writes the header, then each tensor in turn: its own slots directly, sharded
  // tensors window by window as the data-parallel ranks' parts of them arrive (a gather to
  // rank 0), so that no rank ever holds more than one window beyond its own state. A tensor
  // split over tp arrives whole at each tp rank of data-parallel index 0 first, then from
  // them at rank 0.
  std::FILE *f = nullptr;
  std::string tmp = path + ".tmp";
  if (rank == 0) {
    std::vector<io::SafetensorsEntry> layout;
    for (const Item &it : items) {
      int64_t whole = 1;
      for (int64_t d : it.dims)
        whole *= d;
      layout.push_back({it.name, it.dtype, it.dims, nullptr,
                        static_cast<size_t>(whole) * io::elementSize(it.dtype)});
    }
    std::string prefix = io::safetensorsPrefix(layout);
    f = std::fopen(tmp.c_str(), "wb");
    if (!f || std::fwrite(prefix.data(), 1, prefix.size(), f) != prefix.size())
      err = "cannot write '" + tmp + "': " + std::strerror(errno);
  }
  auto put = [&](const void *data, size_t n) {
    if (rank == 0 && err.empty() && n && std::fwrite(data, 1, n, f) != n)
      err = "cannot write '" + tmp + "': " + std::strerror(errno);
  };
  std::vector<char> window, mine, part, forward;
  std::vector<int64_t> counts(shards);
  // A pipeline: a tensor is read on the first stage that holds it, whose first rank (index 0
  // on every other axis) plays rank 0's part and then sends the bytes to rank 0.
  const int32_t ppIndex = g.indexOn(DSRT_AXIS_PP);
  const bool stageLeader = g.leadsStage(rank);
  for (const Item &it : items) {
    const SlotSpec &slot = slots[it.slot];
    const int32_t from = slot.stages.empty() || slot.heldBy(0) ? 0
                                                               : static_cast<int32_t>(slot.stages[0]);
    size_t es = io::elementSize(it.dtype);
    if (from != 0 && (rank == 0 || (ppIndex == from && stageLeader))) {
      int64_t whole = 1;
      for (int64_t d : it.dims)
        whole *= d;
      forward.resize(rank == 0 ? static_cast<size_t>(whole) * es : 0);
    }
    if (ppIndex != from) {
      if (rank == 0 && from != 0) { // the holder's leader sends it whole
        int64_t bytes = static_cast<int64_t>(forward.size());
        dsrt_tensor *in = dsrt_tensor_host(ctx, DSRT_I1, 1, &bytes, forward.data());
        dsrt_event *e = dsrt_send_recv(ctx, g.groupOf(DSRT_AXIS_PP), in, from, nullptr, -1);
        dsrt_event_wait(ctx, e);
        dsrt_event_release(e);
        dsrt_tensor_free(ctx, in);
        put(forward.data(), forward.size());
      }
      continue;
    }
    const bool writer = from == 0 ? rank == 0 : stageLeader;
    dsrt_tensor *t = dsrt_slot_get(ctx, it.slot);
    // Where this rank's windows go: the file (rank 0), the bytes to send (another stage's
    // leader) or its part (a split tensor).
    const bool collect = it.split && gathersParts(*it.split, g);
    part.clear();
    forward.clear();
    auto out = [&](const void *data, size_t n) {
      if (from == 0)
        put(data, n);
      else if (writer)
        forward.insert(forward.end(), static_cast<const char *>(data),
                       static_cast<const char *>(data) + n);
    };
    auto emit = [&](const void *data, size_t n) {
      if (collect)
        part.insert(part.end(), static_cast<const char *>(data),
                    static_cast<const char *>(data) + n);
      else
        out(data, n);
    };
    const int64_t per =
        static_cast<int64_t>(std::max<size_t>(ckpt::transferBufferBytes() / es, 1));
    if (!it.sharded || shards == 1) {
      // Window by window, so that the host holds at most one transfer buffer.
      for (int64_t a = 0; (writer || collect) && a < it.numel; a += per) {
        int64_t n = std::min(per, it.numel - a);
        mine.resize(static_cast<size_t>(n) * es);
        readElements(ctx, t, it.offset + a, n, mine.data());
        emit(mine.data(), mine.size());
      }
    } else {
      const int64_t shard = t->numel;
      for (int64_t a = 0; a < it.numel; a += per) {
        int64_t lo = it.offset + a, hi = it.offset + std::min(it.numel, a + per);
        for (int32_t q = 0; q < shards; ++q)
          counts[q] = std::max<int64_t>(0, std::min(hi, shard * (q + 1)) -
                                               std::max(lo, shard * q)) * es;
        window.resize(shardIndex == 0 ? static_cast<size_t>(hi - lo) * es : 0);
        mine.resize(static_cast<size_t>(counts[shardIndex]));
        readElements(ctx, t, std::max(lo, shard * shardIndex) - shard * shardIndex,
                     counts[shardIndex] / static_cast<int64_t>(es), mine.data());
        dsrt_event_release(
            dsrt_gather(ctx, shardGroup, window.data(), mine.data(), counts.data(), 0));
        if (shardIndex == 0)
          emit(window.data(), window.size());
      }
    }
    if (collect) {
      std::vector<char> whole = gatherParts(*it.split, g, part, es);
      out(whole.data(), whole.size());
    }
    dsrt_tensor_free(ctx, t);
    if (from != 0 && writer) {
      int64_t bytes = static_cast<int64_t>(forward.size());
      dsrt_tensor *in = dsrt_tensor_host(ctx, DSRT_I1, 1, &bytes, forward.data());
      dsrt_event *e = dsrt_send_recv(ctx, g.groupOf(DSRT_AXIS_PP), nullptr, -1, in, 0);
      dsrt_event_wait(ctx, e);
      dsrt_event_release(e);
      dsrt_tensor_free(ctx, in);
    }
  }
  if (f) {
    bool closed = std::fclose(f) == 0;
    if (err.empty() && (!closed || std::rename(tmp.c_str(), path.c_str()) != 0))
      err = "cannot write '" + path + "': " + std::strerror(errno);
    if (!err.empty())
      std::remove(tmp.c_str());
  }
  return err.empty();
}

bool dumpGradients(const ProgramSpec &p, const Group &g, const std::string &path,
                   std::string &err) {
  dsrt_context *ctx = g.ctx();
  // The ranks whose gradients the optimizer sums: dp, and sp (each differentiated its block
  // of the sequences); a parameter split over dp (experts) sums over the others only.
  const int32_t shardGroup = g.shardGroup();
  const int32_t ppIndex = g.indexOn(DSRT_AXIS_PP), rank = g.rank();
  std::vector<io::SafetensorsEntry> entries;
  std::vector<dsrt_tensor *> held;
  std::list<std::vector<char>> summed; // gradients (over the dp and sp ranks) on the host
  for (size_t i = 0; i < p.slots.size(); ++i) {
    const SlotSpec &s = p.slots[i];
    if (s.role != DSRT_ROLE_GRAD)
      continue;
    int32_t of = s.of.empty() ? -1 : p.slotNamed(s.of);
    const SlotSpec *split = of >= 0 && p.slots[of].splitDim >= 0 ? &p.slots[of] : nullptr;
    std::vector<int64_t> dims = split ? split->globalDims() : s.dims;
    const size_t es = io::elementSize(s.dtype);
    const int32_t replicas = split ? shardGroup & ~g.groupOf(split->splitAxis) : shardGroup;
    const bool several = dsrt_group_size(ctx, replicas) > 1;
    if (s.heldBy(ppIndex)) {
      dsrt_tensor *t = dsrt_slot_get(ctx, static_cast<int32_t>(i));
      held.push_back(t);
      size_t bytes = static_cast<size_t>(t->numel) * es;
      if (several && std::strcmp(dsrt_context_device(ctx), "cpu") == 0) {
        // The data-parallel sum, which the optimizer step would apply, into host memory
        // outside the arena (the MPI channel reduces host buffers).
        summed.emplace_back(bytes);
        dsrt_tensor *sum =
            dsrt_tensor_host(ctx, t->dtype, t->rank, t->dims, summed.back().data());
        dsrt_event_release(dsrt_all_reduce(ctx, replicas, sum, t, DSRT_COMM_SUM));
        dsrt_tensor_free(ctx, sum);
      } else if (several) { // a device's memory: the sum on the device, then to the host
        dsrt_tensor *sum = dsrt_tensor_alloc(ctx, t->dtype, t->rank, t->dims);
        dsrt_event *done = dsrt_all_reduce(ctx, replicas, sum, t, DSRT_COMM_SUM);
        dsrt_event_wait(ctx, done);
        dsrt_event_release(done);
        summed.emplace_back(bytes);
        dsrt_tensor_to_host(ctx, summed.back().data(), sum);
        dsrt_tensor_free(ctx, sum);
      } else {
        summed.emplace_back(bytes);
        dsrt_tensor_to_host(ctx, summed.back().data(), t);
      }
      // A split parameter's gradient is its part: the whole one on rank 0.
      if (split && gathersParts(*split, g))
        summed.back() = gatherParts(*split, g, summed.back(), es);
    }
    if (p.pipelineStages > 1) {
      // Each stage that holds it sends its leader's copy to rank 0, which sums them in stage
      // order (a tied embedding's partial gradients, as the optimizer sums them).
      int64_t numel = 1;
      for (int64_t d : dims)
        numel *= d;
      std::vector<char> total;
      std::vector<int64_t> from = s.stages;
      if (from.empty())
        for (int64_t r = 0; r < p.pipelineStages; ++r)
          from.push_back(r);
      for (int64_t h : from) {
        std::vector<char> got;
        if (h == 0 && rank == 0) {
          got = summed.back();
        } else if (h != 0 && (rank == 0 || (ppIndex == h && g.leadsStage(rank)))) {
          got.resize(static_cast<size_t>(numel) * es);
          if (rank != 0)
            got = summed.back();
          int64_t bytes = static_cast<int64_t>(got.size());
          dsrt_tensor *buf = dsrt_tensor_host(ctx, DSRT_I1, 1, &bytes, got.data());
          dsrt_event *e = rank == 0
                              ? dsrt_send_recv(ctx, g.groupOf(DSRT_AXIS_PP), buf, h, nullptr, -1)
                              : dsrt_send_recv(ctx, g.groupOf(DSRT_AXIS_PP), nullptr, -1, buf, 0);
          dsrt_event_wait(ctx, e);
          dsrt_event_release(e);
          dsrt_tensor_free(ctx, buf);
        }
        if (rank != 0 || got.empty())
          continue;
        if (total.empty()) {
          total = std::move(got);
        } else if (s.dtype == DSRT_F32) {
          float *acc = reinterpret_cast<float *>(total.data());
          const float *add = reinterpret_cast<const float *>(got.data());
          for (int64_t k = 0; k < numel; ++k)
            acc[k] += add[k];
        } else if (isHalfType(s.dtype)) { // as the update sums them: in f32, rounded once
          halfAccumulate(s.dtype, reinterpret_cast<uint16_t *>(total.data()),
                         reinterpret_cast<const uint16_t *>(got.data()), numel);
        } else if (err.empty()) {
          err = "the gradient '" + s.name + "' is held by several pipeline stages and is " +
                io::dtypeName(s.dtype) + "; --dump-grads sums such gradients in fp32, bf16 " +
                "and fp16 only";
        }
      }
      if (rank == 0) {
        summed.push_back(std::move(total));
        entries.push_back({s.of.empty() ? s.name : s.of, s.dtype, dims, summed.back().data(),
                           summed.back().size()});
      }
      continue;
    }
    entries.push_back({s.of.empty() ? s.name : s.of, s.dtype, dims, summed.back().data(),
                       summed.back().size()});
  }
  bool ok = err.empty() && (rank != 0 || io::writeSafetensors(path, entries, err));
  for (dsrt_tensor *t : held)
    dsrt_tensor_free(ctx, t);
  return ok;
}

} // namespace dsrt::driver

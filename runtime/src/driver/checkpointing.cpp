//===- checkpointing.cpp - sharded checkpoints of a training run ---------------===//
#include "checkpointing.h"

#include "../checkpoint/directory.h"
#include "../checkpoint/rank_file.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dsrt::driver {

namespace {
/// For tests of atomicity: DSRT_TEST_SAVE_DELAY_MS widens the windows a kill can hit.
void testDelay() {
  if (const char *ms = std::getenv("DSRT_TEST_SAVE_DELAY_MS"))
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms)));
}
} // namespace

Checkpointer::Checkpointer(const ProgramSpec &p, const Group &g, std::string tool)
    : p_(p), g_(g), tool_(std::move(tool)) {}

void Checkpointer::collect() {
  if (!tensors_.empty())
    return;
  const std::vector<SlotSpec> &slots = p_.slots;
  // Parameters and buffers in slot order, then optimizer state by parameter and role, so that
  // every layout lists the same tensors in the same order.
  std::vector<std::pair<std::pair<size_t, std::string>, Logical>> states;
  auto slotOf = [&](const std::string &name) { return static_cast<size_t>(p_.slotNamed(name)); };
  auto whole = [&](size_t i, ckpt::TensorEntry e) {
    const SlotSpec &s = slots[i];
    Logical t;
    t.entry = std::move(e);
    t.where = Where::Slot;
    t.slot = static_cast<int32_t>(i);
    int32_t flat = s.viewOf.empty() ? -1 : p_.slotNamed(s.viewOf);
    t.storage = flat >= 0 ? s.viewOf : s.name;
    t.storageOffset = flat >= 0 ? s.offset : 0;
    t.storageTotal = flat >= 0 ? slots[flat].numel : s.numel;
    t.stages = s.stages;
    return t;
  };
  auto sharded = [&](int32_t shardSlot, int64_t offset, ckpt::TensorEntry e) {
    Logical t;
    t.entry = std::move(e);
    t.where = Where::Shard;
    t.slot = shardSlot;
    t.offset = offset;
    t.shardNumel = slots[shardSlot].numel;
    t.storage = slots[shardSlot].name;
    t.storageOffset = offset;
    t.storageTotal = t.shardNumel * g_.shardCount();
    t.storageSharded = true;
    t.stages = slots[shardSlot].stages;
    return t;
  };
  // A tensor-parallel parameter's tensors (it, its optimizer state) are recorded whole, with
  // this rank's part of them.
  auto splitAs = [](Logical t, const SlotSpec &param) {
    t.localNumel = t.entry.numel;
    if (param.splitDim < 0)
      return t;
    t.split = param.tensorSplit();
    t.splitAxis = param.splitAxis;
    t.entry.dims = param.globalDims();
    io::checkedNumel(t.entry.dims, t.entry.numel);
    return t;
  };
  auto entry = [](const SlotSpec &s, std::string name, std::string kind, std::string of,
                  std::string role, std::vector<int64_t> dims) {
    ckpt::TensorEntry e;
    e.name = std::move(name);
    e.kind = std::move(kind);
    e.of = std::move(of);
    e.role = std::move(role);
    e.dtype = s.dtype;
    e.dims = std::move(dims);
    io::checkedNumel(e.dims, e.numel);
    return e;
  };
  for (size_t i = 0; i < slots.size(); ++i) {
    const SlotSpec &s = slots[i];
    const std::string role = dsrt_slot_role_name(s.role);
    if (!s.shardedBy.empty()) { // a parameter kept only in its flat buffer's shards
      ckpt::TensorEntry e = entry(s, s.name, s.kind(), "", "", s.dims);
      e.aliases = s.aliases;
      tensors_.push_back(splitAs(sharded(p_.slotNamed(s.shardedBy), s.offset, std::move(e)), s));
      continue;
    }
    switch (s.role) {
    case DSRT_ROLE_PARAMETER:
    case DSRT_ROLE_BUFFER: {
      ckpt::TensorEntry e = entry(s, s.name, s.kind(), "", "", s.dims);
      e.aliases = s.aliases;
      tensors_.push_back(splitAs(whole(i, std::move(e)), s));
      break;
    }
    case DSRT_ROLE_EXP_AVG:
    case DSRT_ROLE_EXP_AVG_SQ:
    case DSRT_ROLE_MOMENTUM_BUFFER:
    case DSRT_ROLE_MASTER:
    case DSRT_ROLE_LOSS_SCALE:
    case DSRT_ROLE_FOUND_INF:
      if (!s.sharded) {
        // Of a parameter (its moments), or of nothing (fp16's loss scale, found_inf).
        int32_t param = p_.slotNamed(s.of);
        Logical t = whole(i, entry(s, s.name, ckpt::kOptimizerStateKind, s.of, role, s.dims));
        states.push_back({{slotOf(s.of), role}, param >= 0
                                                     ? splitAs(std::move(t), slots[param])
                                                     : splitAs(std::move(t), s)});
        break;
      }
      for (const SlotSpec &m : slots) // the members of the flat buffer it partitions
        if (m.viewOf == s.of || (!m.shardedBy.empty() && m.shardedBy == s.of + "@shard")) {
          ckpt::TensorEntry e =
              entry(s, m.name + "@" + role, ckpt::kOptimizerStateKind, m.name, role, m.dims);
          states.push_back(
              {{slotOf(m.name), role}, splitAs(sharded(static_cast<int32_t>(i), m.offset, e), m)});
        }
      break;
    case DSRT_ROLE_GRAD:
    case DSRT_ROLE_GRAD_SHARD:
    case DSRT_ROLE_PARAM_SHARD: // (its parameters are recorded by name, above)
    case DSRT_ROLE_PARAMS:
    case DSRT_ROLE_GRADS:
    case DSRT_ROLE_PARAMS_SHARDED: // flat buffers: their members are
    case DSRT_ROLE_KV_CACHE:       // generation's requests, not the model's state
      break;
    }
  }
  std::stable_sort(states.begin(), states.end(),
                   [](const auto &a, const auto &b) { return a.first < b.first; });
  for (auto &st : states)
    tensors_.push_back(std::move(st.second));
  if (scaler_) { // fp16: the scaler's scale, hysteresis, last overflow, iteration, applied steps
    Logical t;
    t.entry.name = ckpt::kLossScalerKind;
    t.entry.kind = ckpt::kLossScalerKind;
    t.entry.dtype = DSRT_F64;
    t.entry.dims = {6};
    t.entry.numel = 6;
    t.where = Where::Host;
    t.storage = ckpt::kLossScalerKind;
    t.storageTotal = 6;
    t.localNumel = 6;
    tensors_.push_back(std::move(t));
  }
}

void Checkpointer::startRun() {
  run_ = g_.broadcast(g_.rank() == 0 ? ckpt::newRunId() : std::string());
}

bool Checkpointer::holds(const Logical &t, int32_t r) const {
  if (t.stages.empty())
    return true;
  return std::find(t.stages.begin(), t.stages.end(), g_.indexOf(r, DSRT_AXIS_PP)) !=
         t.stages.end();
}

void Checkpointer::writtenBy(const Logical &t, int32_t r, int64_t &begin, int64_t &end,
                             int64_t &part) const {
  // Rank r holds its part (tensor parallelism) of the storage, or its shard of it (ZeRO, over
  // dp x sp); the ranks that hold the same share the writing equally.
  part = t.split.whole() ? 0 : g_.indexOf(r, t.splitAxis);
  int32_t distinct = (t.split.whole() ? 0 : g_.groupOf(t.splitAxis)) |
                     (t.storageSharded ? g_.shardGroup() : 0);
  int32_t copies = g_.everyAxis() & ~distinct;
  int64_t lo = 0, hi = t.storageTotal;
  if (t.storageSharded) {
    lo = t.shardNumel * g_.shardIndexOf(r);
    hi = lo + t.shardNumel;
  }
  // A pipeline: only the ranks of the stages that hold it, stage after stage.
  int32_t n = g_.sizeWithin(copies), index = g_.indexWithin(r, copies);
  if (!t.stages.empty()) {
    if (!holds(t, r)) {
      begin = end = 0;
      return;
    }
    int32_t perStage = copies & ~g_.groupOf(DSRT_AXIS_PP);
    int64_t at = std::find(t.stages.begin(), t.stages.end(), g_.indexOf(r, DSRT_AXIS_PP)) -
                 t.stages.begin();
    n = g_.sizeWithin(perStage) * static_cast<int32_t>(t.stages.size());
    index = g_.indexWithin(r, perStage) + static_cast<int32_t>(at) * g_.sizeWithin(perStage);
  }
  int64_t a, b;
  ckpt::partOf(hi - lo, n, index, a, b);
  begin = std::max(lo + a, t.storageOffset) - t.storageOffset;
  end = std::min(lo + b, t.storageOffset + t.localNumel) - t.storageOffset;
  if (end < begin)
    end = begin = 0;
}

void Checkpointer::heldHere(const Logical &t, int64_t &begin, int64_t &end) const {
  begin = 0;
  end = holds(t, g_.rank()) ? t.localNumel : 0;
  if (t.where == Where::Shard) {
    int64_t lo = t.shardNumel * g_.shardIndex(), hi = lo + t.shardNumel;
    begin = std::max(lo, t.offset) - t.offset;
    end = std::min(hi, t.offset + t.localNumel) - t.offset;
    if (end < begin)
      end = begin = 0;
  }
}

dsrt_tensor *Checkpointer::viewOf(const Logical &t, int64_t e, int64_t n, char *&hostAt,
                                  std::map<int32_t, dsrt_tensor *> &slots) const {
  size_t es = io::elementSize(t.entry.dtype);
  hostAt = nullptr;
  if (t.where == Where::Host) {
    hostAt = reinterpret_cast<char *>(scaler_) + e * es;
    return nullptr;
  }
  auto it = slots.find(t.slot);
  if (it == slots.end())
    it = slots.emplace(t.slot, dsrt_slot_get(g_.ctx(), t.slot)).first;
  int64_t at = t.where == Where::Slot ? e : t.offset + e - t.shardNumel * g_.shardIndex();
  return dsrt_tensor_view_at(g_.ctx(), it->second, at, 1, &n);
}

void Checkpointer::copyOut(const Logical &t, int64_t e, int64_t n, void *host,
                           std::map<int32_t, dsrt_tensor *> &slots) const {
  char *hostAt;
  dsrt_tensor *v = viewOf(t, e, n, hostAt, slots);
  if (!v) {
    std::memcpy(host, hostAt, static_cast<size_t>(n) * io::elementSize(t.entry.dtype));
    return;
  }
  dsrt_tensor_to_host(g_.ctx(), host, v);
  dsrt_tensor_free(g_.ctx(), v);
}

void Checkpointer::copyIn(const Logical &t, int64_t e, int64_t n, const void *host,
                          std::map<int32_t, dsrt_tensor *> &slots) const {
  char *hostAt;
  dsrt_tensor *v = viewOf(t, e, n, hostAt, slots);
  if (!v) {
    std::memcpy(hostAt, host, static_cast<size_t>(n) * io::elementSize(t.entry.dtype));
    return;
  }
  dsrt_tensor_from_host(g_.ctx(), v, host);
  dsrt_tensor_free(g_.ctx(), v);
}

std::string Checkpointer::writeRankFile(const std::string &path) const {
  std::map<int32_t, dsrt_tensor *> slots;
  std::vector<ckpt::PieceSource> pieces;
  for (const Logical &t : tensors_) {
    int64_t b, e, part;
    writtenBy(t, g_.rank(), b, e, part);
    if (e == b)
      continue;
    // The copy out of the slot: the one explicit host copy, piece by piece.
    pieces.push_back({t.entry.name, t.entry.dtype, e - b,
                      [this, &t, b, &slots](int64_t off, int64_t n, void *dst) {
                        copyOut(t, b + off, n, dst, slots);
                      }});
  }
  std::string err;
  bool ok = ckpt::writeRankFile(path, pieces, ckpt::transferBufferBytes(), err);
  for (auto &[slot, t] : slots)
    dsrt_tensor_free(g_.ctx(), t);
  return ok ? "" : err;
}

bool Checkpointer::save(const std::string &dir, int64_t step, uint64_t &hostPeak) {
  collect();
  io::HostMemoryWindow window;
  window.begin();
  const bool root = g_.rank() == 0;
  std::string tag = g_.broadcast(root ? ckpt::tagFor(dir, step, run_) : std::string());
  std::string where = "checkpoint at step " + std::to_string(step) + ": ";
  ckpt::PartialSave partial;
  std::string err;
  if (root && !partial.create(dir, tag, run_, err))
    err = where + err;
  if (!g_.agree(tool_, err))
    return false;
  std::string path = ckpt::partialPath(dir, tag, run_);
  err = writeRankFile(path + "/" + ckpt::rankFileName(g_.rank(), g_.size()));
  testDelay();
  if (!g_.agree(tool_, err.empty() ? "" : where + err))
    return false;
  if (root) {
    ckpt::Index x;
    x.tag = tag;
    x.step = step;
    x.samplesConsumed = step * p_.G;
    x.run = run_;
    auto last = lastTag_.find(dir);
    x.previous = last == lastTag_.end() ? "" : last->second;
    x.worldSize = g_.size();
    x.mesh = g_.meshString();
    x.zeroStage = p_.zeroStage;
    x.precision = p_.precisionName();
    std::string rng(dsrt_rng_get(g_.ctx(), nullptr, 0) + 1, '\0');
    dsrt_rng_get(g_.ctx(), rng.data(), rng.size());
    rng.pop_back();
    x.rng = rng;
    x.numericConfig = p_.numericConfig();
    for (int32_t r = 0; r < g_.size(); ++r)
      x.files.push_back(ckpt::rankFileName(r, g_.size()));
    for (const Logical &t : tensors_) {
      ckpt::TensorEntry e = t.entry;
      e.split = t.split;
      for (int32_t r = 0; r < g_.size(); ++r) {
        int64_t b, en, part;
        writtenBy(t, r, b, en, part);
        if (en > b)
          e.pieces.push_back({r, b, en - b, part});
      }
      x.tensors.push_back(std::move(e));
    }
    std::string text = ckpt::formatIndex(x);
    std::string indexPath = path + "/checkpoint.json";
    std::FILE *f = std::fopen(indexPath.c_str(), "w");
    bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
    ok = (f && std::fflush(f) == 0 && ::fsync(fileno(f)) == 0) && ok;
    ok = (f && std::fclose(f) == 0) && ok;
    testDelay();
    if (!ok)
      err = where + "cannot write '" + indexPath + "': " + std::strerror(errno);
    else if (!partial.publish(err) || !ckpt::writeLatest(dir, tag, err))
      err = where + err;
    else
      ckpt::prune(dir, tag, run_, /*keep=*/2);
  }
  if (!g_.agree(tool_, err))
    return false;
  lastTag_[dir] = tag;
  hostPeak = window.peakGrowth();
  return true;
}

std::string Checkpointer::compatible(const ckpt::Index &x, const std::string &where) const {
  // The config's values that change the numbers (the compiler chose the keys; a checkpoint of
  // today's format recorded the same ones): every key either side has.
  io::Json saved, mine;
  std::string perr;
  io::parseJson(p_.numericConfig(), mine, perr);
  io::parseJson(x.numericConfig, saved, perr);
  std::vector<std::string> keys;
  for (const io::Json *side : {&mine, &saved})
    for (const auto &m : side->members)
      if (std::find(keys.begin(), keys.end(), m.first) == keys.end())
        keys.push_back(m.first);
  for (const std::string &key : keys) {
    const io::Json *a = saved.get(key), *b = mine.get(key);
    std::string as = a ? a->dump() : "null", bs = b ? b->dump() : "null";
    if (as != bs)
      return "checkpoint '" + where + "' was trained with " + key + " = " + as +
             " but this run has " + bs + "; resume with the same " + key +
             " (or start a new run without --resume)";
  }
  // The model: the same tensors, names, shapes and types.
  if (x.tensors.size() != tensors_.size())
    return "checkpoint '" + where + "' is of another model: it has " +
           std::to_string(x.tensors.size()) + " tensors, this program " +
           std::to_string(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const ckpt::TensorEntry &a = x.tensors[i], &b = tensors_[i].entry;
    if (a.name != b.name || a.dims != b.dims || a.dtype != b.dtype)
      return "checkpoint '" + where + "' is of another model: tensor " + std::to_string(i) +
             " is " + a.name + " " + io::formatDims(a.dims) + " " + io::dtypeName(a.dtype) +
             " there but " + b.name + " " + io::formatDims(b.dims) + " " +
             io::dtypeName(b.dtype) + " here";
  }
  return "";
}

std::string Checkpointer::readTensors(const std::string &dir, const ckpt::Index &x) const {
  std::map<int32_t, dsrt_tensor *> slots;
  ckpt::TensorReader reader(dir, x);
  std::vector<char> buffer;
  std::string err;
  for (size_t i = 0; i < tensors_.size() && err.empty(); ++i) {
    const Logical &t = tensors_[i];
    int64_t need0, need1;
    heldHere(t, need0, need1);
    const int64_t part = t.split.whole() ? 0 : g_.indexOn(t.splitAxis);
    size_t es = io::elementSize(t.entry.dtype);
    // Through the transfer buffer: the one explicit host copy into the slot.
    int64_t per = static_cast<int64_t>(std::max<size_t>(ckpt::transferBufferBytes() / es, 1));
    for (int64_t at = need0; at < need1 && err.empty(); at += per) {
      int64_t n = std::min(per, need1 - at);
      buffer.resize(static_cast<size_t>(n) * es);
      if (reader.read(x.tensors[i], t.split, part, at, at + n, buffer.data(), err))
        copyIn(t, at, n, buffer.data(), slots);
    }
  }
  for (auto &[slot, v] : slots) {
    if (dsrt_slot_space(g_.ctx(), slot) == DSRT_SPACE_NVME) // a copy: write it back
      dsrt_slot_set(g_.ctx(), slot, v);
    dsrt_tensor_free(g_.ctx(), v);
  }
  return err;
}

bool Checkpointer::resume(const std::string &given, int64_t &step, uint64_t &hostPeak) {
  collect();
  io::HostMemoryWindow window;
  window.begin();
  std::string dir = given, tag, err;
  // One checkpoint's own directory (DIR/TAG) names that checkpoint instead of DIR/latest.
  if (struct stat st; ::stat((given + "/checkpoint.json").c_str(), &st) == 0) {
    std::string trimmed = given;
    while (trimmed.size() > 1 && trimmed.back() == '/')
      trimmed.pop_back();
    size_t slash = trimmed.find_last_of('/');
    dir = slash == std::string::npos ? "." : trimmed.substr(0, slash);
    tag = trimmed.substr(slash == std::string::npos ? 0 : slash + 1);
  } else if (!ckpt::readLatest(dir, tag, err)) {
    err = "--resume '" + dir + "': " + err;
  } else if (tag.empty()) {
    // An older ds wrote step-* directories without `latest`.
    bool older = false;
    for (const ckpt::Listed &l : ckpt::listCheckpoints(dir))
      older = older || l.problem.find("has format ds-checkpoint-") != std::string::npos;
    err = older ? "--resume '" + dir + "' holds checkpoints of an older ds (format "
                  "ds-checkpoint-2 or 1: one file for every rank, no 'latest'); this ds writes "
                  + std::string(ckpt::kFormat) + " and reads it and ds-checkpoint-3: start the "
                  "run again without --resume"
                : "--resume '" + dir + "' has no checkpoint (no 'latest' file; --save writes "
                  "one)";
  }
  if (!g_.agree(tool_, err))
    return false;
  std::string problems, run;
  for (;;) {
    std::string where = dir + "/" + tag, damaged, fatal, previous;
    ckpt::Index x;
    if (!ckpt::readIndexOf(dir, tag, x, damaged)) {
      if (damaged.find("has format ds-checkpoint-") != std::string::npos)
        fatal = "checkpoint '" + where + "' was written by an older ds: " + damaged +
                "; start the run again without --resume";
    } else {
      previous = x.previous;
      run = x.run;
      fatal = compatible(x, where);
      if (fatal.empty())
        damaged = readTensors(where, x);
      if (fatal.empty() && damaged.empty() && dsrt_rng_set(g_.ctx(), x.rng.c_str()) != 0)
        damaged = "its random state is damaged";
      step = x.step;
    }
    std::string message;
    int32_t who = g_.agreeOn(fatal.empty() ? (damaged.empty() ? "" : "D" + damaged) : "F" + fatal,
                             message);
    if (who < 0)
      break;
    bool isFatal = message[0] == 'F';
    message = message.substr(1);
    if (!isFatal) {
      if (g_.rank() == 0)
        std::fprintf(stderr, "%s: warning: skipping checkpoint '%s': %s\n", tool_.c_str(),
                     where.c_str(), message.c_str());
      problems += "; " + where + ": " + message;
      previous = g_.broadcast(previous); // rank 0's view of the chain
      if (!previous.empty()) {
        tag = previous;
        continue;
      }
      message = "--resume '" + dir + "' has no complete checkpoint" + problems;
    }
    g_.report(tool_, isFatal ? who : 0, message);
    return false;
  }
  // The resumed run continues this checkpoint's chain.
  run_ = run;
  lastTag_[dir] = tag;
  hostPeak = window.peakGrowth();
  return true;
}

} // namespace dsrt::driver

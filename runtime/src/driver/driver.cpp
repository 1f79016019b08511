//===- driver.cpp - the training loop behind ds-run and compiled executables ===//
//
// Reads the program's metadata, checks the data, weights, config and memory plan against it,
// then runs `--steps` optimizer steps of gas micro-batches each and writes LOG.jsonl. The data
// order, loss formula and log format come from dsrt/io.h, which ds-reference shares.
//
#include "dsrt/dsrt.h"
#include "dsrt/io.h"
#include "../core/half.h"
#include "checkpoint.h"
#include "loss_scaler.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

using dsrt::io::Array;
using dsrt::io::Json;

namespace {

const char *const kUsage =
    "usage: %s --data NAME=FILE.npy ... --steps N [options]\n"
    "  --data NAME=FILE.npy     training data for forward input NAME (first dim = samples;\n"
    "                           repeat for every input)\n"
    "  --steps N                optimizer steps to run (required)\n"
    "  --log FILE               write one JSON line per step (rank 0)\n"
    "  --weights FILE           initial weights (.safetensors; default: beside STEP.mlir)\n"
    "  --config FILE            DeepSpeed config; must agree with the compiled one\n"
    "  --device-memory BYTES    device arena budget (e.g. 512MiB, 2G; default unlimited)\n"
    "  --threads N              compute threads per rank (default max(1, cores / ranks))\n"
    "  --save-weights FILE      write parameters and buffers after the last step\n"
    "  --dump-grads FILE        write step 1's gradients (before the optimizer)\n"
    "  --tokens FILE.bin        a flat token file (nanoGPT's .bin) feeding the first two\n"
    "                           inputs: tokens [jT, jT+T) and the same window shifted by one\n"
    "  --seq-len T              the window length T (the inputs' second dimension)\n"
    "  --token-dtype TYPE       uint16 (default) or uint32\n"
    "  --save DIR               write a checkpoint into DIR after the last step\n"
    "  --save-every K           also every K steps (atomically; the newest two are kept)\n"
    "  --resume DIR             continue from DIR's newest complete checkpoint (its step + 1\n"
    "                           to --steps; the initial weights are not read)\n"
    "  --help                   show this help\n";

const char *const kFlags = "--data, --steps, --log, --weights, --config, --device-memory, "
                           "--threads, --save-weights, --dump-grads, --tokens, --seq-len, "
                           "--token-dtype, --save, --save-every, --resume, --help";

struct InputSpec {
  std::string name;
  int32_t dtype = -1;
  std::vector<int64_t> dims;
};

struct SlotSpec {
  std::string name, kind, of, role;
  int32_t dtype = -1;
  std::vector<int64_t> dims;
  std::vector<std::string> aliases;
  bool sharded = false; ///< a ZeRO shard: differs between ranks
  std::string viewOf;   ///< a member of this flat buffer
  std::string shardedBy; ///< stage 3: a parameter kept only as part of this shard slot
  int64_t offset = 0;   ///< at this element
  uint64_t bytes() const {
    int64_t n = 1;
    for (int64_t d : dims)
      n *= d;
    return static_cast<uint64_t>(n) * dsrt::io::elementSize(dtype);
  }
};

struct Options {
  std::vector<std::pair<std::string, std::string>> data;
  int64_t steps = -1;
  std::string log, weights, config, saveWeights, dumpGrads, tokens, save, resume;
  int64_t saveEvery = 0;
  int64_t seqLen = 0;
  int tokenBytes = 2;
  uint64_t deviceMemory = 0;
  int32_t threads = 0;
  bool help = false;
};

class Driver {
public:
  Driver(int argc, char **argv, const dsrt_program *program)
      : argc(argc), argv(argv), program(program) {
    tool = argc > 0 && argv[0] ? argv[0] : "ds-run";
    size_t slash = tool.rfind('/');
    if (slash != std::string::npos)
      tool = tool.substr(slash + 1);
  }

  int run();

private:
  int argc;
  char **argv;
  const dsrt_program *program;
  std::string tool;
  Options opt;
  Json meta;
  std::vector<InputSpec> inputs;
  std::vector<SlotSpec> slots;
  int64_t G = 0, mb = 0, gas = 0, dp = 1, stepsPerPrint = 10;
  uint64_t seed = 1234;
  double lr = 0;
  std::vector<Array> data; // parallel to `inputs`
  dsrt::io::TokenFile tokens; // with --tokens: feeds inputs 0 and 1
  int64_t firstStep = 1;      // > 1 after --resume
  int32_t rank = 0, worldSize = 1; // this process in the data-parallel group
  // fp16: the loss scale, and the optimizer steps applied (not skipped on overflow), which
  // drive Adam's step count and the LR schedule as in DeepSpeed.
  bool lossScaling = false;
  dsrt::driver::LossScaler scaler;
  int64_t applied = 0;

  /// Mixed precision: where parameter `s`'s f32 master lives: its slot, and for a ZeRO shard of
  /// a flat buffer the element of the unsharded buffer where `s` starts. -1 without a master.
  int32_t masterOf(const SlotSpec &s, int64_t &offset) const {
    offset = 0;
    if (!dsrt::isHalfType(s.dtype) || s.kind != "parameter")
      return -1;
    std::string flat = s.viewOf;
    if (!s.shardedBy.empty())
      flat = s.shardedBy.substr(0, s.shardedBy.rfind('@'));
    if (flat.empty())
      return slotNamed(s.name + "@master");
    offset = s.offset;
    return slotNamed(flat + "@master");
  }
  /// Writes `n` elements of `src` (dtype `from`) into `dst` (dtype `to`), converting f32 and
  /// the 16-bit types.
  static void copyElements(void *dst, int32_t to, const void *src, int32_t from, int64_t n) {
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
  /// Writes elements [offset, offset + n) of a tensor whose rank-`rank` part of `shardNumel`
  /// elements per rank is `part` (a ZeRO shard), or all of it when `part` is not sharded.
  void writeIntoShard(dsrt_tensor *part, bool sharded, int64_t offset, const void *src,
                      int32_t srcDtype, int64_t n) const {
    int64_t lo = sharded ? part->numel * rank : 0, hi = lo + part->numel;
    int64_t from = std::max(lo, offset), to = std::min(hi, offset + n);
    if (from >= to)
      return;
    size_t es = dsrt_dtype_size(srcDtype), ed = dsrt_dtype_size(part->dtype);
    copyElements(static_cast<char *>(part->data) + (from - lo) * ed, part->dtype,
                 static_cast<const char *>(src) + (from - offset) * es, srcDtype, to - from);
  }

  /// A checkpoint's logical tensors, the same whatever the ZeRO layout: parameters and buffers
  /// by name, and optimizer state by parameter ("NAME@exp_avg"), a sharded state expanded over
  /// its flat buffer's members. Gradients are zero between steps and not saved.
  struct LogicalTensor {
    dsrt::driver::CheckpointSlot spec;
    int32_t slot = -1;  ///< the slot that holds it whole, or
    int32_t shard = -1; ///< the sharded state it is part of
    int64_t offset = 0; ///< at this element of the unsharded state
  };
  /// The index of the slot named `name`, or -1.
  int32_t slotNamed(const std::string &name) const {
    for (size_t k = 0; k < slots.size(); ++k)
      if (slots[k].name == name)
        return static_cast<int32_t>(k);
    return -1;
  }
  std::vector<LogicalTensor> logicalTensors() const {
    // Parameters and buffers in slot order, then optimizer state by parameter and role, so
    // that every layout lists the same tensors in the same order.
    std::vector<LogicalTensor> out;
    std::vector<std::pair<std::pair<size_t, std::string>, LogicalTensor>> states;
    auto slotOf = [&](const std::string &name) { return static_cast<size_t>(slotNamed(name)); };
    for (size_t i = 0; i < slots.size(); ++i) {
      const SlotSpec &s = slots[i];
      if (!s.shardedBy.empty()) {
        out.push_back({{s.name, s.dtype, s.dims}, -1, slotNamed(s.shardedBy), s.offset});
      } else if (s.kind == "parameter" || s.kind == "buffer") {
        out.push_back({{s.name, s.dtype, s.dims}, static_cast<int32_t>(i), -1, 0});
      } else if (s.kind == "state" && !s.sharded) {
        states.push_back({{slotOf(s.of), s.role},
                          {{s.name, s.dtype, s.dims}, static_cast<int32_t>(i), -1, 0}});
      } else if (s.kind == "state" && s.role != "grad_shard" && s.role != "param_shard") {
        for (const SlotSpec &m : slots) // the members of the flat buffer it partitions
          if (m.viewOf == s.of || (!m.shardedBy.empty() && m.shardedBy == s.of + "@shard"))
            states.push_back({{slotOf(m.name), s.role},
                              {{m.name + "@" + s.role, s.dtype, m.dims}, -1,
                               static_cast<int32_t>(i), m.offset}});
      }
    }
    std::stable_sort(states.begin(), states.end(),
                     [](const auto &a, const auto &b) { return a.first < b.first; });
    for (auto &st : states)
      out.push_back(st.second);
    return out;
  }
  bool saveCheckpointHere(int64_t step, const std::string &dir, std::string &err);
  bool resumeFrom(const std::string &dir, int64_t &step, std::string &err);
  dsrt_context *ctx = nullptr;

  int fail(const std::string &msg) {
    std::fprintf(stderr, "%s: error: %s\n", tool.c_str(), msg.c_str());
    return 1;
  }
  bool parseFlags(std::string &err);
  bool readMetadata(std::string &err);
  bool checkConfigFile(std::string &err);
  bool loadData(std::string &err);
  bool checkPlan(std::string &err);
  bool loadWeights(const std::string &path, std::string &err);
  bool writeSlots(const std::string &path, bool gradients, std::string &err);
  int train();
};

bool parseInt(const std::string &s, int64_t &out) {
  if (s.empty())
    return false;
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno || !end || *end)
    return false;
  out = v;
  return true;
}

bool Driver::parseFlags(std::string &err) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      opt.help = true;
      continue;
    }
    if (a.rfind("--", 0) != 0) {
      err = "unexpected argument '" + a + "' (valid flags: " + kFlags + ")";
      return false;
    }
    std::string name = a, value;
    bool hasValue = false;
    size_t eq = a.find('=');
    if (eq != std::string::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      hasValue = true;
    }
    static const char *known[] = {"--data",          "--steps",   "--log",
                                  "--weights",       "--config",  "--device-memory",
                                  "--threads",       "--save-weights", "--dump-grads",
                                  "--tokens",        "--seq-len",  "--token-dtype",
                                  "--save",          "--save-every", "--resume"};
    if (std::find_if(std::begin(known), std::end(known),
                     [&](const char *k) { return name == k; }) == std::end(known)) {
      err = "unknown flag '" + name + "' (valid flags: " + kFlags + ")";
      return false;
    }
    if (!hasValue) {
      if (i + 1 >= argc) {
        err = name + " needs a value (see --help)";
        return false;
      }
      value = argv[++i];
    }
    if (name == "--data") {
      size_t e = value.find('=');
      if (e == std::string::npos || e == 0 || e + 1 == value.size()) {
        err = "--data takes NAME=FILE.npy, got '" + value + "'";
        return false;
      }
      opt.data.emplace_back(value.substr(0, e), value.substr(e + 1));
    } else if (name == "--steps") {
      if (!parseInt(value, opt.steps) || opt.steps <= 0) {
        err = "--steps takes a positive integer, got '" + value + "'";
        return false;
      }
    } else if (name == "--threads") {
      int64_t t;
      if (!parseInt(value, t) || t <= 0 || t > 4096) {
        err = "--threads takes a positive integer, got '" + value + "'";
        return false;
      }
      opt.threads = static_cast<int32_t>(t);
    } else if (name == "--device-memory") {
      if (!dsrt::io::parseBytes(value, opt.deviceMemory)) {
        err = "--device-memory takes a byte count such as 1073741824, 512M, 2GiB; got '" +
              value + "'";
        return false;
      }
    } else if (name == "--log") {
      opt.log = value;
    } else if (name == "--weights") {
      opt.weights = value;
    } else if (name == "--config") {
      opt.config = value;
    } else if (name == "--save-weights") {
      opt.saveWeights = value;
    } else if (name == "--dump-grads") {
      opt.dumpGrads = value;
    } else if (name == "--tokens") {
      opt.tokens = value;
    } else if (name == "--save") {
      opt.save = value;
    } else if (name == "--resume") {
      opt.resume = value;
    } else if (name == "--save-every") {
      if (!parseInt(value, opt.saveEvery) || opt.saveEvery <= 0) {
        err = "--save-every takes a positive integer, got '" + value + "'";
        return false;
      }
    } else if (name == "--seq-len") {
      if (!parseInt(value, opt.seqLen) || opt.seqLen <= 0) {
        err = "--seq-len takes a positive integer, got '" + value + "'";
        return false;
      }
    } else if (name == "--token-dtype") {
      if (value != "uint16" && value != "uint32") {
        err = "--token-dtype takes uint16 or uint32, got '" + value + "'";
        return false;
      }
      opt.tokenBytes = value == "uint16" ? 2 : 4;
    }
  }
  return true;
}

bool dimsOf(const Json *j, std::vector<int64_t> &dims) {
  if (!j || !j->isArray())
    return false;
  dims.clear();
  for (const Json &d : j->items) {
    if (!d.isNumber())
      return false;
    dims.push_back(static_cast<int64_t>(d.number));
  }
  return true;
}

bool Driver::readMetadata(std::string &err) {
  std::string jerr;
  if (!program || !program->metadata || !dsrt::io::parseJson(program->metadata, meta, jerr)) {
    err = "the program's metadata is not valid JSON (" + jerr + "); recompile it";
    return false;
  }
  auto bad = [&](const std::string &what) {
    err = "the program's metadata is malformed: " + what + "; recompile it";
    return false;
  };
  const Json *ins = meta.get("inputs");
  if (!ins || !ins->isArray())
    return bad("no \"inputs\" list");
  for (const Json &j : ins->items) {
    InputSpec in;
    const Json *n = j.get("name"), *dt = j.get("dtype");
    if (!n || !n->isString() || !dt || !dt->isString() || !dimsOf(j.get("dims"), in.dims))
      return bad("an input lacks name, dtype or dims");
    in.name = n->text;
    in.dtype = dsrt::io::dtypeFromName(dt->text);
    if (in.dtype < 0 || in.dims.empty())
      return bad("input '" + in.name + "' has dtype " + dt->text + " or no batch dimension");
    inputs.push_back(std::move(in));
  }
  const Json *ss = meta.get("slots");
  if (!ss || !ss->isArray())
    return bad("no \"slots\" list");
  for (const Json &j : ss->items) {
    SlotSpec s;
    const Json *n = j.get("name"), *k = j.get("kind"), *dt = j.get("dtype");
    if (!n || !n->isString() || !k || !k->isString() || !dt || !dt->isString() ||
        !dimsOf(j.get("dims"), s.dims))
      return bad("a slot lacks name, kind, dtype or dims");
    s.name = n->text;
    s.kind = k->text;
    s.dtype = dsrt::io::dtypeFromName(dt->text);
    if (s.dtype < 0)
      return bad("slot '" + s.name + "' has dtype " + dt->text);
    if (const Json *ro = j.get("role"); ro && ro->isString())
      s.role = ro->text;
    if (const Json *vo = j.get("view_of"); vo && vo->isString())
      s.viewOf = vo->text;
    if (const Json *sb = j.get("sharded_by"); sb && sb->isString())
      s.shardedBy = sb->text;
    if (const Json *off = j.get("offset"); off && off->isNumber())
      s.offset = static_cast<int64_t>(off->number);
    if (const Json *sh = j.get("sharded"); sh && sh->kind == Json::Bool)
      s.sharded = sh->boolean;
    if (const Json *of = j.get("of"); of && of->isString())
      s.of = of->text;
    if (const Json *al = j.get("aliases"); al && al->isArray())
      for (const Json &a : al->items)
        if (a.isString())
          s.aliases.push_back(a.text);
    slots.push_back(std::move(s));
  }
  const Json *cfg = meta.get("config");
  if (!cfg || !cfg->isObject())
    return bad("no \"config\" object");
  auto num = [&](const char *key, double &out) {
    const Json *v = cfg->get(key);
    if (!v || !v->isNumber())
      return false;
    out = v->number;
    return true;
  };
  double g, m, a, w = 1, spp = 10, sd = 1234;
  if (!num("train_batch_size", g) || !num("train_micro_batch_size_per_gpu", m) ||
      !num("gradient_accumulation_steps", a))
    return bad("the config lacks the batch sizes");
  num("world_size", w);
  num("steps_per_print", spp);
  num("seed", sd);
  G = static_cast<int64_t>(g);
  mb = static_cast<int64_t>(m);
  gas = static_cast<int64_t>(a);
  dp = static_cast<int64_t>(w);
  stepsPerPrint = static_cast<int64_t>(spp);
  seed = static_cast<uint64_t>(sd);
  if (G <= 0 || mb <= 0 || gas <= 0 || dp <= 0 || G != mb * gas * dp)
    return bad("train_batch_size " + std::to_string(G) + " != micro-batch " +
               std::to_string(mb) + " x accumulation " + std::to_string(gas) + " x world " +
               std::to_string(dp));
  const Json *optim = cfg->get("optimizer");
  const Json *params = optim ? optim->get("params") : nullptr;
  const Json *lrj = params ? params->get("lr") : nullptr;
  if (!lrj || !lrj->isNumber())
    return bad("the config has no optimizer.params.lr");
  lr = lrj->number;
  for (const InputSpec &in : inputs)
    if (in.dims[0] != mb)
      return bad("input '" + in.name + "' has batch dimension " + std::to_string(in.dims[0]) +
                 " but the micro-batch is " + std::to_string(mb));
  return true;
}

/// Compares the keys that both configs set; `path` is the dotted key so far.
bool sameConfig(const Json &user, const Json &compiled, const std::string &path,
                std::string &diff) {
  if (user.isObject() && compiled.isObject()) {
    for (const auto &m : user.members) {
      const Json *c = compiled.get(m.first);
      if (!c)
        continue; // keys the compiler ignored (with a warning) or derived under another name
      if (!sameConfig(m.second, *c, path.empty() ? m.first : path + "." + m.first, diff))
        return false;
    }
    return true;
  }
  bool same;
  if (user.isNumber() && compiled.isNumber()) {
    double a = user.number, b = compiled.number;
    same = a == b || std::fabs(a - b) <= 1e-12 * std::max(std::fabs(a), std::fabs(b));
  } else if (user.isString() && compiled.isString()) {
    std::string a = user.text, b = compiled.text;
    std::transform(a.begin(), a.end(), a.begin(), ::tolower);
    std::transform(b.begin(), b.end(), b.begin(), ::tolower);
    same = a == b;
  } else if (user.isArray() && compiled.isArray() && user.items.size() == compiled.items.size()) {
    same = true;
    for (size_t i = 0; i < user.items.size() && same; ++i) {
      std::string sub;
      same = sameConfig(user.items[i], compiled.items[i], path, sub);
    }
  } else {
    same = user.kind == compiled.kind && user.dump() == compiled.dump();
  }
  if (!same)
    diff = "key '" + path + "' is " + user.dump() + " there but " + compiled.dump() +
           " in the compiled program";
  return same;
}

bool Driver::checkConfigFile(std::string &err) {
  std::string text, e;
  if (!dsrt::io::readFile(opt.config, text, e)) {
    err = "--config: " + e;
    return false;
  }
  Json user;
  if (!dsrt::io::parseJson(text, user, e) || !user.isObject()) {
    err = "--config '" + opt.config + "' is not a JSON object" + (e.empty() ? "" : ": " + e);
    return false;
  }
  // The precision is a section that the compiled config has only when enabled.
  auto precision = [](const Json &c) -> std::string {
    auto enabled = [&](const char *key) {
      const Json *s = c.get(key);
      const Json *e = s ? s->get("enabled") : nullptr;
      return e && e->kind == Json::Bool && e->boolean;
    };
    return enabled("fp16") ? "fp16" : enabled("bf16") || enabled("bfloat16") ? "bf16" : "fp32";
  };
  std::string want = precision(user), have = precision(*meta.get("config"));
  if (want != have) {
    err = "--config '" + opt.config + "' trains in " + want + " but the program was compiled " +
          "for " + have + "; recompile with this config or drop --config";
    return false;
  }
  std::string diff;
  if (!sameConfig(user, *meta.get("config"), "", diff)) {
    err = "--config '" + opt.config + "' disagrees with the config compiled into the program: " +
          diff + "; recompile with this config or drop --config";
    return false;
  }
  return true;
}

bool Driver::loadData(std::string &err) {
  for (const auto &d : opt.data)
    if (std::none_of(inputs.begin(), inputs.end(),
                     [&](const InputSpec &in) { return in.name == d.first; })) {
      std::string names;
      for (const InputSpec &in : inputs)
        names += (names.empty() ? "" : ", ") + in.name;
      err = "--data " + d.first + ": the step has no input named '" + d.first +
            "' (its inputs: " + names + ")";
      return false;
    }
  data.resize(inputs.size());
  int64_t fit = INT64_MAX;
  std::string fitName;
  size_t tokenInputs = 0;
  if (!opt.tokens.empty()) {
    if (opt.seqLen <= 0) {
      err = "--tokens needs --seq-len T (the length of each sample)";
      return false;
    }
    if (inputs.size() < 2) {
      err = "--tokens feeds a step's first two inputs (tokens and targets); this step has " +
            std::to_string(inputs.size());
      return false;
    }
    for (size_t i = 0; i < 2; ++i) {
      const InputSpec &in = inputs[i];
      if ((in.dtype != DSRT_I64 && in.dtype != DSRT_I32) || in.dims.size() != 2 ||
          in.dims[1] != opt.seqLen) {
        err = "--tokens with --seq-len " + std::to_string(opt.seqLen) + ": input '" + in.name +
              "' must be [" + std::to_string(mb) + ", " + std::to_string(opt.seqLen) +
              "] i64 or i32, but the step has " + dsrt::io::formatDims(in.dims) + " " +
              dsrt::io::dtypeName(in.dtype) + " (match --seq-len to the --input types)";
        return false;
      }
      for (const auto &d : opt.data)
        if (d.first == in.name) {
          err = "--data " + in.name + ": input '" + in.name + "' is fed by --tokens";
          return false;
        }
    }
    std::string e;
    if (!tokens.open(opt.tokens, opt.tokenBytes, e)) {
      err = "--tokens: " + e;
      return false;
    }
    int64_t samples = tokens.samples(opt.seqLen);
    fit = dsrt::io::stepsThatFit(samples, G);
    fitName = "--tokens " + opt.tokens + " has " + std::to_string(tokens.tokens()) +
              " tokens, " + std::to_string(samples) + " samples of " +
              std::to_string(opt.seqLen) + " + 1";
    tokenInputs = 2;
  } else if (opt.seqLen > 0) {
    err = "--seq-len applies to --tokens";
    return false;
  }
  for (size_t i = tokenInputs; i < inputs.size(); ++i) {
    const InputSpec &in = inputs[i];
    std::vector<std::pair<std::string, std::string>> given;
    for (const auto &d : opt.data)
      if (d.first == in.name)
        given.push_back(d);
    std::vector<int64_t> sample(in.dims.begin() + 1, in.dims.end());
    std::string want = "samples of shape " + dsrt::io::formatDims(sample) + " " +
                       dsrt::io::dtypeName(in.dtype);
    if (given.empty()) {
      err = "no data for input '" + in.name + "': pass --data " + in.name +
            "=FILE.npy with " + want;
      return false;
    }
    if (given.size() > 1) {
      err = "--data " + in.name + " is given twice";
      return false;
    }
    const std::string &path = given[0].second;
    Array &a = data[i];
    std::string e;
    if (!dsrt::io::readNpy(path, a, e)) {
      err = "--data " + in.name + ": " + e;
      return false;
    }
    bool dtypeOk = a.dtype == in.dtype || (a.dtype == dsrt::io::kU8 && in.dtype == DSRT_I1);
    bool shapeOk = a.dims.size() == in.dims.size() &&
                   std::equal(a.dims.begin() + 1, a.dims.end(), in.dims.begin() + 1);
    if (!dtypeOk || !shapeOk) {
      err = "--data " + in.name + "=" + path + ": input '" + in.name + "' expects " + want +
            " (array [N" + (sample.empty() ? "" : ", ") +
            dsrt::io::formatDims(sample).substr(1) + " " + dsrt::io::dtypeName(in.dtype) +
            "), found " + a.describe();
      return false;
    }
    if (a.dtype == dsrt::io::kU8) {
      for (uint8_t &b : a.data)
        b = b != 0;
      a.dtype = DSRT_I1;
    }
    int64_t f = dsrt::io::stepsThatFit(a.dims[0], G);
    if (f < fit) {
      fit = f;
      fitName = "--data " + in.name + "=" + path + " has " + std::to_string(a.dims[0]) +
                " samples";
    }
  }
  if (!inputs.empty() && opt.steps > fit) {
    err = "not enough data: " + fitName + ", but " + std::to_string(opt.steps) +
          " steps of train_batch_size " + std::to_string(G) + " need " +
          std::to_string(opt.steps * G) + "; it fits " + std::to_string(fit) +
          " steps (lower --steps or add samples)";
    return false;
  }
  return true;
}

bool Driver::checkPlan(std::string &err) {
  const Json *plan = meta.get("plan");
  if (!opt.deviceMemory || !plan)
    return true;
  const Json *peak = plan->get("peak_bytes");
  if (!peak || !peak->isNumber())
    return true;
  uint64_t need = static_cast<uint64_t>(peak->number);
  if (need <= opt.deviceMemory)
    return true;
  std::string largest;
  if (const Json *bufs = plan->get("buffers"); bufs && bufs->isArray()) {
    size_t shown = 0;
    for (const Json &b : bufs->items) {
      const Json *n = b.get("name"), *by = b.get("bytes");
      if (!n || !by || shown == 5)
        continue;
      largest += std::string(shown++ ? ", " : "") + n->text + " " +
                 dsrt::io::formatBytes(static_cast<uint64_t>(by->number));
    }
  }
  err = "the compiled plan needs " + std::to_string(need) + " bytes (" +
        dsrt::io::formatBytes(need) + ") of device memory but --device-memory allows " +
        std::to_string(opt.deviceMemory) + " (" + dsrt::io::formatBytes(opt.deviceMemory) +
        ")" + (largest.empty() ? "" : "; largest buffers: " + largest) +
        "; raise --device-memory to at least " + std::to_string(need) +
        " or lower train_micro_batch_size_per_gpu";
  return false;
}

bool Driver::loadWeights(const std::string &path, std::string &err) {
  std::vector<dsrt::io::NamedArray> file;
  std::string e;
  if (!dsrt::io::readSafetensors(path, file, e)) {
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
            dsrt::io::formatDims(s.dims) + " " + dsrt::io::dtypeName(s.dtype) +
            "); save the model's full state_dict";
      return false;
    }
    // Mixed precision: the model's f32 weights initialize the masters and, rounded, the
    // 16-bit parameters.
    bool widened = dsrt::isHalfType(s.dtype) && a->dtype == DSRT_F32;
    if (a->dims != s.dims || (a->dtype != s.dtype && !widened)) {
      err = "weights '" + path + "': tensor '" + key + "' is " + a->describe() + " but the " +
            s.kind + " is " + dsrt::io::formatDims(s.dims) + " " +
            dsrt::io::dtypeName(s.dtype) + "; use the weights of the compiled model";
      return false;
    }
    int64_t n = static_cast<int64_t>(s.bytes() / dsrt::io::elementSize(s.dtype));
    int64_t masterOffset = 0;
    if (int32_t m = masterOf(s, masterOffset); m >= 0) {
      dsrt_tensor *master = dsrt_slot_get(ctx, m);
      writeIntoShard(master, slots[m].sharded, masterOffset, a->data.data(), a->dtype, n);
      dsrt_tensor_free(ctx, master);
    }
    if (!s.shardedBy.empty()) { // stage 3: this rank's part of the parameter, into its shard
      dsrt_tensor *part = dsrt_slot_get(ctx, slotNamed(s.shardedBy));
      writeIntoShard(part, true, s.offset, a->data.data(), a->dtype, n);
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

/// Writes parameters and buffers (each under its name and aliases), or gradients (under
/// their parameter's name).
std::vector<char> gatherBytes(dsrt_context *ctx, const void *mine, int64_t n);

bool Driver::writeSlots(const std::string &path, bool gradients, std::string &err) {
  std::vector<dsrt::io::SafetensorsEntry> entries;
  std::vector<dsrt_tensor *> held;
  std::vector<std::vector<char>> summed; // gradients over all ranks (outside the arena)
  std::map<std::string, std::vector<char>> gathered; // stage-3 parameter shards, whole
  for (size_t i = 0; i < slots.size(); ++i) {
    const SlotSpec &s = slots[i];
    bool want = gradients ? s.kind == "gradient" : (s.kind == "parameter" || s.kind == "buffer");
    if (!want)
      continue;
    int64_t masterOffset = 0;
    if (int32_t m = gradients ? -1 : masterOf(s, masterOffset); m >= 0) {
      // Mixed precision: the export is the f32 masters (DeepSpeed's zero_to_fp32), gathered
      // when they are shards.
      std::string key = slots[m].name;
      auto it = gathered.find(key);
      if (it == gathered.end()) {
        dsrt_tensor *part = dsrt_slot_get(ctx, m);
        size_t bytes = static_cast<size_t>(part->numel) * dsrt_dtype_size(part->dtype);
        std::vector<char> all = slots[m].sharded && worldSize > 1
                                    ? gatherBytes(ctx, part->data, bytes)
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
        dsrt_tensor *part = dsrt_slot_get(ctx, slotNamed(s.shardedBy));
        size_t bytes = static_cast<size_t>(part->numel) * dsrt_dtype_size(part->dtype);
        std::vector<char> all = worldSize > 1 ? gatherBytes(ctx, part->data, bytes)
                                              : std::vector<char>((char *)part->data,
                                                                  (char *)part->data + bytes);
        dsrt_tensor_free(ctx, part);
        it = gathered.emplace(s.shardedBy, std::move(all)).first;
      }
      const char *data = it->second.data() + s.offset * dsrt::io::elementSize(s.dtype);
      entries.push_back({s.name, s.dtype, s.dims, data, s.bytes()});
      for (const std::string &a : s.aliases)
        entries.push_back({a, s.dtype, s.dims, data, s.bytes()});
      continue;
    }
    dsrt_tensor *t = dsrt_slot_get(ctx, static_cast<int32_t>(i));
    held.push_back(t);
    size_t bytes = static_cast<size_t>(t->numel) * dsrt::io::elementSize(t->dtype);
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
  bool ok = rank != 0 || dsrt::io::writeSafetensors(path, entries, err);
  for (dsrt_tensor *t : held)
    dsrt_tensor_free(ctx, t);
  return ok;
}

float scalarValue(const dsrt_tensor *t) {
  if (t->dtype == DSRT_F64)
    return static_cast<float>(*static_cast<const double *>(t->data));
  return *static_cast<const float *>(t->data);
}

dsrt_tensor *scalarTensor(dsrt_context *ctx, float v) {
  int64_t none = 0;
  dsrt_tensor *t = dsrt_tensor_alloc(ctx, DSRT_F32, 0, &none);
  *static_cast<float *>(t->data) = v;
  return t;
}

dsrt_tensor *scalarTensorF64(dsrt_context *ctx, double v) {
  int64_t none = 0;
  dsrt_tensor *t = dsrt_tensor_alloc(ctx, DSRT_F64, 0, &none);
  *static_cast<double *>(t->data) = v;
  return t;
}

/// Every rank's `n` bytes at `mine`, in rank order (an all-gather through the channel).
std::vector<char> gatherBytes(dsrt_context *ctx, const void *mine, int64_t n) {
  int32_t size = dsrt_comm_size(ctx);
  std::vector<char> in(static_cast<const char *>(mine), static_cast<const char *>(mine) + n);
  std::vector<char> out(static_cast<size_t>(n) * size);
  int64_t inDims = n, outDims = n * size;
  dsrt_tensor *a = dsrt_tensor_borrow(ctx, DSRT_I1, 1, &inDims, in.data());
  dsrt_tensor *b = dsrt_tensor_borrow(ctx, DSRT_I1, 1, &outDims, out.data());
  dsrt_event *e = dsrt_all_gather(ctx, b, a);
  dsrt_event_release(e);
  dsrt_tensor_free(ctx, a);
  dsrt_tensor_free(ctx, b);
  return out;
}

/// Every rank takes part (the sharded states are gathered); rank 0 writes.
bool Driver::saveCheckpointHere(int64_t step, const std::string &dir, std::string &err) {
  std::vector<LogicalTensor> tensors = logicalTensors();
  std::map<int32_t, std::vector<char>> whole; // each sharded state, gathered
  std::vector<dsrt_tensor *> held;
  std::vector<dsrt::driver::CheckpointSlot> specs;
  for (LogicalTensor &t : tensors) {
    if (t.slot >= 0) {
      dsrt_tensor *v = dsrt_slot_get(ctx, t.slot);
      held.push_back(v);
      t.spec.data = v->data;
    } else {
      auto it = whole.find(t.shard);
      if (it == whole.end()) {
        dsrt_tensor *part = dsrt_slot_get(ctx, t.shard);
        std::vector<char> all(static_cast<size_t>(part->numel) * worldSize *
                              dsrt_dtype_size(part->dtype));
        std::vector<char> mine(static_cast<const char *>(part->data),
                               static_cast<const char *>(part->data) +
                                   all.size() / static_cast<size_t>(worldSize));
        all = worldSize > 1 ? gatherBytes(ctx, mine.data(), static_cast<int64_t>(mine.size()))
                            : mine;
        dsrt_tensor_free(ctx, part);
        it = whole.emplace(t.shard, std::move(all)).first;
      }
      t.spec.data = it->second.data() + t.offset * dsrt_dtype_size(t.spec.dtype);
    }
    specs.push_back(t.spec);
  }
  // fp16: the loss scaler's progress and the applied-step count.
  double scalerState[6] = {scaler.scale, static_cast<double>(scaler.curHysteresis),
                           static_cast<double>(scaler.lastOverflowIter),
                           static_cast<double>(scaler.curIter), static_cast<double>(applied), 0};
  if (lossScaling)
    specs.push_back({"loss_scaler", DSRT_F64, {6}, scalerState});
  bool ok = rank != 0 || dsrt::driver::saveCheckpoint(ctx, dir, step, specs, *meta.get("config"),
                                                      err);
  for (dsrt_tensor *v : held)
    dsrt_tensor_free(ctx, v);
  return ok;
}

/// Every rank reads the checkpoint and keeps its own shard of the sharded states, so a run
/// saved with N ranks (or another ZeRO stage) resumes with this program's layout.
bool Driver::resumeFrom(const std::string &dir, int64_t &step, std::string &err) {
  std::vector<LogicalTensor> tensors = logicalTensors();
  std::vector<dsrt::driver::CheckpointSlot> specs;
  for (const LogicalTensor &t : tensors)
    specs.push_back(t.spec);
  if (lossScaling)
    specs.push_back({"loss_scaler", DSRT_F64, {6}, nullptr});
  std::vector<std::vector<char>> data;
  if (!dsrt::driver::loadCheckpoint(ctx, dir, specs, *meta.get("config"), step, data, err))
    return false;
  if (lossScaling) {
    double v[6];
    std::memcpy(v, data.back().data(), sizeof v);
    scaler.scale = v[0];
    scaler.curHysteresis = static_cast<int64_t>(v[1]);
    scaler.lastOverflowIter = static_cast<int64_t>(v[2]);
    scaler.curIter = static_cast<int64_t>(v[3]);
    applied = static_cast<int64_t>(v[4]);
  }
  std::map<int32_t, std::vector<char>> whole; // each sharded state, unsharded (zero padding)
  for (size_t i = 0; i < tensors.size(); ++i) {
    const LogicalTensor &t = tensors[i];
    if (t.slot >= 0) {
      dsrt_tensor *v = dsrt_slot_get(ctx, t.slot);
      std::memcpy(v->data, data[i].data(), data[i].size());
      dsrt_tensor_free(ctx, v);
      continue;
    }
    auto it = whole.find(t.shard);
    if (it == whole.end()) {
      const SlotSpec &s = slots[t.shard];
      it = whole.emplace(t.shard, std::vector<char>(s.bytes() * worldSize, 0)).first;
    }
    std::memcpy(it->second.data() + t.offset * dsrt_dtype_size(t.spec.dtype), data[i].data(),
                data[i].size());
  }
  for (auto &[slot, all] : whole) {
    dsrt_tensor *part = dsrt_slot_get(ctx, slot);
    size_t bytes = static_cast<size_t>(part->numel) * dsrt_dtype_size(part->dtype);
    std::memcpy(part->data, all.data() + bytes * rank, bytes);
    dsrt_tensor_free(ctx, part);
  }
  return true;
}

int Driver::train() {
  std::FILE *log = nullptr;
  if (!opt.log.empty() && rank == 0) {
    log = std::fopen(opt.log.c_str(), "w");
    if (!log)
      return fail("cannot write --log '" + opt.log + "': " + std::strerror(errno));
  }
  // Model state as allocated: each storage once (a flat buffer with its padding, not its
  // member views), by DeepSpeed's categories.
  uint64_t paramBytes = 0, gradBytes = 0, optimBytes = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    const SlotSpec &s = slots[i];
    if (!s.shardedBy.empty())
      continue; // no storage of its own: part of a parameter shard
    uint64_t owned = dsrt_slot_storage_bytes(ctx, static_cast<int32_t>(i));
    if (s.kind == "parameter" || (s.kind == "flat" && s.role == "params") ||
        s.role == "param_shard")
      paramBytes += owned;
    else if (s.kind == "gradient" || s.role == "grads" || s.role == "grad_shard")
      gradBytes += owned;
    else if (s.kind == "state" && s.role != "loss_scale" && s.role != "found_inf")
      optimBytes += owned; // the fp32 masters of mixed precision are optimizer state
  }
  uint64_t modelState = paramBytes + gradBytes + optimBytes;

  std::vector<size_t> rowBytes(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    int64_t n = 1;
    for (size_t d = 1; d < inputs[i].dims.size(); ++d)
      n *= inputs[i].dims[d];
    rowBytes[i] = static_cast<size_t>(n) * dsrt::io::elementSize(inputs[i].dtype);
  }

  int rc = 0;
  int32_t lossScaleSlot = -1, foundInfSlot = -1;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].role == "loss_scale")
      lossScaleSlot = static_cast<int32_t>(i);
    if (slots[i].role == "found_inf")
      foundInfSlot = static_cast<int32_t>(i);
  }
  for (int64_t step = firstStep; step <= opt.steps && rc == 0; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    double stepScale = scaler.scale;
    if (lossScaleSlot >= 0) {
      dsrt_tensor *t = dsrt_slot_get(ctx, lossScaleSlot);
      *static_cast<float *>(t->data) = static_cast<float>(stepScale);
      dsrt_tensor_free(ctx, t);
    }
    std::vector<float> losses;
    for (int64_t k = 0; k < gas; ++k) {
      int64_t first = dsrt::io::sampleOffset(step, rank, k, G, mb, gas);
      std::vector<dsrt_tensor *> ts(inputs.size());
      for (size_t i = 0; i < inputs.size(); ++i) {
        ts[i] = dsrt_tensor_alloc(ctx, inputs[i].dtype,
                                  static_cast<int32_t>(inputs[i].dims.size()),
                                  inputs[i].dims.data());
        if (tokens.isOpen() && i < 2) {
          for (int64_t r = 0; r < mb; ++r)
            tokens.window(first + r, opt.seqLen, /*shift=*/static_cast<int64_t>(i),
                          inputs[i].dtype, static_cast<char *>(ts[i]->data) + r * rowBytes[i]);
          continue;
        }
        std::memcpy(ts[i]->data, data[i].data.data() + first * rowBytes[i], mb * rowBytes[i]);
      }
      dsrt_tensor *loss = program->micro_step(ctx, ts.data());
      // The loss is read on the host: wait for the stream to produce it.
      dsrt_event *done = dsrt_event_record(ctx);
      dsrt_event_synchronize(done);
      dsrt_event_release(done);
      losses.push_back(scalarValue(loss));
      dsrt_tensor_free(ctx, loss);
      for (dsrt_tensor *t : ts)
        dsrt_tensor_free(ctx, t);
    }
    if (worldSize > 1) { // every rank's micro-batch losses, in rank order (as ds-reference)
      std::vector<char> all = gatherBytes(ctx, losses.data(), losses.size() * sizeof(float));
      losses.resize(all.size() / sizeof(float));
      std::memcpy(losses.data(), all.data(), all.size());
    }
    float mean = dsrt::io::meanLoss(losses); // dp * gas micro-batches
    if (!std::isfinite(mean)) {
      rc = fail("step " + std::to_string(step) + ": loss is " + (std::isnan(mean) ? "nan" : "inf") +
                "; lower the learning rate or enable gradient_clipping");
      break;
    }
    if (step == 1 && !opt.dumpGrads.empty()) {
      bool whole = false;
      for (const SlotSpec &s : slots)
        whole = whole || s.kind == "gradient";
      if (!whole && rank == 0)
        std::fprintf(stderr, "%s: warning: --dump-grads: the gradients are partitioned (ZeRO "
                             "stage 2 or 3) and never whole; '%s' will hold no tensors\n",
                     tool.c_str(), opt.dumpGrads.c_str());
      if (lossScaling && rank == 0)
        std::fprintf(stderr, "%s: warning: --dump-grads: the fp16 gradients in '%s' are "
                             "multiplied by the loss scale %g\n",
                     tool.c_str(), opt.dumpGrads.c_str(), stepScale);
      std::string e;
      if (!writeSlots(opt.dumpGrads, /*gradients=*/true, e)) {
        rc = fail("--dump-grads: " + e);
        break;
      }
    }
    auto tOptimizer = std::chrono::steady_clock::now();
    // The schedule and Adam's step count advance with the applied steps (all of them unless
    // fp16 skips one on overflow).
    dsrt::io::StepScalars hyper = dsrt::io::scheduled(*meta.get("config"), applied + 1);
    double lrStep = hyper.lr;
    dsrt_tensor *lrT = scalarTensor(ctx, static_cast<float>(hyper.lr));
    dsrt_tensor *stepT = scalarTensor(ctx, static_cast<float>(applied + 1));
    dsrt_tensor *beta1T = scalarTensorF64(ctx, hyper.beta1);
    dsrt_tensor *auxLrT = scalarTensor(ctx, static_cast<float>(hyper.auxLr));
    program->optimizer_step(ctx, lrT, stepT, beta1T, auxLrT);
    dsrt_stream_synchronize(ctx); // the step time covers the work, not just its enqueueing
    if (std::getenv("DSRT_TIMING"))
      std::fprintf(stderr, "dsrt-timing step %lld micro_steps %.1f ms optimizer_step %.1f ms\n",
                   (long long)step,
                   std::chrono::duration<double, std::milli>(tOptimizer - t0).count(),
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                             tOptimizer)
                       .count());
    for (dsrt_tensor *t : {lrT, stepT, beta1T, auxLrT})
      dsrt_tensor_free(ctx, t);
    bool overflow = false;
    if (foundInfSlot >= 0) {
      dsrt_tensor *t = dsrt_slot_get(ctx, foundInfSlot);
      overflow = *static_cast<const float *>(t->data) != 0.0f; // the same on every rank
      dsrt_tensor_free(ctx, t);
    }
    if (!overflow)
      ++applied;
    if (lossScaling) {
      if (overflow && rank == 0)
        std::fprintf(stderr, "%s: step %lld: gradient overflow at loss scale %g; step skipped\n",
                     tool.c_str(), (long long)step, stepScale);
      if (!scaler.update(overflow)) {
        rc = fail("step " + std::to_string(step) + ": the gradients overflow at the minimum loss "
                  "scale " + dsrt::io::formatFloat(scaler.minScale) +
                  "; lower fp16.min_loss_scale or the learning rate, or use bf16");
        break;
      }
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count();

    dsrt::io::LogRecord r;
    r.step = step;
    r.loss = mean;
    r.lr = lrStep;
    r.lossScale = lossScaling ? stepScale : 0.0;
    r.skipped = overflow;
    r.stepMs = ms;
    r.samplesPerS = ms > 0 ? static_cast<double>(G) * 1000.0 / ms : 0.0;
    r.devicePeakBytes = dsrt_device_peak_bytes(ctx);
    r.hostPeakBytes = dsrt::io::hostPeakBytes();
    uint64_t mine[6] = {r.devicePeakBytes, r.hostPeakBytes, modelState,
                        paramBytes,        gradBytes,       optimBytes};
    std::vector<char> all = worldSize > 1 ? gatherBytes(ctx, mine, sizeof mine)
                                          : std::vector<char>((char *)mine, (char *)(mine + 6));
    for (int32_t q = 0; q < worldSize; ++q) {
      uint64_t v[6];
      std::memcpy(v, all.data() + q * sizeof v, sizeof v);
      r.ranks.push_back({q, v[0], v[1], v[2], v[3], v[4], v[5]});
    }
    if (log && !dsrt::io::writeLogLine(log, r)) {
      rc = fail("cannot write --log '" + opt.log + "': " + std::strerror(errno));
      break;
    }
    if (rank == 0 && ((stepsPerPrint > 0 && step % stepsPerPrint == 0) || step == opt.steps)) {
      std::printf("%s\n", dsrt::io::formatProgress(r, opt.steps).c_str());
      std::fflush(stdout);
    }
    bool everyK = opt.saveEvery > 0 && step % opt.saveEvery == 0;
    std::string saveDir = opt.save.empty() ? opt.resume : opt.save;
    if ((everyK || (step == opt.steps && !opt.save.empty())) && !saveDir.empty()) {
      std::string e;
      if (!saveCheckpointHere(step, saveDir, e)) {
        rc = fail("checkpoint at step " + std::to_string(step) + ": " + e);
        break;
      }
    }
  }
  if (log)
    std::fclose(log);
  if (rc == 0 && !opt.saveWeights.empty()) { // every rank: stage 3 gathers, rank 0 writes
    std::string e;
    if (!writeSlots(opt.saveWeights, /*gradients=*/false, e))
      rc = fail("--save-weights: " + e);
  }
  return rc;
}

int Driver::run() {
  std::string err;
  if (!parseFlags(err))
    return fail(err);
  if (opt.help) {
    std::printf(kUsage, tool.c_str());
    return 0;
  }
  if (opt.steps < 0)
    return fail("--steps N is required (the number of optimizer steps to run)");
  if (!readMetadata(err))
    return fail(err);
  if (const Json *fp16 = meta.get("config")->get("fp16"); fp16 && fp16->kind == Json::Object) {
    lossScaling = true;
    int64_t zeroStage = 0;
    if (const Json *z = meta.get("config")->get("zero_optimization"))
      if (const Json *st = z->get("stage"); st && st->isNumber())
        zeroStage = static_cast<int64_t>(st->number);
    scaler.configure(*fp16, zeroStage);
  }
  if (!opt.config.empty() && !checkConfigFile(err))
    return fail(err);
  if (!loadData(err))
    return fail(err);
  std::string weights = opt.weights;
  if (weights.empty())
    if (const Json *w = meta.get("weights"); w && w->isString())
      weights = w->text;
  if (weights.empty() && opt.resume.empty())
    return fail("no initial weights: pass --weights FILE.safetensors");
  if (opt.saveEvery > 0 && opt.save.empty() && opt.resume.empty())
    return fail("--save-every K needs --save DIR (where to write the checkpoints)");
  // Before anything allocates from the arena, so that an oversized plan fails fast.
  if (!checkPlan(err))
    return fail(err);

  ctx = dsrt_context_create(opt.deviceMemory, opt.threads, seed);
  dsrt_comm_init(ctx, static_cast<int32_t>(dp)); // exits naming both sizes on a mismatch
  rank = dsrt_comm_rank(ctx);
  worldSize = dsrt_comm_size(ctx);
  program->init_slots(ctx);
  int rc;
  if (!opt.resume.empty()) {
    int64_t done = 0;
    if (!resumeFrom(opt.resume, done, err)) {
      rc = fail(err);
    } else if (done >= opt.steps) {
      std::printf("checkpoint '%s' is at step %lld; --steps %lld is already reached\n",
                  opt.resume.c_str(), (long long)done, (long long)opt.steps);
      rc = 0;
    } else {
      firstStep = done + 1;
      if (!lossScaling)
        applied = done;
      rc = train();
    }
  } else {
    rc = loadWeights(weights, err) ? train() : fail(err);
  }
  dsrt_context_destroy(ctx);
  ctx = nullptr;
  return rc;
}

} // namespace

extern "C" int dsrt_driver_main(int argc, char **argv, const dsrt_program *program) {
  return Driver(argc, argv, program).run();
}

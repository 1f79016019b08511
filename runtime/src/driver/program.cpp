//===- program.cpp - a compiled step's metadata, and the checks against it ----===//
#include "program.h"

#include <algorithm>
#include <cmath>

namespace dsrt::driver {

using io::Json;

int32_t ProgramSpec::slotNamed(const std::string &name) const {
  for (size_t k = 0; k < slots.size(); ++k)
    if (slots[k].name == name)
      return static_cast<int32_t>(k);
  return -1;
}

namespace {
bool dimsOf(const Json *j, std::vector<int64_t> &dims, int64_t &numel) {
  if (!j || !j->isArray() || j->items.size() > 8)
    return false;
  dims.clear();
  for (const Json &d : j->items) {
    int64_t v;
    if (!d.asInt(0, INT64_MAX, v))
      return false;
    dims.push_back(v);
  }
  return io::checkedNumel(dims, numel);
}

} // namespace

/// The descriptor's "run": batch, seed, precision, schedule, loss scaler, NVMe tier.
bool readRun(const Json &run, ProgramSpec &p, std::string &err) {
  auto bad = [&](const std::string &what) {
    err = "the program's metadata is malformed: " + what + "; recompile it";
    return false;
  };
  auto integer = [&](const char *key, int64_t lo, int64_t &out) {
    const Json *v = run.get(key);
    return v && v->asInt(lo, INT64_MAX, out);
  };
  int64_t seed = 0;
  if (!integer("global_batch", 1, p.G) || !integer("micro_batch", 1, p.mb) ||
      !integer("accumulation", 1, p.gas) ||
      !integer("replicas", 1, p.dp) || !integer("log_every", 0, p.stepsPerPrint) ||
      !integer("rng_seed", 0, seed) || !integer("zero_stage", 0, p.zeroStage))
    return bad("\"run\" lacks the batch sizes, steps_per_print, seed or zero_stage");
  p.seed = static_cast<uint64_t>(seed);
  const Json *prec = run.get("precision");
  int32_t precision = prec && prec->isString() ? dsrt_precision_from_name(prec->text.c_str()) : -1;
  if (precision < 0)
    return bad("\"run.precision\" is not a precision");
  p.precision = static_cast<dsrt_precision>(precision);
  std::string field;
  const Json *lr = run.get("lr");
  if (!lr || !io::readLrSchedule(*lr, p.lr, field))
    return bad("\"run." + (field.empty() ? std::string("lr") : field) + "\" is missing or wrong");
  if (const Json *s = run.get("loss_scaler")) {
    const Json *dyn = s->get("dynamic"), *sc = s->get("scale"), *ms = s->get("min_scale"),
               *ch = s->get("consecutive");
    LossScalerSpec &l = p.lossScaler;
    if (!dyn || dyn->kind != Json::Bool || !sc || !sc->isNumber() || !ms || !ms->isNumber() ||
        !ch || ch->kind != Json::Bool || !s->get("window") ||
        !s->get("window")->asInt(1, INT64_MAX, l.window) || !s->get("absorbed_overflows") ||
        !s->get("absorbed_overflows")->asInt(1, INT64_MAX, l.hysteresis))
      return bad("\"run.loss_scaler\" is malformed");
    l.dynamic = dyn->boolean;
    l.scale = sc->number;
    l.minScale = ms->number;
    l.consecutiveHysteresis = ch->boolean;
    p.lossScaling = true;
  }
  if (const Json *n = run.get("nvme")) {
    const Json *path = n->get("path"), *ss = n->get("submit_singly");
    const Json *bytes = n->get("request_bytes"), *depth = n->get("requests_in_flight");
    NvmeSpec &v = p.nvme;
    if (!path || !path->isString() || !ss || ss->kind != Json::Bool || !bytes ||
        !bytes->asInt(1, INT64_MAX, v.blockSize) || !depth ||
        !depth->asInt(1, INT32_MAX, v.queueDepth))
      return bad("\"run.nvme\" is malformed");
    v.path = path->text;
    v.singleSubmit = ss->boolean;
    p.hasNvme = true;
  }
  int64_t product = 0;
  if (!io::checkedMul(p.mb, p.gas, product) || !io::checkedMul(product, p.dp, product) ||
      p.G != product)
    return bad("train_batch_size " + std::to_string(p.G) + " != micro-batch " +
               std::to_string(p.mb) + " x accumulation " + std::to_string(p.gas) + " x world " +
               std::to_string(p.dp));
  return true;
}

bool readProgram(const char *metadata, ProgramSpec &p, std::string &err) {
  std::string jerr;
  Json &meta = p.meta;
  std::vector<InputSpec> &inputs = p.inputs;
  std::vector<SlotSpec> &slots = p.slots;
  if (!metadata || !dsrt::io::parseJson(metadata, meta, jerr)) {
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
    int64_t n0 = 0;
    const Json *n = j.get("name"), *dt = j.get("dtype");
    if (!n || !n->isString() || !dt || !dt->isString() || !dimsOf(j.get("dims"), in.dims, n0))
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
    const Json *n = j.get("name"), *ro = j.get("role"), *dt = j.get("dtype");
    if (!n || !n->isString() || !ro || !ro->isString() || !dt || !dt->isString() ||
        !dimsOf(j.get("dims"), s.dims, s.numel))
      return bad("a slot lacks name, role, dtype or dims");
    s.name = n->text;
    int32_t role = dsrt_slot_role_from_name(ro->text.c_str());
    if (role < 0)
      return bad("slot '" + s.name + "' has role " + ro->text);
    s.role = static_cast<dsrt_slot_role>(role);
    s.dtype = dsrt::io::dtypeFromName(dt->text);
    if (s.dtype < 0)
      return bad("slot '" + s.name + "' has dtype " + dt->text);
    if (const Json *vo = j.get("view_of"); vo && vo->isString())
      s.viewOf = vo->text;
    if (const Json *sb = j.get("sharded_by"); sb && sb->isString())
      s.shardedBy = sb->text;
    if (const Json *off = j.get("offset"); off && !off->asInt(0, INT64_MAX, s.offset))
      return bad("slot '" + s.name + "' has a bad offset");
    if (const Json *sh = j.get("sharded"); sh && sh->kind == Json::Bool)
      s.sharded = sh->boolean;
    if (const Json *of = j.get("of"); of && of->isString())
      s.of = of->text;
    if (const Json *sp = j.get("split")) {
      const Json *ax = sp->get("axis"), *d = sp->get("dim"), *sg = sp->get("segments"),
                 *pa = sp->get("parts");
      if (!ax || !ax->isString() || !d || !d->asInt(0, (int64_t)s.dims.size() - 1, s.splitDim) ||
          !sg || !sg->asInt(1, 1 << 20, s.splitSegments) || !pa ||
          !pa->asInt(1, 1 << 20, s.splitParts))
        return bad("slot '" + s.name + "' has a malformed \"split\"");
      if (const Json *sz = sp->get("segment_sizes"); sz && sz->isArray())
        for (const Json &z : sz->items) {
          int64_t v = 0;
          if (!z.asInt(1, INT64_MAX, v))
            return bad("slot '" + s.name + "' has a malformed \"segment_sizes\"");
          s.splitSizes.push_back(v);
        }
      // The sizes are whole-tensor rows; the slot's dims are this rank's part.
      std::string why;
      if (!ckpt::validSplit(s.tensorSplit(), s.dims[s.splitDim] * s.splitParts, why))
        return bad("slot '" + s.name + "' has a malformed \"split\" (" + why + ")");
      int32_t axis = dsrt_mesh_axis_from_name(ax->text.c_str());
      if (axis < 0)
        return bad("slot '" + s.name + "' is split over '" + ax->text +
                   "', not a mesh axis (dp, pp, tp, sp or ep)");
      s.splitAxis = static_cast<dsrt_mesh_axis>(axis);
    }
    if (const Json *st = j.get("stages"); st && st->isArray())
      for (const Json &r : st->items) {
        int64_t v = 0;
        if (!r.asInt(0, 1 << 20, v))
          return bad("slot '" + s.name + "' has a malformed \"stages\"");
        s.stages.push_back(v);
      }
    if (const Json *al = j.get("aliases"); al && al->isArray())
      for (const Json &a : al->items)
        if (a.isString())
          s.aliases.push_back(a.text);
    slots.push_back(std::move(s));
  }
  // Generation's programs (ds-opt --inference) have no optimizer, batch or schedule: one
  // replica of everything.
  if (!meta.get("generation")) {
    if (!meta.get("config") || !meta.get("config")->isObject() ||
        !meta.get("numeric_config") || !meta.get("numeric_config")->isObject())
      return bad("no \"config\" or \"numeric_config\" object");
    const Json *run = meta.get("run");
    if (!run || !run->isObject())
      return bad("no \"run\" object (was it compiled with ds-opt --config?)");
    if (!readRun(*run, p, err))
      return false;
  } else {
    p.G = p.mb = p.gas = p.dp = 1;
  }
  const int64_t mb = p.mb, gas = p.gas, dp = p.dp;
  p.meshAxes = {DSRT_AXIS_DP};
  p.meshShape = {dp};
  if (const Json *mesh = p.meta.get("mesh")) {
    const Json *axes = mesh->get("axes"), *shape = mesh->get("shape");
    if (!axes || !shape || !axes->isArray() || !shape->isArray() || axes->items.empty() ||
        axes->items.size() != shape->items.size() || axes->items.size() > 8)
      return bad("\"mesh\" needs \"axes\" and \"shape\", arrays of one to eight entries");
    p.meshAxes.clear();
    p.meshShape.clear();
    int64_t dpSize = 1;
    for (size_t i = 0; i < axes->items.size(); ++i) {
      int64_t n = 0;
      if (!axes->items[i].isString() || !shape->items[i].asInt(1, 1 << 20, n))
        return bad("\"mesh\" axis " + std::to_string(i) + " is malformed");
      int32_t axis = dsrt_mesh_axis_from_name(axes->items[i].text.c_str());
      if (axis < 0)
        return bad("\"mesh\" axis " + std::to_string(i) + " is '" + axes->items[i].text +
                   "', not dp, pp, tp, sp or ep");
      p.meshAxes.push_back(static_cast<dsrt_mesh_axis>(axis));
      p.meshShape.push_back(n);
      if (axis == DSRT_AXIS_DP || axis == DSRT_AXIS_EP) // the ranks that read other samples
        dpSize *= n;
    }
    if (dpSize != dp)
      return bad("the mesh's dp (x ep) axes have " + std::to_string(dpSize) +
                 " ranks but the config's world size is " + std::to_string(dp));
  }
  if (const Json *pipe = p.meta.get("pipeline")) {
    const Json *st = pipe->get("stages"), *mbs = pipe->get("micro_batches");
    if (!st || !mbs || !st->asInt(2, 1 << 20, p.pipelineStages) ||
        !mbs->asInt(1, 1 << 20, p.microBatchesPerCall) || p.microBatchesPerCall != gas)
      return bad("\"pipeline\" needs \"stages\" (>= 2) and \"micro_batches\" (the "
                 "accumulation steps)");
    int64_t ppSize = 0;
    for (size_t i = 0; i < p.meshAxes.size(); ++i)
      if (p.meshAxes[i] == DSRT_AXIS_PP)
        ppSize = p.meshShape[i];
    if (ppSize != p.pipelineStages)
      return bad("the mesh's pp axis has " + std::to_string(ppSize) + " ranks but the "
                 "pipeline has " + std::to_string(p.pipelineStages) + " stages");
  }
  for (const InputSpec &in : inputs)
    if (in.dims[0] != mb)
      return bad("input '" + in.name + "' has batch dimension " + std::to_string(in.dims[0]) +
                 " but the micro-batch is " + std::to_string(mb));
  return true;
}

namespace {
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

} // namespace

bool checkConfigFile(const std::string &path, const ProgramSpec &p, std::string &err) {
  std::string text, e;
  if (!dsrt::io::readFile(path, text, e)) {
    err = "--config: " + e;
    return false;
  }
  Json user;
  if (!dsrt::io::parseJson(text, user, e) || !user.isObject()) {
    err = "--config '" + path + "' is not a JSON object" + (e.empty() ? "" : ": " + e);
    return false;
  }
  // The precision the user's config trains in, by the compiler's rules (key paths).
  std::string want = dsrt_precision_name(DSRT_PRECISION_FP32), have = p.precisionName();
  if (const Json *rules = p.meta.get("config_precision"); rules && rules->isArray())
    for (const Json &rule : rules->items) {
      const Json *key = rule.get("key"), *name = rule.get("precision");
      const Json *at = &user;
      for (size_t i = 0; at && key && key->isArray() && i < key->items.size(); ++i)
        at = key->items[i].isString() ? at->get(key->items[i].text) : nullptr;
      if (at && at->kind == Json::Bool && at->boolean && name && name->isString()) {
        want = name->text;
        break;
      }
    }
  if (want != have) {
    err = "--config '" + path + "' trains in " + want + " but the program was compiled " +
          "for " + have + "; recompile with this config or drop --config";
    return false;
  }
  std::string diff;
  if (!sameConfig(user, p.config(), "", diff)) {
    err = "--config '" + path + "' disagrees with the config compiled into the program: " +
          diff + "; recompile with this config or drop --config";
    return false;
  }
  return true;
}

/// What the offload keys would move off the device, against the shortfall (the compiler's
/// "offloadable" of a program compiled without offload: the bytes and the keys that move
/// them, of the optimizer state and gradients and of the parameters).
static std::string offloadAdvice(const Json &plan, uint64_t shortBy) {
  const Json *off = plan.get("offloadable");
  if (!off)
    return "";
  auto part = [&](const char *what, uint64_t &bytes, std::string &keys) {
    const Json *o = off->get(what);
    const Json *b = o ? o->get("bytes") : nullptr, *k = o ? o->get("keys") : nullptr;
    bytes = b && b->isNumber() ? static_cast<uint64_t>(b->number) : 0;
    keys = k && k->isString() ? k->text : "";
  };
  uint64_t o = 0, q = 0;
  std::string optKey, paramKey;
  part("optimizer", o, optKey);
  part("param", q, paramKey);
  auto bytes = [](uint64_t b) {
    return std::to_string(b) + " bytes (" + dsrt::io::formatBytes(b) + ")";
  };
  if (o && o >= shortBy)
    return "; " + optKey + " would move " + bytes(o) + " of optimizer state and gradients " +
           "off the device: recompile with it";
  if (o + q >= shortBy && q)
    return "; " + optKey + " and " + paramKey + " together would move " + bytes(o + q) +
           " of model state off the device: recompile with both";
  if (o || q)
    return "; the offload keys (" + optKey + (q ? ", " + paramKey : "") + ") would move only " +
           bytes(o + q) + " of model state off the device";
  return "";
}

bool checkPlan(const ProgramSpec &p, uint64_t deviceMemory, std::string &err) {
  const Json *plan = p.meta.get("plan");
  if (!deviceMemory || !plan)
    return true;
  const Json *peak = plan->get("peak_bytes");
  if (!peak || !peak->isNumber())
    return true;
  uint64_t need = static_cast<uint64_t>(peak->number);
  if (need <= deviceMemory)
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
        std::to_string(deviceMemory) + " (" + dsrt::io::formatBytes(deviceMemory) +
        "), short by " + std::to_string(need - deviceMemory) + " bytes" +
        (largest.empty() ? "" : "; largest buffers: " + largest) + offloadAdvice(*plan, need - deviceMemory) +
        "; raise --device-memory to at least " + std::to_string(need) +
        " or lower train_micro_batch_size_per_gpu";
  return false;
}

} // namespace dsrt::driver

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

std::string ProgramSpec::precision() const {
  const Json &c = config();
  return c.get("fp16") ? "fp16" : c.get("bf16") ? "bf16" : "fp32";
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
          !sg || !sg->asInt(1, INT64_MAX, s.splitSegments) || !pa ||
          !pa->asInt(1, 1 << 20, s.splitParts) || s.dims[s.splitDim] % s.splitSegments != 0)
        return bad("slot '" + s.name + "' has a malformed \"split\"");
      s.splitAxis = ax->text;
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
  auto integral = [](double v) { return std::floor(v) == v && v > 0 && v < 9.0e15; };
  if (!integral(g) || !integral(m) || !integral(a) || !integral(w) || !integral(spp) ||
      !(sd >= 0 && sd < 1.8e19))
    return bad("the config's batch sizes, world size, steps_per_print or seed are out of range");
  int64_t &G = p.G, &mb = p.mb, &gas = p.gas, &dp = p.dp;
  G = static_cast<int64_t>(g);
  mb = static_cast<int64_t>(m);
  gas = static_cast<int64_t>(a);
  dp = static_cast<int64_t>(w);
  p.stepsPerPrint = static_cast<int64_t>(spp);
  p.seed = static_cast<uint64_t>(sd);
  if (const Json *z = cfg->get("zero_optimization"))
    if (const Json *st = z->get("stage"))
      st->asInt(0, 3, p.zeroStage);
  int64_t product = 0;
  if (!io::checkedMul(mb, gas, product) || !io::checkedMul(product, dp, product) || G != product)
    return bad("train_batch_size " + std::to_string(G) + " != micro-batch " +
               std::to_string(mb) + " x accumulation " + std::to_string(gas) + " x world " +
               std::to_string(dp));
  p.meshAxes = {"dp"};
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
      p.meshAxes.push_back(axes->items[i].text);
      p.meshShape.push_back(n);
      if (axes->items[i].text == "dp")
        dpSize = n;
    }
    if (dpSize != dp)
      return bad("the mesh's dp axis has " + std::to_string(dpSize) +
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
      if (p.meshAxes[i] == "pp")
        ppSize = p.meshShape[i];
    if (ppSize != p.pipelineStages)
      return bad("the mesh's pp axis has " + std::to_string(ppSize) + " ranks but the "
                 "pipeline has " + std::to_string(p.pipelineStages) + " stages");
  }
  const Json *optim = cfg->get("optimizer");
  const Json *params = optim ? optim->get("params") : nullptr;
  const Json *lrj = params ? params->get("lr") : nullptr;
  if (!lrj || !lrj->isNumber())
    return bad("the config has no optimizer.params.lr");
  p.lr = lrj->number;
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
  // A user config may carry a section with "enabled": false; the compiled one has a section
  // only when enabled (ProgramSpec::precision).
  auto precision = [](const Json &c) -> std::string {
    auto enabled = [&](const char *key) {
      const Json *s = c.get(key);
      const Json *e = s ? s->get("enabled") : nullptr;
      return e && e->kind == Json::Bool && e->boolean;
    };
    return enabled("fp16") ? "fp16" : enabled("bf16") || enabled("bfloat16") ? "bf16" : "fp32";
  };
  std::string want = precision(user), have = p.precision();
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

/// What DeepSpeed's offload keys would move off the device, against the shortfall (the
/// compiler's offloadable_bytes of a program compiled without offload).
static std::string offloadAdvice(const Json &plan, uint64_t shortBy) {
  const Json *off = plan.get("offloadable_bytes");
  if (!off)
    return "";
  const Json *opt = off->get("offload_optimizer"), *par = off->get("offload_param");
  uint64_t o = opt && opt->isNumber() ? static_cast<uint64_t>(opt->number) : 0;
  uint64_t q = par && par->isNumber() ? static_cast<uint64_t>(par->number) : 0;
  const std::string optKey = "zero_optimization.offload_optimizer {\"device\": \"cpu\"} (or "
                             "\"nvme\" with stage 3)";
  const std::string paramKey = "zero_optimization.offload_param {\"device\": \"cpu\"} (or "
                               "\"nvme\")";
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

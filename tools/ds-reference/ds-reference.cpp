//===- ds-reference.cpp - the LibTorch eager-mode training oracle ----------===//
//
// Trains a TorchScript module the way a compiled ds program trains it: the same DeepSpeed
// config, data order (dsrt::io::sampleOffset), loss formula, AdamW and clipping, and the same
// LOG.jsonl format, so that the two logs can be compared line by line. An N-rank data-parallel
// run is reproduced in one process by looping over the simulated ranks.
//
#include "dsrt/dsrt.h"
#include "dsrt/io.h"
#include "ds/Config/DeepSpeedConfig.h"
#include "ds/Transforms/MuonRule.h"
#include "ds/Importer/ModelFile.h"
#include "ds/Pipelines/Pipelines.h"

#include <torch/csrc/jit/passes/inliner.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

namespace {

const char *const kUsage =
    "usage: ds-reference MODEL.pt --config ds_config.json --data NAME=FILE.npy ... --steps N\n"
    "                    [options]\n"
    "  --config FILE            DeepSpeed config (required)\n"
    "  --data NAME=FILE.npy     data for forward argument NAME (first dim = samples)\n"
    "  --steps N                optimizer steps to run (required)\n"
    "  --log FILE               write one JSON line per step\n"
    "  --world-size N           simulate N data-parallel ranks (default: from the config)\n"
    "  --loss-index I           tuple element of forward's result that is the loss\n"
    "                           (default: the last 0-dim tensor)\n"
    "  --weights FILE           initial weights (.safetensors; default: the module's own)\n"
    "  --threads N              intra-op threads\n"
    "  --device-memory BYTES    accepted for symmetry with ds-run; LibTorch CPU has no arena\n"
    "  --save-weights FILE      write parameters and buffers after the last step (rank 0's)\n"
    "  --dump-grads FILE        write step 1's gradients (before clipping and the optimizer)\n"
    "  --precision P            fp32 (default) or bf16: bf16 parameters and activations\n"
    "                           (LibTorch's bf16 kernels), the loss in f32, fp32 master\n"
    "                           weights and optimizer state, as DeepSpeed's bf16 mode\n"
    "  --help                   show this help\n";

const char *const kFlags = "--config, --data, --steps, --log, --world-size, --loss-index, "
                           "--weights, --threads, --device-memory, --save-weights, "
                           "--dump-grads, --precision, --help";

/// The useful line of a LibTorch exception: TorchScript wraps the cause ("RuntimeError: ...",
/// after a traceback, sometimes right after the model's source text); without such a line, the
/// message up to LibTorch's C++ frames.
std::string causeOf(const std::exception &e) {
  std::string what = e.what(), best;
  what = what.substr(0, what.find("\nException raised from"));
  for (const char *kind : {"RuntimeError: ", "ValueError: ", "TypeError: ", "IndexError: ",
                           "NotImplementedError: ", "AssertionError: "}) {
    size_t k = what.rfind(kind);
    if (k != std::string::npos) {
      size_t start = k + std::strlen(kind);
      best = what.substr(start, what.find('\n', start) - start);
      break;
    }
  }
  return best.empty() ? what : best;
}

[[noreturn]] void die(const std::string &msg) {
  std::fprintf(stderr, "ds-reference: error: %s\n", msg.c_str());
  std::fflush(stderr);
  std::exit(1);
}

struct Options {
  std::string model, config, log, weights, saveWeights, dumpGrads, tokens, precision = "fp32";
  std::vector<std::pair<std::string, std::string>> data;
  int64_t steps = -1, worldSize = 0, lossIndex = -1, threads = 0, seqLen = 0;
  int tokenBytes = 2;
};

int64_t parseCount(const std::string &flag, const std::string &v, int64_t min) {
  char *end = nullptr;
  errno = 0;
  long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || errno || *end || n < min)
    die(flag + " takes an integer >= " + std::to_string(min) + ", got '" + v + "'");
  return n;
}

Options parseFlags(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      std::exit(0);
    }
    if (a.rfind("--", 0) != 0) {
      if (!o.model.empty())
        die("unexpected argument '" + a + "' (one MODEL.pt; valid flags: " + kFlags + ")");
      o.model = a;
      continue;
    }
    std::string name = a, value;
    size_t eq = a.find('=');
    bool hasValue = eq != std::string::npos;
    if (hasValue) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
    }
    static const std::unordered_set<std::string> known = {
        "--config",  "--data",    "--steps",         "--log",          "--world-size",
        "--loss-index", "--weights", "--threads", "--device-memory", "--save-weights",
        "--dump-grads", "--tokens", "--seq-len", "--token-dtype", "--precision"};
    if (!known.count(name))
      die("unknown flag '" + name + "' (valid flags: " + kFlags + ")");
    if (!hasValue) {
      if (i + 1 >= argc)
        die(name + " needs a value (see --help)");
      value = argv[++i];
    }
    if (name == "--config") {
      o.config = value;
    } else if (name == "--data") {
      size_t e = value.find('=');
      if (e == std::string::npos || e == 0 || e + 1 == value.size())
        die("--data takes NAME=FILE.npy, got '" + value + "'");
      o.data.emplace_back(value.substr(0, e), value.substr(e + 1));
    } else if (name == "--steps") {
      o.steps = parseCount(name, value, 1);
    } else if (name == "--tokens") {
      o.tokens = value;
    } else if (name == "--seq-len") {
      o.seqLen = parseCount(name, value, 1);
    } else if (name == "--token-dtype") {
      if (value != "uint16" && value != "uint32")
        die("--token-dtype takes uint16 or uint32, got '" + value + "'");
      o.tokenBytes = value == "uint16" ? 2 : 4;
    } else if (name == "--log") {
      o.log = value;
    } else if (name == "--world-size") {
      o.worldSize = parseCount(name, value, 1);
    } else if (name == "--loss-index") {
      o.lossIndex = parseCount(name, value, 0);
    } else if (name == "--weights") {
      o.weights = value;
    } else if (name == "--threads") {
      o.threads = parseCount(name, value, 1);
    } else if (name == "--device-memory") {
      uint64_t b;
      if (!dsrt::io::parseBytes(value, b))
        die("--device-memory takes a byte count such as 1073741824, 512M, 2GiB; got '" +
            value + "'");
    } else if (name == "--save-weights") {
      o.saveWeights = value;
    } else if (name == "--dump-grads") {
      o.dumpGrads = value;
    } else if (name == "--precision") {
      if (value == "fp16")
        die("--precision fp16 needs LibTorch's CPU fp16 kernels, which Debian's LibTorch 1.13 "
            "lacks (they come with LibTorch 2.x); use --precision bf16, or the fp32 reference");
      if (value != "fp32" && value != "bf16")
        die("--precision takes fp32 or bf16, got '" + value + "'");
      o.precision = value;
    }
  }
  if (o.model.empty())
    die("no model: pass MODEL.pt (a TorchScript archive) first (see --help)");
  if (o.config.empty())
    die("--config ds_config.json is required");
  if (o.steps < 0)
    die("--steps N is required (the number of optimizer steps to run)");
  return o;
}

at::ScalarType torchType(int32_t dtype) {
  switch (dtype) {
  case DSRT_F32: return at::kFloat;
  case DSRT_F64: return at::kDouble;
  case DSRT_I64: return at::kLong;
  case DSRT_I32: return at::kInt;
  case DSRT_I1: return at::kBool;
  case DSRT_BF16: return at::kBFloat16;
  case DSRT_F16: return at::kHalf;
  default: return at::kByte; // dsrt::io::kU8
  }
}

int32_t dsrtType(at::ScalarType t) {
  switch (t) {
  case at::kFloat: return DSRT_F32;
  case at::kDouble: return DSRT_F64;
  case at::kLong: return DSRT_I64;
  case at::kInt: return DSRT_I32;
  case at::kBool: return DSRT_I1;
  case at::kBFloat16: return DSRT_BF16;
  case at::kHalf: return DSRT_F16;
  case at::kByte: return dsrt::io::kU8;
  default: return -1;
  }
}

at::Tensor toTensor(const dsrt::io::Array &a) {
  std::vector<int64_t> dims(a.dims.begin(), a.dims.end());
  return torch::from_blob(const_cast<uint8_t *>(a.data.data()), dims,
                          torch::TensorOptions().dtype(torchType(a.dtype)))
      .clone();
}

/// Writes named tensors (contiguous CPU copies) as safetensors.
void writeTensors(const std::string &flag, const std::string &path,
                  const std::vector<std::pair<std::string, at::Tensor>> &named) {
  std::vector<at::Tensor> held;
  std::vector<dsrt::io::SafetensorsEntry> entries;
  for (const auto &n : named) {
    at::Tensor t = n.second.detach().contiguous();
    held.push_back(t);
    int32_t dt = dsrtType(t.scalar_type());
    if (dt < 0)
      die(flag + ": tensor '" + n.first + "' has element type " +
          std::string(c10::toString(t.scalar_type())) + ", which safetensors output lacks");
    entries.push_back({n.first, dt, t.sizes().vec(), t.data_ptr(), t.nbytes()});
  }
  std::string err;
  if (!dsrt::io::writeSafetensors(path, entries, err))
    die(flag + ": " + err);
}

/// The loss in forward's result: the tensor itself, tuple element `index`, or the last 0-dim
/// tensor element.
at::Tensor lossOf(const c10::IValue &out, int64_t index) {
  if (out.isTensor()) {
    if (index > 0)
      die("--loss-index " + std::to_string(index) + ": forward returns a single tensor");
    return out.toTensor();
  }
  if (!out.isTuple() && !out.isList())
    die("forward returns " + out.tagKind() + "; it must return the loss or a tuple with it");
  std::vector<c10::IValue> items;
  if (out.isTuple())
    items = out.toTupleRef().elements().vec();
  else
    for (const c10::IValue &v : out.toListRef())
      items.push_back(v);
  if (index >= 0) {
    if (index >= static_cast<int64_t>(items.size()) || !items[index].isTensor())
      die("--loss-index " + std::to_string(index) + ": forward's result has " +
          std::to_string(items.size()) + " elements and that one is not a tensor");
    return items[index].toTensor();
  }
  for (size_t i = items.size(); i-- > 0;)
    if (items[i].isTensor() && items[i].toTensor().dim() == 0)
      return items[i].toTensor();
  die("forward's result has no 0-dim tensor element to use as the loss; pass --loss-index I");
}

struct ModelState {
  std::vector<std::pair<std::string, at::Tensor>> namedParams;  // state_dict names, aliases too
  std::vector<std::pair<std::string, at::Tensor>> namedBuffers; // idem
  std::vector<at::Tensor> params;                               // tied weights once
  std::vector<std::string> paramNames;                          // first name of each
  std::vector<at::Tensor> buffers;                              // distinct buffers
};

/// The parameters that aten::embedding reads in forward (after inlining), and the weight of the
/// aten::linear whose output, through views, is the cross-entropy's input (the LM head), by
/// attribute path: Muon leaves them to its AdamW whatever their names (mlir::ds::usesMuon).
std::set<std::string> embeddingTablesAndHead(torch::jit::Module &m) {
  std::shared_ptr<torch::jit::Graph> g = m.get_method("forward").graph()->copy();
  torch::jit::Inline(*g);
  std::set<std::string> out;
  auto addPath = [&](torch::jit::Value *v) {
    std::string path;
    while (v->node()->kind() == c10::prim::GetAttr) {
      path = v->node()->s(c10::attr::name) + (path.empty() ? "" : "." + path);
      v = v->node()->input(0);
    }
    if (!path.empty())
      out.insert(path);
  };
  const c10::Symbol views[] = {c10::Symbol::aten("view"), c10::Symbol::aten("reshape"),
                               c10::Symbol::aten("flatten"), c10::Symbol::aten("contiguous")};
  std::function<void(torch::jit::Block *)> visit = [&](torch::jit::Block *b) {
    for (torch::jit::Node *n : b->nodes()) {
      for (torch::jit::Block *sub : n->blocks())
        visit(sub);
      if (n->kind() == c10::Symbol::aten("embedding"))
        addPath(n->input(0));
      if (n->kind() != c10::Symbol::aten("cross_entropy_loss"))
        continue;
      torch::jit::Node *logits = n->input(0)->node();
      while (std::find(std::begin(views), std::end(views), logits->kind()) != std::end(views))
        logits = logits->input(0)->node();
      if (logits->kind() == c10::Symbol::aten("linear"))
        addPath(logits->input(1));
    }
  };
  visit(g->block());
  return out;
}

/// DeepSpeed's MuonWithAuxAdam (deepspeed/runtime/zero/muon/original_muon.py), written here
/// with LibTorch ops because torch::optim has no Muon: Nesterov momentum orthogonalized by the
/// standard quintic Newton-Schulz iteration in f32 for the Muon parameters, and its own AdamW
/// (lerp moments, eps after the square root of the corrected v) for the others.
class MuonWithAuxAdam {
public:
  MuonWithAuxAdam(std::vector<at::Tensor> params, std::vector<bool> muon,
                  const ::ds::OptimizerConfig &c)
      : params_(std::move(params)), muon_(std::move(muon)), c_(c) {
    for (const at::Tensor &p : params_) {
      buf1_.push_back(torch::zeros_like(p));
      buf2_.push_back(muon_[buf2_.size()] ? at::Tensor() : torch::zeros_like(p));
    }
  }

  void step(double muonLr, double adamLr) {
    torch::NoGradGuard noGrad;
    ++step_;
    for (size_t i = 0; i < params_.size(); ++i) {
      at::Tensor &p = params_[i];
      at::Tensor g = p.grad().defined() ? p.grad().clone() : torch::zeros_like(p);
      if (muon_[i]) {
        buf1_[i].lerp_(g, 1 - c_.momentum);
        at::Tensor u = g.lerp_(buf1_[i], c_.momentum);
        at::Tensor x = u.view({u.size(0), -1});
        bool tall = x.size(0) > x.size(1);
        if (tall)
          x = x.t();
        x = x / (x.norm() + 1e-7);
        for (int it = 0; it < 5; ++it) {
          at::Tensor a = torch::matmul(x, x.t());
          at::Tensor b = -4.7750 * a + torch::matmul(2.0315 * a, a);
          x = 3.4445 * x + torch::matmul(b, x);
        }
        if (tall)
          x = x.t();
        x = x * std::sqrt(std::max(1.0, static_cast<double>(p.size(-2)) /
                                            static_cast<double>(p.size(-1))));
        p.mul_(1 - muonLr * c_.weightDecay);
        p.add_(x.reshape(p.sizes()), -muonLr);
      } else {
        buf1_[i].lerp_(g, 1 - c_.beta1);
        buf2_[i].lerp_(g.square(), 1 - c_.beta2);
        at::Tensor m = buf1_[i] / (1 - std::pow(c_.beta1, static_cast<double>(step_)));
        at::Tensor v = buf2_[i] / (1 - std::pow(c_.beta2, static_cast<double>(step_)));
        at::Tensor update = m / (v.sqrt() + c_.eps);
        p.mul_(1 - adamLr * c_.weightDecay);
        p.add_(update, -adamLr);
      }
    }
  }
  void zeroGrad() {
    for (at::Tensor &p : params_)
      if (p.grad().defined())
        p.grad().zero_();
  }
  uint64_t stateBytes() const {
    uint64_t n = 0;
    for (size_t i = 0; i < params_.size(); ++i)
      n += buf1_[i].nbytes() + (buf2_[i].defined() ? buf2_[i].nbytes() : 0);
    return n;
  }

private:
  std::vector<at::Tensor> params_;
  std::vector<bool> muon_;
  ::ds::OptimizerConfig c_;
  std::vector<at::Tensor> buf1_, buf2_;
  int64_t step_ = 0;
};

/// DeepSpeed's loss scale for fp16, written from its sources (independently of the driver's):
/// a static `loss_scale`, or a dynamic one. Without ZeRO (FP16_Optimizer._update_scale) every
/// overflow halves it, clamped at min_loss_scale; with ZeRO (DynamicLossScaler.update_scale)
/// overflows are first absorbed by the hysteresis, and one at the minimum scale is an error.
/// Both double after loss_scale_window steps without an overflow since the last one.
struct DeepSpeedLossScale {
  double scale = 65536, minScale = 1;
  bool dynamic = true, zero = false, consecutive = false;
  int64_t window = 1000, shift = 2, hysteresis = 2, lastOverflow = -1, iter = 0;

  explicit DeepSpeedLossScale(const ::ds::PrecisionConfig &p, int64_t zeroStage) {
    dynamic = p.lossScale == 0;
    scale = dynamic ? std::ldexp(1.0, static_cast<int>(p.initialScalePower)) : p.lossScale;
    minScale = p.minLossScale;
    window = p.lossScaleWindow;
    shift = hysteresis = p.hysteresis;
    consecutive = p.consecutiveHysteresis;
    zero = zeroStage > 0;
  }
  /// False when a ZeRO run overflows at the minimum scale.
  bool update(bool overflow) {
    if (!dynamic)
      return true;
    if (overflow) {
      if (!zero) {
        scale = std::max(scale / 2, minScale);
      } else if (shift == 1 || hysteresis == 1) {
        if (scale == minScale)
          return false;
        scale = std::max(scale / 2, minScale);
      } else {
        --hysteresis;
      }
      lastOverflow = iter;
    } else {
      if (zero && consecutive)
        hysteresis = shift;
      int64_t stable = iter - lastOverflow - 1;
      if (stable > 0 && stable % window == 0) {
        if (zero && !consecutive)
          hysteresis = shift;
        scale *= 2;
      }
    }
    ++iter;
    return true;
  }
};

/// Replaces input 0 of every `op` node of forward's (inlined) graph with what `rewrite`
/// inserts before the node. Returns how many it changed.
int rewriteFirstInputs(torch::jit::Module &m, const char *op,
                       const std::function<torch::jit::Value *(torch::jit::Graph &,
                                                               torch::jit::Node *)> &rewrite) {
  std::shared_ptr<torch::jit::Graph> g = m.get_method("forward").graph();
  torch::jit::Inline(*g); // F.cross_entropy is a call until inlined
  int changed = 0;
  std::function<void(torch::jit::Block *)> visit = [&](torch::jit::Block *b) {
    for (torch::jit::Node *n : b->nodes()) {
      for (torch::jit::Block *sub : n->blocks())
        visit(sub);
      if (n->kind() != c10::Symbol::aten(op))
        continue;
      torch::jit::WithInsertPoint at(n);
      n->replaceInput(0, rewrite(*g, n));
      ++changed;
    }
  };
  visit(g->block());
  return changed;
}

/// bf16 as ds trains it (and DeepSpeed's bf16 mode with an f32 loss): the cross-entropy of
/// forward's graph reads its logits widened to f32, so that the loss is computed and returned
/// in f32 from the bf16 logits rather than rounded to bf16. Returns how many it changed.
int widenLossInputs(torch::jit::Module &m) {
  return rewriteFirstInputs(m, "cross_entropy_loss", [](torch::jit::Graph &g, torch::jit::Node *n) {
    return g.insert(c10::Symbol::aten("to"), {n->input(0), c10::ScalarType::Float});
  });
}

/// bf16: baddbmm(input, b1, b2) reads its input in b1's dtype, as LibTorch 1.13 did (its
/// result took the batches' dtype). nn.MultiheadAttention scripted by PyTorch 1.13 adds an f32
/// mask to bf16 scores this way, and LibTorch 2.x's baddbmm refuses mixed dtypes.
int matchBaddbmmInput(torch::jit::Module &m) {
  return rewriteFirstInputs(m, "baddbmm", [](torch::jit::Graph &g, torch::jit::Node *n) {
    return g.insert(c10::Symbol::aten("type_as"), {n->input(0), n->input(1)});
  });
}

ModelState collect(torch::jit::Module &m) {
  ModelState s;
  std::unordered_set<const void *> seen;
  for (const auto &p : m.named_parameters(/*recurse=*/true)) {
    s.namedParams.emplace_back(p.name, p.value);
    if (seen.insert(p.value.unsafeGetTensorImpl()).second) {
      s.params.push_back(p.value);
      s.paramNames.push_back(p.name);
    }
  }
  seen.clear();
  for (const auto &b : m.named_buffers(/*recurse=*/true)) {
    s.namedBuffers.emplace_back(b.name, b.value);
    if (seen.insert(b.value.unsafeGetTensorImpl()).second)
      s.buffers.push_back(b.value);
  }
  return s;
}

void loadWeights(const std::string &path, ModelState &s) {
  std::vector<dsrt::io::NamedArray> file;
  std::string err;
  if (!dsrt::io::readSafetensors(path, file, err))
    die("--weights: " + err);
  std::map<std::string, const dsrt::io::Array *> byName;
  for (const auto &n : file)
    byName[n.first] = &n.second;
  torch::NoGradGuard noGrad;
  auto load = [&](const std::string &name, at::Tensor &t) {
    auto it = byName.find(name);
    if (it == byName.end())
      die("weights '" + path + "' have no tensor '" + name + "' (" +
          dsrt::io::formatDims(t.sizes().vec()) + "); save the model's full state_dict");
    const dsrt::io::Array &a = *it->second;
    if (a.dims != t.sizes().vec() || torchType(a.dtype) != t.scalar_type())
      die("weights '" + path + "': tensor '" + name + "' is " + a.describe() +
          " but the model's is " + dsrt::io::formatDims(t.sizes().vec()) + " " +
          dsrt::io::dtypeName(dsrtType(t.scalar_type())));
    t.copy_(toTensor(a));
  };
  for (auto &p : s.namedParams)
    load(p.first, p.second);
  for (auto &b : s.namedBuffers)
    load(b.first, b.second);
}

int run(int argc, char **argv) {
  Options o = parseFlags(argc, argv);

  auto cfgOr = ds::loadDeepSpeedConfig(o.config, o.worldSize);
  if (!cfgOr)
    die(llvm::toString(cfgOr.takeError()));
  const ds::DeepSpeedConfig &cfg = *cfgOr;
  for (const std::string &w : cfg.warnings)
    std::fprintf(stderr, "ds-reference: warning: %s\n", w.c_str());
  if (cfg.moe.dropTokens)
    die("the config drops tokens past each expert's capacity (moe.drop_tokens), which the "
        "exported model does not do and ds-reference runs it as exported; judge such a run "
        "against PyTorch with DeepSpeed's gate (test/e2e/train_compare.py --drop-tokens)");
  const int64_t G = cfg.trainBatchSize, mb = cfg.microBatchSize,
                gas = cfg.gradientAccumulationSteps, dp = cfg.worldSize;

  torch::manual_seed(cfg.seed);
  if (o.threads > 0)
    at::set_num_threads(static_cast<int>(o.threads));

  mlir::ds::LoadedModel loaded;
  std::string loadError = mlir::ds::loadModelFile(o.model, loaded);
  if (!loadError.empty())
    die(loadError);
  torch::jit::Module module = loaded.module;

  // Match forward's arguments (after self) to the --data names.
  const c10::FunctionSchema &schema = module.get_method("forward").function().getSchema();
  std::vector<std::string> argNames;
  for (size_t i = 1; i < schema.arguments().size(); ++i)
    argNames.push_back(schema.arguments()[i].name());
  std::string argList;
  for (const std::string &n : argNames)
    argList += (argList.empty() ? "" : ", ") + n;
  for (const auto &d : o.data)
    if (std::find(argNames.begin(), argNames.end(), d.first) == argNames.end())
      die("--data " + d.first + ": forward has no argument '" + d.first + "' (its arguments: " +
          argList + ")");
  std::vector<at::Tensor> data;
  int64_t fit = INT64_MAX;
  std::string fitName;
  size_t tokenArgs = 0;
  if (!o.tokens.empty()) {
    // The first two arguments from the token file, in the driver's windows (dsrt::io).
    if (o.seqLen <= 0)
      die("--tokens needs --seq-len T (the length of each sample)");
    if (argNames.size() < 2)
      die("--tokens feeds forward's first two arguments; it has " +
          std::to_string(argNames.size()));
    dsrt::io::TokenFile tokens;
    std::string err;
    if (!tokens.open(o.tokens, o.tokenBytes, err))
      die("--tokens: " + err);
    int64_t samples = tokens.samples(o.seqLen);
    fit = dsrt::io::stepsThatFit(samples, G);
    fitName = "--tokens " + o.tokens + " has " + std::to_string(tokens.tokens()) + " tokens, " +
              std::to_string(samples) + " samples of " + std::to_string(o.seqLen) + " + 1";
    int64_t need = std::min(samples, o.steps * G);
    for (int64_t shift = 0; shift < 2; ++shift) {
      at::Tensor t = torch::empty({need, o.seqLen}, at::kLong);
      for (int64_t j = 0; j < need; ++j)
        tokens.window(j, o.seqLen, shift, DSRT_I64, t.data_ptr<int64_t>() + j * o.seqLen);
      data.push_back(t);
    }
    tokenArgs = 2;
  }
  for (size_t ai = tokenArgs; ai < argNames.size(); ++ai) {
    const std::string &n = argNames[ai];
    const std::pair<std::string, std::string> *given = nullptr;
    for (const auto &d : o.data)
      if (d.first == n) {
        if (given)
          die("--data " + n + " is given twice");
        given = &d;
      }
    if (!given)
      die("no data for forward argument '" + n + "': pass --data " + n + "=FILE.npy");
    dsrt::io::Array a;
    std::string err;
    if (!dsrt::io::readNpy(given->second, a, err))
      die("--data " + n + ": " + err);
    if (a.dims.empty())
      die("--data " + n + "=" + given->second + " is a scalar; its first dimension must be "
          "samples");
    int64_t f = dsrt::io::stepsThatFit(a.dims[0], G);
    if (f < fit) {
      fit = f;
      fitName = n + "=" + given->second + " has " + std::to_string(a.dims[0]) + " samples";
    }
    data.push_back(toTensor(a));
  }
  if (!argNames.empty() && o.steps > fit)
    die("not enough data: --data " + fitName + ", but " + std::to_string(o.steps) +
        " steps of train_batch_size " + std::to_string(G) + " need " +
        std::to_string(o.steps * G) + "; it fits " + std::to_string(fit) +
        " steps (lower --steps or add samples)");

  ModelState s = collect(module);
  if (!o.weights.empty())
    loadWeights(o.weights, s);
  // bf16: the parameters become bf16 and the optimizer steps their f32 masters (buffers, such
  // as BatchNorm's statistics, stay f32, as ds keeps them).
  const bool bf16 = o.precision == "bf16";
  std::vector<at::Tensor> masters;
  if (bf16) {
    if (widenLossInputs(module) == 0)
      die("--precision bf16: forward has no aten::cross_entropy_loss whose input could be "
          "widened to compute the loss in f32");
    matchBaddbmmInput(module);
    torch::NoGradGuard noGrad;
    for (at::Tensor &p : s.params) {
      masters.push_back(p.detach().clone());
      p.set_data(p.detach().to(at::kBFloat16));
    }
    for (at::Tensor &d : data) // float inputs enter a bf16 model rounded, as in ds
      if (d.is_floating_point())
        d = d.to(at::kBFloat16);
  }
  for (at::Tensor &p : s.params)
    p.requires_grad_(true);
  // What the optimizer updates: the parameters, or their f32 masters.
  std::vector<at::Tensor> &updated = bf16 ? masters : s.params;

  // The schedule as the compiled program carries it (the descriptor's run.lr).
  dsrt::io::LrSchedule schedule;
  {
    dsrt::io::Json run;
    std::string err;
    if (!dsrt::io::parseJson(mlir::ds::describeRun(cfg), run, err) || !run.get("lr") ||
        !dsrt::io::readLrSchedule(*run.get("lr"), schedule, err))
      die("internal: the run descriptor is malformed: " + err);
  }
  // DeepSpeed's optimizers in torch::optim terms: AdamW, and Adam with adam_w_mode, are
  // torch's AdamW; Adam without it is torch's Adam (L2); SGD is torch's SGD.
  const ::ds::OptimizerConfig &oc = cfg.optimizer;
  std::unique_ptr<torch::optim::Optimizer> optimizerPtr;
  std::unique_ptr<MuonWithAuxAdam> muon;
  if (oc.type == ds::OptimizerKind::muon) {
    std::set<std::string> tables = embeddingTablesAndHead(module);
    std::vector<bool> useMuon;
    for (size_t i = 0; i < s.params.size(); ++i) {
      // The parameter's names: the first, and every alias of the same tensor.
      std::vector<std::string> names;
      bool table = false;
      for (const auto &np : s.namedParams)
        if (np.second.unsafeGetTensorImpl() == s.params[i].unsafeGetTensorImpl()) {
          names.push_back(np.first);
          table = table || tables.count(np.first);
        }
      useMuon.push_back(mlir::ds::usesMuon(names, s.params[i].dim(), table));
    }
    muon = std::make_unique<MuonWithAuxAdam>(updated, useMuon, oc);
    // torch::optim needs an optimizer object for the code below; Muon never steps it.
    optimizerPtr = std::make_unique<torch::optim::SGD>(updated, torch::optim::SGDOptions(0));
  } else if (oc.type == ds::OptimizerKind::sgd)
    optimizerPtr = std::make_unique<torch::optim::SGD>(
        updated, torch::optim::SGDOptions(oc.lr)
                      .momentum(oc.momentum)
                      .dampening(oc.dampening)
                      .weight_decay(oc.weightDecay)
                      .nesterov(oc.nesterov));
  else if (oc.adamWMode)
    optimizerPtr = std::make_unique<torch::optim::AdamW>(
        updated, torch::optim::AdamWOptions(oc.lr)
                      .betas(std::make_tuple(oc.beta1, oc.beta2))
                      .eps(oc.eps)
                      .weight_decay(oc.weightDecay));
  else
    optimizerPtr = std::make_unique<torch::optim::Adam>(
        updated, torch::optim::AdamOptions(oc.lr)
                      .betas(std::make_tuple(oc.beta1, oc.beta2))
                      .eps(oc.eps)
                      .weight_decay(oc.weightDecay));
  torch::optim::Optimizer &optimizer = *optimizerPtr;

  // Each simulated rank's BatchNorm statistics (and any other buffers) evolve on their own.
  std::vector<std::vector<at::Tensor>> rankBuffers;
  bool swapBuffers = dp > 1 && !s.buffers.empty();
  if (swapBuffers)
    for (int64_t r = 0; r < dp; ++r) {
      std::vector<at::Tensor> copy;
      for (const at::Tensor &b : s.buffers)
        copy.push_back(b.detach().clone());
      rankBuffers.push_back(std::move(copy));
    }
  auto swapIn = [&](int64_t r) {
    torch::NoGradGuard g;
    for (size_t i = 0; i < s.buffers.size(); ++i)
      s.buffers[i].copy_(rankBuffers[r][i]);
  };
  auto swapOut = [&](int64_t r) {
    torch::NoGradGuard g;
    for (size_t i = 0; i < s.buffers.size(); ++i)
      rankBuffers[r][i].copy_(s.buffers[i]);
  };

  std::FILE *log = nullptr;
  if (!o.log.empty() && !(log = std::fopen(o.log.c_str(), "w")))
    die("cannot write --log '" + o.log + "': " + std::strerror(errno));

  uint64_t paramBytes = 0;
  for (const at::Tensor &p : s.params)
    paramBytes += p.nbytes();

  // fp16 (LibTorch 1.13 has no CPU fp16 kernels): fp32 training driven by DeepSpeed's loss
  // scaler, each step's overflow decided from these gradients: the step overflows when one
  // element that ds holds in fp16, scaled, reaches 65520 (the first value fp16 rounds to
  // infinity). ds holds each micro-batch's gradient, each rank's running sum and the sum over
  // the ranks; all are scaled by the loss scale over dp x gas, as is the loss.
  const bool fp16 = cfg.precision.dtype == ds::Precision::fp16;
  std::unique_ptr<DeepSpeedLossScale> scaler;
  if (fp16)
    scaler = std::make_unique<DeepSpeedLossScale>(cfg.precision, cfg.zeroStage);
  int64_t applied = 0; // optimizer steps taken (fp16 skips those that overflow)
  auto largestElement = [](const std::vector<at::Tensor> &ts) {
    double m = 0;
    for (const at::Tensor &t : ts)
      if (t.defined() && t.numel())
        m = std::max(m, t.abs().max().item<double>());
    return m;
  };
  auto grads = [&] {
    std::vector<at::Tensor> g;
    for (const at::Tensor &p : s.params)
      g.push_back(p.grad().defined() ? p.grad().detach().clone() : torch::zeros_like(p));
    return g;
  };
  auto minus = [](const std::vector<at::Tensor> &a, const std::vector<at::Tensor> &b) {
    std::vector<at::Tensor> d;
    for (size_t i = 0; i < a.size(); ++i)
      d.push_back(a[i] - b[i]);
    return d;
  };

  for (int64_t step = 1; step <= o.steps; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<float> losses;
    double largest = 0; // fp16: the largest gradient element ds would hold, unscaled
    for (int64_t r = 0; r < dp; ++r) {
      if (swapBuffers)
        swapIn(r);
      std::vector<at::Tensor> rankStart = fp16 ? grads() : std::vector<at::Tensor>();
      for (int64_t k = 0; k < gas; ++k) {
        std::vector<at::Tensor> before = fp16 ? grads() : std::vector<at::Tensor>();
        int64_t first = dsrt::io::sampleOffset(step, r, k, G, mb, gas);
        std::vector<c10::IValue> inputs;
        for (const at::Tensor &d : data)
          inputs.emplace_back(d.narrow(0, first, mb));
        at::Tensor loss;
        try {
          loss = lossOf(module.forward(inputs), o.lossIndex);
        } catch (const std::exception &e) {
          die("step " + std::to_string(step) + ": forward failed (check the --data shapes "
              "and dtypes): " + causeOf(e));
        }
        if (loss.numel() != 1 || !loss.is_floating_point())
          die("the loss (forward's result" +
              (o.lossIndex >= 0 ? " element " + std::to_string(o.lossIndex) : std::string()) +
              ") is a " + dsrt::io::formatDims(loss.sizes().vec()) + " " +
              std::string(c10::toString(loss.scalar_type())) +
              " tensor, not a floating-point scalar; pass --loss-index I");
        losses.push_back(loss.detach().to(at::kFloat).item<float>());
        (loss / static_cast<double>(dp * gas)).backward();
        if (fp16) {
          std::vector<at::Tensor> now = grads();
          largest = std::max({largest, largestElement(minus(now, before)),
                              largestElement(minus(now, rankStart))});
        }
      }
      if (swapBuffers)
        swapOut(r);
    }
    float mean = dsrt::io::meanLoss(losses);
    if (!std::isfinite(mean))
      die("step " + std::to_string(step) + ": loss is " + (std::isnan(mean) ? "nan" : "inf") +
          "; lower the learning rate or enable gradient_clipping");
    if (step == 1 && !o.dumpGrads.empty()) {
      std::vector<std::pair<std::string, at::Tensor>> grads;
      for (size_t i = 0; i < s.params.size(); ++i) {
        at::Tensor g = s.params[i].grad();
        grads.emplace_back(s.paramNames[i], g.defined() ? g : torch::zeros_like(s.params[i]));
      }
      writeTensors("--dump-grads", o.dumpGrads, grads);
    }
    bool overflow = false;
    double stepScale = fp16 ? scaler->scale : 0;
    if (fp16) {
      largest = std::max(largest, largestElement(grads()));
      double ratio = stepScale * largest / 65520.0;
      overflow = !(ratio < 1); // NaN too
      std::printf("overflow-oracle step %lld scale %.17g largest-scaled-gradient %.6g "
                  "(%.4g x the fp16 limit) -> %s\n",
                  (long long)step, stepScale, stepScale * largest, ratio,
                  overflow ? "overflow" : "fits");
      if (overflow) { // the step is skipped: the parameters and optimizer state stay
        for (at::Tensor &p : s.params)
          if (p.grad().defined())
            p.grad().zero_();
      }
      if (!scaler->update(overflow))
        die("step " + std::to_string(step) + ": the gradients overflow at the minimum loss "
            "scale " + dsrt::io::formatFloat(scaler->minScale) + " (DeepSpeed raises here)");
    }
    if (bf16) { // the bf16 gradients, widened, are the masters' (DeepSpeed's bf16 optimizer)
      torch::NoGradGuard noGrad;
      for (size_t i = 0; i < s.params.size(); ++i) {
        at::Tensor g = s.params[i].grad();
        masters[i].mutable_grad() = g.defined() ? g.to(at::kFloat) : torch::zeros_like(masters[i]);
        if (g.defined())
          g.zero_();
      }
    }
    if (cfg.gradientClipping > 0 && !overflow)
      torch::nn::utils::clip_grad_norm_(updated, cfg.gradientClipping);
    // DeepSpeed's schedule, the same function the driver uses (no LibTorch equivalent); it
    // advances with the steps taken, as Adam's step count does.
    dsrt::io::StepScalars hyper = dsrt::io::scheduled(schedule, applied + 1);
    double lrStep = hyper.lr;
    if (overflow) {
      // skipped
    } else if (muon) {
      muon->step(hyper.lr, hyper.auxLr);
      muon->zeroGrad();
    } else {
      for (auto &group : optimizer.param_groups()) {
        group.options().set_lr(lrStep);
        // OneCycle's cycle_momentum: betas = (scheduled momentum, 0.99) each step.
        if (auto *w = dynamic_cast<torch::optim::AdamWOptions *>(&group.options()))
          w->betas(std::make_tuple(hyper.beta1, std::get<1>(w->betas())));
        else if (auto *a = dynamic_cast<torch::optim::AdamOptions *>(&group.options()))
          a->betas(std::make_tuple(hyper.beta1, std::get<1>(a->betas())));
      }
      optimizer.step();
      optimizer.zero_grad();
    }
    if (!overflow)
      ++applied;
    if (bf16) { // the bf16 parameters become their masters' rounding
      torch::NoGradGuard noGrad;
      for (size_t i = 0; i < s.params.size(); ++i)
        s.params[i].copy_(masters[i]);
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count();

    uint64_t stateBytes = muon ? muon->stateBytes() : 0;
    for (const auto &kv : optimizer.state()) {
      std::vector<const at::Tensor *> ts;
      if (auto *w = dynamic_cast<torch::optim::AdamWParamState *>(kv.second.get()))
        ts = {&w->exp_avg(), &w->exp_avg_sq(), &w->max_exp_avg_sq()};
      else if (auto *a = dynamic_cast<torch::optim::AdamParamState *>(kv.second.get()))
        ts = {&a->exp_avg(), &a->exp_avg_sq(), &a->max_exp_avg_sq()};
      else if (auto *g = dynamic_cast<torch::optim::SGDParamState *>(kv.second.get()))
        ts = {&g->momentum_buffer()};
      for (const at::Tensor *t : ts)
        if (t->defined())
          stateBytes += t->nbytes();
    }
    // Gradients are counted at their parameters' size: they persist between steps in ds.
    uint64_t modelState = paramBytes * 2 + stateBytes;

    dsrt::io::LogRecord rec;
    rec.step = step;
    rec.loss = mean;
    rec.lr = lrStep;
    rec.lossScale = stepScale;
    rec.skipped = overflow;
    rec.stepMs = ms;
    rec.samplesPerS = ms > 0 ? static_cast<double>(G) * 1000.0 / ms : 0.0;
    rec.hostPeakBytes = dsrt::io::hostPeakBytes();
    rec.devicePeakBytes = rec.hostPeakBytes; // LibTorch CPU has no separate device arena
    for (int64_t r = 0; r < dp; ++r)
      rec.ranks.push_back({r, rec.devicePeakBytes, rec.hostPeakBytes, modelState, paramBytes,
                           paramBytes, stateBytes});
    if (log && !dsrt::io::writeLogLine(log, rec))
      die("cannot write --log '" + o.log + "': " + std::strerror(errno));
    if ((cfg.stepsPerPrint > 0 && step % cfg.stepsPerPrint == 0) || step == o.steps) {
      std::printf("%s\n", dsrt::io::formatProgress(rec, o.steps).c_str());
      std::fflush(stdout);
    }
  }
  if (log)
    std::fclose(log);

  if (!o.saveWeights.empty()) {
    if (swapBuffers)
      swapIn(0);
    std::vector<std::pair<std::string, at::Tensor>> all = s.namedParams;
    if (bf16) // the export is the f32 masters, as ds's (DeepSpeed's zero_to_fp32)
      for (auto &np : all)
        for (size_t i = 0; i < s.params.size(); ++i)
          if (np.second.unsafeGetTensorImpl() == s.params[i].unsafeGetTensorImpl())
            np.second = masters[i];
    all.insert(all.end(), s.namedBuffers.begin(), s.namedBuffers.end());
    writeTensors("--save-weights", o.saveWeights, all);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception &e) {
    die(causeOf(e));
  }
}

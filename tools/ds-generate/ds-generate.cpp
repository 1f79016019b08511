//===- ds-generate.cpp - one-off generation with a program of ds-opt --inference ---===//
//
// ds-generate GEN.mlir --prompt-ids 1,2,3 [--prompt-ids ...] [--max-new-tokens N]
// [--temperature T --top-k K --top-p P --seed S] [--logits FILE.npy]
//
// Runs @prefill over each prompt in chunks, then @decode a token at a time for every prompt
// together (one sequence per slot of the program's batch), the cache's pages handed out as
// the sequences grow; prints each prompt's new token ids on a line. The weights are
// GEN.safetensors beside GEN.mlir. --logits writes the logits each new token was chosen from
// as [new tokens, prompts, vocabulary] f32 (the first from the prompt's last token, after its
// prefill). Prompts are token ids: reading text needs the tokenizer, which is not built yet.
//
#include "ds/Pipelines/StepJit.h"
#include "dsrt/dsrt.h"
#include "dsrt/io.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include <map>

using namespace mlir;
namespace cl = llvm::cl;
namespace io = dsrt::io;

static cl::opt<std::string> genPath(cl::Positional, cl::desc("GEN.mlir"), cl::Required);
static cl::list<std::string> promptIds("prompt-ids",
                                       cl::desc("A prompt as comma-separated token ids; one "
                                                "per sequence, at most the program's batch"));
static cl::opt<int64_t> maxNewTokens("max-new-tokens", cl::desc("Tokens to generate"),
                                     cl::init(16));
static cl::opt<float> temperature("temperature", cl::desc("0: greedy"), cl::init(0.f));
static cl::opt<int64_t> topK("top-k", cl::desc("0: every token"), cl::init(0));
static cl::opt<float> topP("top-p", cl::desc("1: every token"), cl::init(1.f));
static cl::opt<int64_t> seed("seed", cl::desc("The draws' seed"), cl::init(0));
static cl::opt<int> computeThreads("compute-threads", cl::desc("Compute threads (0: default)"),
                                  cl::init(0));
static cl::opt<std::string> logitsOut(
    "logits", cl::desc("Write the logits each new token was chosen from (.npy, [new tokens, "
                       "prompts, vocabulary])"));

static int fail(const llvm::Twine &msg) {
  llvm::errs() << "ds-generate: " << msg << "\n";
  return 1;
}

static int cacheFull() {
  return fail("the cache is full: ds-opt --inference's max_tokens is too small for these "
              "prompts and --max-new-tokens");
}

namespace {
using GenCall = void (*)(dsrt_context *, dsrt_tensor **, dsrt_tensor **);

/// One program of the descriptor's "generation": its entry point and input shapes by name.
struct Call {
  GenCall fn = nullptr;
  std::map<std::string, std::vector<int64_t>> dims;
  std::vector<std::string> order; ///< the inputs' names in the array's order
};

/// A batch's inputs for one call, by name (i64 or f32 host arrays).
struct Inputs {
  std::map<std::string, std::vector<int64_t>> i64;
  std::map<std::string, std::vector<float>> f32;
};

/// Runs `call` on `in`; returns its results' host copies (tokens i64 [B], logits f32 [B, V]).
void run(dsrt_context *ctx, const Call &call, Inputs &in, std::vector<int64_t> &tokens,
         std::vector<float> &logits, int64_t vocab) {
  std::vector<dsrt_tensor *> args;
  for (const std::string &name : call.order) {
    const std::vector<int64_t> &d = call.dims.at(name);
    bool isF32 = in.f32.count(name);
    void *data = isF32 ? static_cast<void *>(in.f32[name].data())
                       : static_cast<void *>(in.i64[name].data());
    args.push_back(dsrt_tensor_host(ctx, isF32 ? DSRT_F32 : DSRT_I64,
                                    static_cast<int32_t>(d.size()), d.data(), data));
  }
  dsrt_tensor *results[2] = {nullptr, nullptr};
  call.fn(ctx, args.data(), results);
  tokens.resize(call.dims.at("q_lens")[0]);
  logits.resize(tokens.size() * vocab);
  dsrt_tensor_to_host(ctx, tokens.data(), results[0]);
  dsrt_tensor_to_host(ctx, logits.data(), results[1]);
  for (dsrt_tensor *t : results)
    dsrt_tensor_free(ctx, t);
  for (dsrt_tensor *t : args)
    dsrt_tensor_free(ctx, t);
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "ds-generate: generation with a ds-opt --inference "
                                          "program\n");
  if (promptIds.empty())
    return fail("give at least one --prompt-ids 1,2,3 (text prompts need the tokenizer, not "
                "built yet)");
  std::vector<std::vector<int64_t>> prompts;
  for (const std::string &p : promptIds) {
    std::vector<int64_t> ids;
    for (llvm::StringRef s : llvm::split(llvm::StringRef(p), ',')) {
      int64_t id;
      if (s.trim().getAsInteger(10, id) || id < 0)
        return fail("--prompt-ids '" + p + "': not comma-separated token ids");
      ids.push_back(id);
    }
    prompts.push_back(std::move(ids));
  }

  // The program: lowered, JIT-compiled, its descriptor read.
  DialectRegistry registry;
  mlir::ds::registerStepDialects(registry);
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  std::string error;
  OwningOpRef<ModuleOp> module = mlir::ds::loadLoweredStep(genPath, context, sourceMgr, error);
  if (!module)
    return fail(error);
  std::unique_ptr<ExecutionEngine> engine = mlir::ds::jitLowered(*module, "", error);
  if (!engine)
    return fail(error);
  auto lookup = [&](llvm::StringRef name) { return mlir::ds::jitSymbol(*engine, name); };
  auto metadata = reinterpret_cast<const char *(*)()>(lookup("ds_metadata"));
  auto initSlots = reinterpret_cast<void (*)(dsrt_context *)>(lookup("ds_init_slots"));
  io::Json meta;
  if (!metadata || !initSlots || !io::parseJson(metadata(), meta, error) ||
      !meta.get("generation"))
    return fail("'" + genPath + "' is not a generation program (make one with ds-opt MODEL "
                "--inference --config F -o GEN.mlir)");
  std::map<std::string, Call> calls;
  for (const io::Json &c : meta.get("generation")->items) {
    Call call;
    call.fn = reinterpret_cast<GenCall>(lookup(c.get("symbol")->text));
    for (const io::Json &in : c.get("inputs")->items) {
      std::vector<int64_t> d;
      for (const io::Json &x : in.get("dims")->items)
        d.push_back(static_cast<int64_t>(x.number));
      call.order.push_back(in.get("name")->text);
      call.dims[call.order.back()] = d;
    }
    calls[c.get("name")->text] = std::move(call);
  }
  if (!calls.count("prefill") || !calls.count("decode"))
    return fail("'" + genPath + "' lacks @prefill or @decode (ds-opt MODEL --inference "
                "--config F -o GEN.mlir makes both)");
  const Call &prefill = calls["prefill"], &decode = calls["decode"];
  const int64_t B = prefill.dims.at("input_ids")[0], T = prefill.dims.at("input_ids")[1];
  const int64_t maxPages = prefill.dims.at("pages")[1];
  int64_t pageSize = 0, pages = 0, vocab = 0;
  for (const io::Json &s : meta.get("slots")->items)
    if (s.get("role")->text == "kv_cache") {
      pages = static_cast<int64_t>(s.get("dims")->items[0].number);
      pageSize = static_cast<int64_t>(s.get("dims")->items[2].number);
    }
  for (const io::Json &c : meta.get("generation")->items)
    vocab = static_cast<int64_t>(c.get("results")->items[1].get("dims")->items[1].number);
  if (static_cast<int64_t>(prompts.size()) > B)
    return fail(llvm::Twine(prompts.size()) + " prompts but the program runs " + llvm::Twine(B) +
                " sequences at a time (ds-opt --inference's max_batch)");

  // The runtime: slots defined, the weights loaded into them.
  dsrt_context *ctx = dsrt_context_create(0, computeThreads, 0);
  initSlots(ctx);
  llvm::SmallString<256> weightsPath(genPath);
  llvm::sys::path::replace_extension(weightsPath, ".safetensors");
  std::vector<io::NamedArray> weights;
  if (!io::readSafetensors(weightsPath.str().str(), weights, error))
    return fail(error + " (ds-opt --inference writes the weights beside GEN.mlir)");
  std::map<std::string, const io::Array *> byName;
  for (const auto &[name, a] : weights)
    byName[name] = &a;
  const auto &slots = meta.get("slots")->items;
  for (size_t i = 0; i < slots.size(); ++i) {
    const std::string role = slots[i].get("role")->text;
    if (role != "parameter" && role != "buffer")
      continue;
    const std::string &name = slots[i].get("name")->text;
    auto it = byName.find(name);
    if (it == byName.end())
      return fail(weightsPath + " has no '" + name + "': the weights are not this program's "
                  "(ds-opt --inference writes both, GEN.mlir and GEN.safetensors)");
    std::vector<int64_t> dims;
    for (const io::Json &d : slots[i].get("dims")->items)
      dims.push_back(static_cast<int64_t>(d.number));
    const io::Array &a = *it->second;
    if (a.dims != dims || io::dtypeName(a.dtype) != slots[i].get("dtype")->text)
      return fail(weightsPath + "'s '" + name + "' is " + a.describe() + " but the program's is " +
                  io::formatDims(dims) + " " + slots[i].get("dtype")->text +
                  ": the weights are not this program's (ds-opt --inference writes both, "
                  "GEN.mlir and GEN.safetensors)");
    dsrt_tensor_from_host(ctx, dsrt_slot_get(ctx, static_cast<int32_t>(i)),
                          it->second->data.data());
  }

  // The sequences: their tokens, positions and pages.
  const int64_t n = static_cast<int64_t>(prompts.size());
  std::vector<std::vector<int64_t>> owned(B), generated(n);
  std::vector<int64_t> length(B, 0); // positions in the cache
  int64_t nextPage = 0;
  auto slotOf = [&](int64_t b, int64_t pos) -> int64_t {
    while (static_cast<int64_t>(owned[b].size()) * pageSize <= pos) {
      if (nextPage == pages || static_cast<int64_t>(owned[b].size()) == maxPages)
        return -1;
      owned[b].push_back(nextPage++);
    }
    return owned[b][pos / pageSize] * pageSize + pos % pageSize;
  };
  auto fresh = [&](const Call &c) {
    Inputs in;
    for (const std::string &name : c.order) {
      int64_t numel = 1;
      for (int64_t d : c.dims.at(name))
        numel *= d;
      if (name == "temperature" || name == "top_p")
        in.f32[name].assign(numel, name == "top_p" ? topP : temperature);
      else
        in.i64[name].assign(numel, name == "top_k"   ? topK.getValue()
                                   : name == "seeds" ? seed.getValue()
                                   : name == "slots" ? -1 // padding: not written
                                                     : 0);
    }
    return in;
  };
  auto fillPages = [&](Inputs &in) {
    for (int64_t b = 0; b < B; ++b)
      for (size_t k = 0; k < owned[b].size(); ++k)
        in.i64["pages"][b * maxPages + k] = owned[b][k];
  };
  std::vector<int64_t> tokens, next(n, 0);
  std::vector<float> logits, chosenFrom; // [step, prompt, vocabulary]
  std::vector<float> lastLogits(n * vocab);
  // Prefill: chunk c of every prompt that has one, in one call.
  size_t longest = 0;
  for (const auto &p : prompts)
    longest = std::max(longest, p.size());
  for (size_t start = 0; start < longest; start += T) {
    Inputs in = fresh(prefill);
    for (int64_t b = 0; b < n; ++b) {
      const auto &p = prompts[b];
      int64_t count = std::min<int64_t>(T, static_cast<int64_t>(p.size()) - start);
      count = std::max<int64_t>(count, 0);
      for (int64_t t = 0; t < T; ++t) {
        int64_t pos = start + t;
        in.i64["input_ids"][b * T + t] = t < count ? p[pos] : 0;
        in.i64["position_ids"][b * T + t] = t < count ? pos : 0;
        int64_t s = t < count ? slotOf(b, pos) : -1;
        if (t < count && s < 0)
          return cacheFull();
        in.i64["slots"][b * T + t] = s;
      }
      length[b] += count;
      in.i64["context_lens"][b] = length[b];
      in.i64["q_lens"][b] = count;
    }
    fillPages(in);
    run(ctx, prefill, in, tokens, logits, vocab);
    for (int64_t b = 0; b < n; ++b)
      if (start < prompts[b].size() && start + T >= prompts[b].size()) { // its last chunk
        next[b] = tokens[b];
        std::copy_n(logits.begin() + b * vocab, vocab, lastLogits.begin() + b * vocab);
      }
  }
  // Decode: every prompt's next token, one call per step.
  for (int64_t step = 0; step < maxNewTokens; ++step) {
    for (int64_t b = 0; b < n; ++b)
      generated[b].push_back(next[b]);
    chosenFrom.insert(chosenFrom.end(), lastLogits.begin(), lastLogits.end());
    if (step + 1 == maxNewTokens)
      break;
    Inputs in = fresh(decode);
    for (int64_t b = 0; b < n; ++b) {
      int64_t s = slotOf(b, length[b]);
      if (s < 0)
        return cacheFull();
      in.i64["input_ids"][b] = next[b];
      in.i64["position_ids"][b] = length[b];
      in.i64["slots"][b] = s;
      length[b] += 1;
      in.i64["context_lens"][b] = length[b];
      in.i64["q_lens"][b] = 1;
      in.i64["steps"][b] = step + 1;
    }
    fillPages(in);
    run(ctx, decode, in, tokens, logits, vocab);
    for (int64_t b = 0; b < n; ++b)
      next[b] = tokens[b];
    std::copy_n(logits.begin(), n * vocab, lastLogits.begin());
  }
  for (int64_t b = 0; b < n; ++b) {
    for (size_t k = 0; k < generated[b].size(); ++k)
      llvm::outs() << (k ? " " : "") << generated[b][k];
    llvm::outs() << "\n";
  }
  if (!logitsOut.empty()) {
    io::Array a;
    a.dtype = DSRT_F32;
    a.dims = {static_cast<int64_t>(generated[0].size()), n, vocab};
    a.data.resize(chosenFrom.size() * sizeof(float));
    std::memcpy(a.data.data(), chosenFrom.data(), a.data.size());
    if (!io::writeNpy(logitsOut, a, error))
      return fail(error);
  }
  dsrt_context_destroy(ctx);
  return 0;
}

//===- ds-generate.cpp - one-off generation with a program of ds-opt --inference ---===//
//
// ds-generate GEN.mlir --prompt-ids 1,2,3 [--prompt-ids ...] [--max-new-tokens N]
// [--temperature T --top-k K --top-p P --seed S] [--eos-id ID] [--logits FILE.npy]
// ds-generate GEN.mlir --prompt TEXT [--prompt ...] [--tokenizer tokenizer.json] ...
//
// Generates for every prompt with the runtime's generator (dsrt/generate.h): each prompt joins
// the running batch as soon as a row of the programs' batch and its cache pages are free
// (continuous batching), runs @prefill in chunks, then @decode a token at a time beside the
// others; prints each prompt's new token ids on a line. The weights are GEN.safetensors
// beside GEN.mlir. --logits writes the logits each new token was chosen from
// as [new tokens, prompts, vocabulary] f32 (the first from the prompt's last token, after its
// prefill). Prompts are token ids (--prompt-ids) or text (--prompt, read with the model's
// tokenizer.json; the new tokens are then printed as text, special tokens left out). A sequence
// ends at --max-new-tokens or at an --eos-id token (printed among the ids).
//
#include "ds/Pipelines/StepJit.h"
#include "ds/Tokenizer/Tokenizer.h"
#include "dsrt/dsrt.h"
#include "dsrt/generate.h"
#include "dsrt/io.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"

#include <chrono>
#include <map>

using namespace mlir;
namespace cl = llvm::cl;
namespace io = dsrt::io;

static cl::opt<std::string> genPath(cl::Positional, cl::desc("GEN.mlir"), cl::Required);
static cl::list<std::string> promptIds("prompt-ids",
                                       cl::desc("A prompt as comma-separated token ids; one "
                                                "per sequence, at most the program's batch"));
static cl::list<std::string> promptTexts("prompt",
                                         cl::desc("A prompt as text (read with --tokenizer); "
                                                  "prints the new text"));
static cl::opt<std::string> tokenizerPath(
    "tokenizer", cl::desc("The model's tokenizer.json (default: tokenizer.json beside "
                          "GEN.mlir)"));
static cl::list<int64_t> eosIds("eos-id", cl::desc("A token that ends a sequence (the model's "
                                                   "eos_token_id; repeatable)"));
static cl::opt<int64_t> maxNewTokens("max-new-tokens", cl::desc("Tokens to generate"),
                                     cl::init(16));
static cl::opt<float> temperature("temperature", cl::desc("0: greedy"), cl::init(0.f));
static cl::opt<int64_t> topK("top-k", cl::desc("0: every token"), cl::init(0));
static cl::opt<float> topP("top-p", cl::desc("1: every token"), cl::init(1.f));
static cl::opt<int64_t> seed("seed", cl::desc("The draws' seed"), cl::init(0));
static cl::opt<int> computeThreads("compute-threads", cl::desc("Compute threads (0: default)"),
                                  cl::init(0));
static cl::opt<bool> timing("timing", cl::desc("Print the time to the first token and the "
                                             "decoding rate (stderr)"));
static cl::opt<std::string> logitsOut(
    "logits", cl::desc("Write the logits each new token was chosen from (.npy, [new tokens, "
                       "prompts, vocabulary])"));

static int fail(const llvm::Twine &msg) {
  llvm::errs() << "ds-generate: " << msg << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "ds-generate: generation with a ds-opt --inference "
                                          "program\n");
  if (promptIds.empty() == promptTexts.empty())
    return fail("give the prompts as --prompt TEXT or as --prompt-ids 1,2,3 (one of them, "
                "repeated for more prompts)");
  if (!logitsOut.empty() && !eosIds.empty())
    return fail("--logits keeps --max-new-tokens logits of every prompt: leave out --eos-id");
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
  std::unique_ptr<dstok::Tokenizer> tokenizer;
  if (!promptTexts.empty()) {
    std::string path = tokenizerPath;
    if (path.empty()) {
      llvm::SmallString<256> beside(llvm::sys::path::parent_path(genPath));
      llvm::sys::path::append(beside, "tokenizer.json");
      path = beside.str().str();
    }
    std::string error;
    tokenizer = dstok::Tokenizer::load(path, error);
    if (!tokenizer)
      return fail(error + (tokenizerPath.empty() ? " (give the model's tokenizer.json with "
                                                   "--tokenizer FILE)"
                                                 : ""));
    for (const std::string &text : promptTexts)
      prompts.push_back(tokenizer->encode(text));
  }

  // The program: lowered, JIT-compiled, opened with its weights.
  std::string error;
  mlir::ds::GenerationJit jit;
  if (!jit.open(genPath, computeThreads, error))
    return fail(error);
  dsrt_generator *gen = jit.generator();
  const int64_t vocab = dsrt_generator_vocab(gen), rows = dsrt_generator_rows(gen);
  char err[1024] = {0};

  // Every prompt joins as soon as a row and pages are free (continuous batching); its new
  // tokens and the logits each was drawn from are kept in its own order.
  const size_t n = prompts.size();
  dsrt_sampling sampling{temperature, topK, topP, seed};
  std::vector<std::vector<int64_t>> generated(n);
  std::vector<std::vector<float>> drawnFrom(n);
  std::map<int64_t, size_t> promptOf; // sequence id -> prompt
  std::vector<int64_t> ids(rows), tokens(rows);
  std::vector<int32_t> last(rows);
  std::vector<float> logits(rows * vocab);
  size_t admitted = 0, finished = 0;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  Clock::time_point first;
  int64_t produced = 0, afterFirst = 0;
  while (finished < n) {
    while (admitted < n) {
      int32_t retry = 0;
      const auto &p = prompts[admitted];
      int64_t id = dsrt_generator_add(gen, p.data(), static_cast<int64_t>(p.size()),
                                      maxNewTokens, &sampling, &retry, err, sizeof err);
      if (id < 0 && (!retry || promptOf.empty()))
        return fail("prompt " + llvm::Twine(admitted + 1) + ": " + err);
      if (id < 0)
        break; // it joins when a sequence has finished
      promptOf[id] = admitted++;
    }
    int64_t count = dsrt_generator_step(gen, ids.data(), tokens.data(), last.data(),
                                        logitsOut.empty() ? nullptr : logits.data());
    if (count && !produced)
      first = Clock::now();
    else
      afterFirst += count;
    produced += count;
    for (int64_t k = 0; k < count; ++k) {
      size_t p = promptOf.at(ids[k]);
      generated[p].push_back(tokens[k]);
      if (!logitsOut.empty())
        drawnFrom[p].insert(drawnFrom[p].end(), logits.begin() + k * vocab,
                            logits.begin() + (k + 1) * vocab);
      bool eos = std::find(eosIds.begin(), eosIds.end(), tokens[k]) != eosIds.end();
      if (eos && !last[k])
        dsrt_generator_cancel(gen, ids[k]);
      if (last[k] || eos) {
        promptOf.erase(ids[k]);
        ++finished;
      }
    }
  }
  if (timing) {
    auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
    double decode = seconds(Clock::now() - first);
    llvm::errs() << llvm::format("time to first token %.1f ms; decoding %.1f tokens/s (%lld "
                                 "tokens in %.3f s)\n",
                                 1e3 * seconds(first - start),
                                 decode > 0 ? afterFirst / decode : 0.0,
                                 static_cast<long long>(afterFirst), decode);
  }
  for (size_t b = 0; b < n; ++b) {
    if (tokenizer) {
      llvm::outs() << tokenizer->decode(generated[b], /*skipSpecial=*/true) << "\n";
      continue;
    }
    for (size_t k = 0; k < generated[b].size(); ++k)
      llvm::outs() << (k ? " " : "") << generated[b][k];
    llvm::outs() << "\n";
  }
  if (!logitsOut.empty()) { // [new tokens, prompts, vocabulary]
    io::Array a;
    a.dtype = DSRT_F32;
    a.dims = {maxNewTokens, static_cast<int64_t>(n), vocab};
    a.data.resize(maxNewTokens * n * vocab * sizeof(float));
    float *out = reinterpret_cast<float *>(a.data.data());
    for (int64_t s = 0; s < maxNewTokens; ++s)
      for (size_t b = 0; b < n; ++b)
        std::memcpy(out + (s * n + b) * vocab, drawnFrom[b].data() + s * vocab,
                    vocab * sizeof(float));
    if (!io::writeNpy(logitsOut, a, error))
      return fail(error);
  }
  return 0;
}

//===- ds-serve.cpp - an OpenAI-compatible server for ds-opt --inference's programs ---===//
//
// ds-serve GEN.mlir [--host H] [--port P] [--tokenizer tokenizer.json] [--model NAME]
//          [--max-queue N] [--eos-id ID]
//
// Serves /v1/completions, /v1/chat/completions (whole or streamed), /v1/models and /health.
// Requests join and leave the running batch at every step (continuous batching, the
// runtime's generator); those beyond the program's rows and cache wait in a queue of
// --max-queue sequences, and past it are refused with 503. The tokenizer (default:
// tokenizer.json beside GEN.mlir) reads text prompts and writes the completions; its
// tokenizer_config.json gives the chat template, and generation_config.json (or config.json)
// beside it the end-of-sequence ids. SIGTERM or SIGINT: no new requests, the admitted ones
// finish, then the process exits 0.
//
#include "Http.h"
#include "OpenAI.h"
#include "Scheduler.h"

#include "ds/Pipelines/StepJit.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <csignal>
#include <chrono>
#include <pthread.h>
#include <sys/socket.h>
#include <thread>

using namespace mlir;
namespace cl = llvm::cl;

static cl::opt<std::string> genPath(cl::Positional, cl::desc("GEN.mlir"), cl::Required);
static cl::opt<std::string> host("host", cl::desc("Address to listen on"),
                                 cl::init("127.0.0.1"));
static cl::opt<int> port("port", cl::desc("Port (0: any free one, printed)"), cl::init(8000));
static cl::opt<std::string> tokenizerPath(
    "tokenizer", cl::desc("The model's tokenizer.json (default: beside GEN.mlir)"));
static cl::opt<std::string> modelName("model", cl::desc("The model's name in the API "
                                                        "(default: GEN.mlir's stem)"));
static cl::opt<unsigned> maxQueue("max-queue", cl::desc("Sequences that may wait for a row "
                                                        "(more: 503)"),
                                  cl::init(64));
static cl::list<int64_t> eosIds("eos-id", cl::desc("An end-of-sequence token (default: "
                                                   "generation_config.json's)"));
static cl::opt<int> computeThreads("compute-threads", cl::desc("Compute threads (0: default)"),
                                  cl::init(0));

static int fail(const llvm::Twine &msg) {
  llvm::errs() << "ds-serve: " << msg << "\n";
  return 1;
}

/// eos_token_id (a number or a list) of generation_config.json, else config.json, in `dir`.
static std::vector<int64_t> endTokensIn(llvm::StringRef dir) {
  for (const char *name : {"generation_config.json", "config.json"}) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, name);
    auto buf = llvm::MemoryBuffer::getFile(path);
    if (!buf)
      continue;
    auto v = llvm::json::parse((*buf)->getBuffer());
    if (!v) {
      llvm::consumeError(v.takeError());
      continue;
    }
    const llvm::json::Object *o = v->getAsObject();
    const llvm::json::Value *e = o ? o->get("eos_token_id") : nullptr;
    if (!e)
      continue;
    std::vector<int64_t> ids;
    if (auto i = e->getAsInteger())
      ids.push_back(*i);
    else if (const llvm::json::Array *a = e->getAsArray())
      for (const llvm::json::Value &x : *a)
        if (auto i = x.getAsInteger())
          ids.push_back(*i);
    return ids;
  }
  return {};
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "ds-serve: an OpenAI-compatible server for "
                                          "ds-opt --inference's programs\n");
  // Signals go to the thread that waits for them, not to the workers.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::string error;
  // The tokenizer, its chat template and the end tokens.
  std::string tokPath = tokenizerPath;
  if (tokPath.empty()) {
    llvm::SmallString<256> beside(llvm::sys::path::parent_path(genPath));
    llvm::sys::path::append(beside, "tokenizer.json");
    if (llvm::sys::fs::exists(beside))
      tokPath = beside.str().str();
  }
  std::unique_ptr<dstok::Tokenizer> tokenizer;
  std::unique_ptr<dstok::ChatTemplate> chat;
  std::vector<int64_t> endTokens(eosIds.begin(), eosIds.end());
  if (!tokPath.empty()) {
    tokenizer = dstok::Tokenizer::load(tokPath, error);
    if (!tokenizer)
      return fail(error);
    llvm::SmallString<256> dir(llvm::sys::path::parent_path(tokPath));
    llvm::SmallString<256> config(dir);
    llvm::sys::path::append(config, "tokenizer_config.json");
    if (llvm::sys::fs::exists(config)) {
      chat = dstok::ChatTemplate::load(config.str().str(), error);
      if (!chat)
        llvm::errs() << "ds-serve: warning: " << error << "; /v1/chat/completions is off\n";
    }
    if (endTokens.empty())
      endTokens = endTokensIn(dir);
  } else {
    llvm::errs() << "ds-serve: warning: no tokenizer.json beside " << genPath
                 << " and no --tokenizer: prompts are token ids and completions their ids\n";
  }

  // The program and its generator.
  mlir::ds::GenerationJit jit;
  if (!jit.open(genPath, computeThreads, error))
    return fail(error);
  dsrt_generator *gen = jit.generator();
  if (tokenizer && tokenizer->vocabSize() > dsrt_generator_vocab(gen))
    return fail("the tokenizer has " + llvm::Twine(tokenizer->vocabSize()) + " tokens but the "
                "model's vocabulary " + llvm::Twine(dsrt_generator_vocab(gen)) +
                ": is it this model's tokenizer.json?");

  dsserve::Scheduler scheduler(gen, maxQueue);
  dsserve::Server server;
  server.scheduler = &scheduler;
  server.tokenizer = tokenizer.get();
  server.chat = chat.get();
  server.model = modelName.empty() ? llvm::sys::path::stem(genPath).str() : modelName.getValue();
  server.vocab = dsrt_generator_vocab(gen);
  server.maxSequenceTokens = dsrt_generator_max_sequence_tokens(gen);
  server.endTokens = endTokens;
  server.created = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();

  int listener = dsserve::listenOn(host, port, error);
  if (listener < 0)
    return fail(error);
  dsserve::HttpHandler handler = [&](const dsserve::HttpRequest &req,
                                     dsserve::HttpResponse &res) {
    dsserve::handle(server, req, res);
  };
  std::thread acceptor([&] { dsserve::serveConnections(listener, handler); });
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    llvm::errs() << "ds-serve: " << (sig == SIGTERM ? "SIGTERM" : "SIGINT")
                 << ": finishing the admitted requests\n";
    ::shutdown(listener, SHUT_RDWR);
    scheduler.stop();
  });
  llvm::outs() << "ds-serve: " << server.model << " on http://" << host << ":"
               << dsserve::boundPort(listener) << " (" << dsrt_generator_rows(gen)
               << " sequences at a time, " << server.maxSequenceTokens + 1
               << " tokens each at most)\n";
  llvm::outs().flush();
  scheduler.run(); // until a signal, and every admitted request is done
  acceptor.join();
  dsserve::waitForConnections();
  waiter.join();
  ::close(listener);
  llvm::errs() << "ds-serve: stopped\n";
  return 0;
}

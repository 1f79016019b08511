//===- ds-opt.cpp - the ds optimizer driver and PyTorch importer ----------===//
//
// `ds-opt in.mlir [passes]` behaves as mlir-opt. With a PyTorch model as input (a TorchScript
// archive or a torch.export program), `ds-opt MODEL.pt[2] --input NAME=TYPE ... -o OUT.mlir`
// imports it first, writes the weights to
// OUT.safetensors, and then runs the requested passes on the imported module.
//
#include "ds/Tools/CommandLine.h"
#include "ds/InitAll.h"
#include "ds/Config/DeepSpeedConfig.h"
#include "ds/Pipelines/Pipelines.h"
#ifdef DS_ENABLE_TORCH
#include "ds/Importer/TorchScript.h"
#endif

#include "mlir/IR/AsmState.h"
#include "mlir/Parser/Parser.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/SourceMgr.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory importCategory("PyTorch import options (for a .pt or .pt2 input)");
static cl::list<std::string> inputSpecs(
    "input", cl::desc("A forward argument and its per-rank micro-batch type, "
                      "e.g. --input idx=tensor<8x128xi64>; one per argument"),
    cl::value_desc("NAME=TYPE"), cl::cat(importCategory));
static cl::opt<int64_t> lossIndex(
    "loss-index", cl::desc("Element of forward's returned tuple that is the loss "
                           "(default: the last scalar)"),
    cl::init(-1), cl::cat(importCategory));
static cl::opt<bool> listTorchOps("list-torch-ops",
                                  cl::desc("Print the ATen ops the importer supports"),
                                  cl::cat(importCategory));

static cl::OptionCategory trainCategory("Training step options");
static cl::opt<std::string> configPath(
    "config", cl::desc("DeepSpeed JSON config: build the training step (forward, backward, "
                       "optimizer) of the imported model and embed the config in it"),
    cl::value_desc("ds_config.json"), cl::cat(trainCategory));
static cl::opt<bool> memoryReport(
    "memory-report",
    cl::desc("Print each rank's memory (parameters, gradients, optimizer state, activations, "
             "inputs, communication buffers, peak) from the compiler's buffer plan of a "
             "training step; with a .mlir input, print only the report"),
    cl::cat(trainCategory));
static cl::opt<std::string> deviceMemory(
    "device-memory",
    cl::desc("With --config: the device budget per rank (bytes, or with K/M/G/KiB/MiB/GiB). A "
             "plan over it is made to fit by activation checkpointing and offload (the first "
             "that fits of: recomputation, offload_optimizer cpu, both, offload_param too)"),
    cl::value_desc("BYTES"), cl::init(""));
static cl::opt<std::string> rates(
    "rates",
    cl::desc("With --memory-report of an offloaded step: the tiers' bandwidths and the compute "
             "rates, d2h=GB/s,h2d=GB/s,nvme_read=GB/s,nvme_write=GB/s,memory=GB/s,flops=GFLOP/s "
             "(ds-run --probe-bandwidth DIR prints them), to predict the stall"),
    cl::value_desc("KEY=VALUE,..."), cl::init(""));
static cl::opt<bool> commReport(
    "comm-report",
    cl::desc("Print the collectives each rank issues per training step, by mesh axis, with "
             "their bytes; with a .mlir input, print only the report"),
    cl::cat(trainCategory));
static cl::opt<bool> flopsReport(
    "flops-report",
    cl::desc("Print each rank's floating-point operations per training step (as PyTorch's "
             "FlopCounterMode counts them), the matrix products' among them, the bytes read "
             "and written, and the ops with the most; with a .mlir input, print only the "
             "report"),
    cl::cat(trainCategory));
static cl::opt<int64_t> worldSize(
    "world-size", cl::desc("Data-parallel size (default: from the config's batch keys, else 1)"),
    cl::init(0), cl::cat(trainCategory));

static bool isPyTorchModelInput(llvm::StringRef path) {
  llvm::StringRef ext = llvm::sys::path::extension(path);
  return ext == ".pt" || ext == ".pth" || ext == ".pt2";
}

/// A byte count: digits with an optional K, M, G (powers of 1000) or KiB, MiB, GiB suffix.
static bool parseByteCount(llvm::StringRef s, uint64_t &out) {
  s = s.trim();
  uint64_t scale = 1;
  for (auto [suffix, mult] : {std::pair<const char *, uint64_t>{"KiB", 1ull << 10},
                              {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {"K", 1000},
                              {"M", 1000000}, {"G", 1000000000}})
    if (s.consume_back(suffix)) {
      scale = mult;
      break;
    }
  uint64_t v = 0;
  if (s.getAsInteger(10, v) || v == 0)
    return false;
  out = v * scale;
  return true;
}

static int fail(const llvm::Twine &message) {
  llvm::errs() << "ds-opt: error: " << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  // LLVM's own options (codegen, targets), registered when libLLVM loads, stay out of --help
  // (--help-hidden lists them); MLIR's, registered below, and ds's are shown.
  mlir::ds::hideLLVMOptions({&importCategory, &trainCategory});
  DialectRegistry registry;
  mlir::ds::registerAllDialects(registry);
  mlir::ds::registerAllPasses();

  auto [inputFile, outputFile] =
      registerAndParseCLIOptions(argc, argv, "ds optimizer driver\n", registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();

#ifdef DS_ENABLE_TORCH
  if (listTorchOps) {
    for (const std::string &op : mlir::ds::supportedTorchOps())
      llvm::outs() << op << "\n";
    return 0;
  }
#else
  if (listTorchOps)
    return fail("this ds-opt was built without the TorchScript importer "
                "(LibTorch was not found; run scripts/setup.sh and rebuild)");
#endif

  std::unique_ptr<llvm::MemoryBuffer> buffer;
  if (isPyTorchModelInput(inputFile)) {
#ifdef DS_ENABLE_TORCH
    if (outputFile == "-")
      return fail("-o OUT.mlir is required for a PyTorch model input: the weights are written "
                  "beside it as OUT.safetensors");
    if (!llvm::sys::fs::exists(inputFile))
      return fail("cannot open '" + inputFile + "': no such file");
    MLIRContext context(registry);
    context.loadAllAvailableDialects();
    mlir::ds::TorchScriptImportOptions options;
    for (const std::string &spec : inputSpecs) {
      auto parsed = mlir::ds::parseInputSpec(spec, &context);
      if (failed(parsed))
        return 1;
      options.inputs.push_back(*parsed);
    }
    if (lossIndex >= 0)
      options.lossIndex = lossIndex;
    llvm::SmallString<256> weights(outputFile);
    llvm::sys::path::replace_extension(weights, ".safetensors");
    options.weightsPath = weights.str().str();
    OwningOpRef<ModuleOp> module = mlir::ds::importTorchScript(inputFile, options, &context);
    if (!module)
      return 1;
    if (!configPath.empty()) {
      auto cfg = ::ds::loadDeepSpeedConfig(configPath, worldSize);
      if (!cfg)
        return fail(llvm::toString(cfg.takeError()));
      for (const std::string &w : cfg->warnings)
        llvm::errs() << "ds-opt: warning: " << configPath << ": " << w << "\n";
      if (!deviceMemory.empty()) {
        uint64_t budget = 0;
        if (!parseByteCount(deviceMemory, budget))
          return fail("--device-memory takes a byte count such as 1073741824, 512M, 2GiB; got '" +
                      deviceMemory + "'");
        auto fitted = mlir::ds::fitDeviceMemory(*module, *cfg, budget, llvm::errs());
        if (failed(fitted))
          return 1;
        module = std::move(*fitted);
      } else if (failed(mlir::ds::buildTrainingStep(*module, *cfg))) {
        return 1;
      }
    } else if (worldSize != 0) {
      return fail("--world-size needs --config");
    }
    // Hand the imported module to the normal mlir-opt flow (passes, verification, printing);
    // debug info keeps the Python source locations through the round trip.
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os, OpPrintingFlags().enableDebugInfo());
    buffer = llvm::MemoryBuffer::getMemBufferCopy(text, inputFile);
    // A training step (STEP.mlir) keeps them too: ds-run --trace names the model's lines.
    if (!configPath.empty())
      if (auto *o = llvm::cl::getRegisteredOptions().lookup("mlir-print-debuginfo"))
        static_cast<llvm::cl::opt<bool> *>(o)->setValue(true);
#else
    return fail("'" + inputFile + "' is a PyTorch model but this ds-opt was built "
                "without the TorchScript importer (run scripts/setup.sh and rebuild)");
#endif
  } else {
    if (!inputSpecs.empty() || lossIndex >= 0)
      return fail("--input and --loss-index apply only to a PyTorch model input (.pt or .pt2)");
    if (!configPath.empty() || worldSize != 0)
      return fail("--config and --world-size apply to a PyTorch model input (.pt or .pt2); for an "
                  "imported .mlir run --ds-autodiff and --ds-optimizer instead");
    std::string message;
    buffer = openInputFile(inputFile, &message);
    if (!buffer)
      return fail(message);
  }

  if (memoryReport || commReport || flopsReport) {
    MLIRContext context(registry);
    context.loadAllAvailableDialects();
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(buffer->getBuffer(),
                                                                       buffer->getBufferIdentifier()),
                                 llvm::SMLoc());
    SourceMgrDiagnosticHandler handler(sourceMgr, &context);
    OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
    mlir::ds::TierRates tierRates;
    std::string ratesError;
    if (!rates.empty() && !tierRates.parse(rates, ratesError))
      return fail(ratesError);
    if (!module ||
        (memoryReport && failed(mlir::ds::printMemoryReport(
                             *module, llvm::outs(), rates.empty() ? nullptr : &tierRates))) ||
        (commReport && failed(mlir::ds::printCommReport(*module, llvm::outs()))) ||
        (flopsReport && failed(mlir::ds::printFlopsReport(*module, llvm::outs()))))
      return 1;
    if (!isPyTorchModelInput(inputFile))
      return 0;
  }

  std::string message;
  auto output = openOutputFile(outputFile, &message);
  if (!output)
    return fail(message);
  if (failed(MlirOptMain(output->os(), std::move(buffer), registry, config)))
    return 1;
  output->keep();
  return 0;
}

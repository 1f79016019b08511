//===- ds-opt.cpp - the ds optimizer driver and PyTorch importer ----------===//
//
// `ds-opt in.mlir [passes]` behaves as mlir-opt. With a PyTorch model as input (a TorchScript
// archive or a torch.export program), `ds-opt MODEL.pt[2] --input NAME=TYPE ... -o OUT.mlir`
// imports it first, writes the weights to OUT.safetensors, and then runs the requested passes
// on the imported module. `--config cfg.json` builds the training step (the pipeline
// ds-train-step) of either, before the requested passes.
//
#include "ds/Tools/CommandLine.h"
#include "ds/IR/DSDialect.h"
#include "ds/InitAll.h"
#include "ds/Config/DeepSpeedConfig.h"
#include "ds/Pipelines/Generation.h"
#include "ds/Pipelines/Pipelines.h"
#include "ds/Transforms/TensorParallelRemarks.h"
#ifdef DS_ENABLE_TORCH
#include "ds/Importer/TorchScript.h"
#endif

#include "mlir/IR/AsmState.h"
#include "mlir/Parser/Parser.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SourceMgr.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

#include <chrono>
#include <optional>
#include <variant>

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
                       "optimizer) of the model (a .pt/.pt2, or the .mlir ds-opt imported from "
                       "one) and embed the config in it, before any other pass"),
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
static cl::opt<std::string> clusterSpec(
    "cluster",
    cl::desc("The machines to price the step on: a cluster file (JSON: nodes, "
             "devices_per_node, memory, peak FLOP/s, links; docs/design/comm-model.md) or a "
             "preset NAME[:NODES]; --comm-report then adds each row's time by the "
             "communication model"),
    cl::value_desc("FILE|PRESET[:NODES]"), cl::init(""), cl::cat(trainCategory));
static cl::OptionCategory inferenceCategory("Generation options");
static cl::opt<bool> inference(
    "inference",
    cl::desc("Build generation's programs of a causal LM (a .pt2 or .pt whose forward takes "
             "input_ids, position_ids and optionally attention_mask and returns the logits): "
             "@prefill and @decode over a paged key/value cache, as --config (DeepSpeed "
             "init_inference's keys: dtype, tensor_parallel, max_tokens, max_batch; and "
             "page_size, prefill_chunk) sizes them"),
    cl::cat(inferenceCategory));

static cl::opt<bool> plan(
    "plan",
    cl::desc("Choose the layout for --cluster: compile every pp x dp x tp x sp of the job's "
             "ranks (--world-size, default the cluster's devices) with each ZeRO stage and "
             "micro-batch of --global-batch, print them ranked by predicted step time with "
             "their exact peaks, and write the best as a DeepSpeed config (--plan-out)"),
    cl::cat(trainCategory));
static cl::opt<std::string> planOut("plan-out",
                                    cl::desc("Where --plan writes the chosen config"),
                                    cl::value_desc("FILE"), cl::init("plan.json"),
                                    cl::cat(trainCategory));
static cl::opt<std::string> planJson(
    "plan-json",
    cl::desc("--plan: also write every layout considered (its prediction, or why it does not "
             "fit, and its DeepSpeed config) as JSON"),
    cl::value_desc("FILE"), cl::cat(trainCategory));
static cl::opt<std::string> planReport(
    "plan-report",
    cl::desc("Write the step's plan as one self-contained HTML page: each rank's memory over "
             "the step by category, the pipeline schedule, the communication per axis and, "
             "with --plan, the ranked layouts"),
    cl::value_desc("FILE.html"), cl::cat(trainCategory));
static cl::opt<std::string> planFix(
    "plan-fix",
    cl::desc("--plan: keep these axes (dp, tp, pp, sp, zero, micro, recompute, virtual: "
             "model chunks per pipeline rank; e.g. tp=2,zero=3,recompute=1); with tp, pp, sp, "
             "zero and micro all given, report "
             "whether that layout fits"),
    cl::value_desc("AXIS=N,..."), cl::cat(trainCategory));
static cl::opt<bool> planExact(
    "plan-exact",
    cl::desc("--plan: compile each pipelined layout at its own accumulation steps (slower), "
             "not at three past the warm-up continued along their line"),
    cl::cat(trainCategory));
static cl::opt<unsigned> planKeep(
    "plan-keep",
    cl::desc("--plan: compile the layouts in the order of a lower bound on their step time, "
             "skipping those whose model states alone exceed the device memory, until this "
             "many fitting ones (at least --plan-rows) are known to be the fastest; 0 compiles "
             "every layout"),
    cl::init(20), cl::cat(trainCategory));
static cl::opt<unsigned> planRows("plan-rows",
                                   cl::desc("--plan: how many ranked layouts to print"),
                                   cl::init(20), cl::cat(trainCategory));
static cl::opt<int64_t> globalBatch(
    "global-batch",
    cl::desc("--plan: samples per optimizer step (default: the config's train_batch_size)"),
    cl::init(0), cl::cat(trainCategory));
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

/// --device-memory as bytes into `out` (left as it is when the flag is not given); false,
/// with the error printed, when it is not a byte count.
static bool readDeviceMemory(uint64_t &out) {
  if (deviceMemory.empty() || parseByteCount(deviceMemory, out))
    return true;
  fail("--device-memory takes a byte count such as 1073741824, 512M, 2GiB; got '" +
       deviceMemory + "'");
  return false;
}

/// Writes --plan-report's page of `module`.
static LogicalResult writeReportFile(ModuleOp module, const mlir::ds::ClusterSpec *cluster,
                                     const std::string *candidates, int64_t deviceMemory,
                                     const std::string &title) {
  std::error_code ec;
  llvm::raw_fd_ostream out(planReport, ec);
  if (ec) {
    fail("cannot write --plan-report '" + planReport + "': " + ec.message());
    return failure();
  }
  if (failed(mlir::ds::writePlanReport(module, cluster, candidates, deviceMemory, title, out)))
    return failure();
  llvm::errs() << "ds-opt: wrote the plan's page '" << planReport << "'\n";
  return success();
}

/// Prints the reports the flags ask for of `module`.
static LogicalResult printReports(ModuleOp module, llvm::StringRef inputFile) {
  mlir::ds::TierRates tierRates;
  std::string ratesError;
  if (!rates.empty() && !tierRates.parse(rates, ratesError)) {
    fail(ratesError);
    return failure();
  }
  if (memoryReport && failed(mlir::ds::printMemoryReport(module, llvm::outs(),
                                                         rates.empty() ? nullptr : &tierRates)))
    return failure();
  std::optional<mlir::ds::ClusterSpec> cluster;
  if (!clusterSpec.empty()) {
    auto loaded = mlir::ds::loadCluster(clusterSpec);
    if (!loaded) {
      fail(llvm::toString(loaded.takeError()));
      return failure();
    }
    cluster = *loaded;
  }
  if (commReport && failed(mlir::ds::printCommReport(module, llvm::outs(),
                                                     cluster ? &*cluster : nullptr)))
    return failure();
  if (flopsReport && failed(mlir::ds::printFlopsReport(module, llvm::outs())))
    return failure();
  if (!planReport.empty()) {
    uint64_t budget = 0;
    if (!readDeviceMemory(budget))
      return failure();
    return writeReportFile(module, cluster ? &*cluster : nullptr, nullptr,
                           static_cast<int64_t>(budget), "ds memory plan: " + inputFile.str());
  }
  return success();
}

/// A PyTorch model imported into `context`, its weights written beside `outputFile`.
static OwningOpRef<ModuleOp> importModel(llvm::StringRef inputFile, llvm::StringRef outputFile,
                                         MLIRContext &context) {
#ifdef DS_ENABLE_TORCH
  if (outputFile == "-") {
    fail("-o OUT.mlir is required for a PyTorch model input: the weights are written beside it "
         "as OUT.safetensors");
    return nullptr;
  }
  if (!llvm::sys::fs::exists(inputFile)) {
    fail("cannot open '" + inputFile + "': no such file");
    return nullptr;
  }
  mlir::ds::TorchScriptImportOptions options;
  for (const std::string &spec : inputSpecs) {
    auto parsed = mlir::ds::parseInputSpec(spec, &context);
    if (failed(parsed))
      return nullptr;
    options.inputs.push_back(*parsed);
  }
  if (lossIndex >= 0)
    options.lossIndex = lossIndex;
  llvm::SmallString<256> weights(outputFile);
  llvm::sys::path::replace_extension(weights, ".safetensors");
  options.weightsPath = weights.str().str();
  OwningOpRef<ModuleOp> module = mlir::ds::importTorchScript(inputFile, options, &context);
  if (module && (*module)->hasAttr(mlir::ds::kWeightFreeAttrName))
    llvm::errs() << "ds-opt: '" << inputFile << "' holds shapes and no weights (exported on the "
                 << "meta device or under FakeTensorMode): wrote no " << weights
                 << "; the program compiles, plans and reports as any other, and ds-run "
                 << "trains it only with --weights FILE\n";
  return module;
#else
  fail("'" + inputFile + "' is a PyTorch model but this ds-opt was built without the "
       "TorchScript importer (run scripts/setup.sh and rebuild)");
  return nullptr;
#endif
}

/// Prints `module` to `outputFile`; the exit code.
static int writeModule(ModuleOp module, llvm::StringRef outputFile) {
  std::string message;
  auto output = openOutputFile(outputFile, &message);
  if (!output)
    return fail(message);
  module->print(output->os(), OpPrintingFlags());
  output->os() << "\n";
  output->keep();
  return 0;
}

/// The JSON object in --config's file, or the exit code of the failure to read it.
static std::variant<llvm::json::Object, int> readConfigObject() {
  auto buffer = llvm::MemoryBuffer::getFile(configPath);
  if (!buffer)
    return fail("cannot open --config '" + configPath + "'");
  auto parsed = llvm::json::parse((*buffer)->getBuffer());
  if (!parsed || !parsed->getAsObject())
    return fail("--config '" + configPath + "' is not a JSON object" +
                (parsed ? std::string() : ": " + llvm::toString(parsed.takeError())));
  return std::move(*parsed->getAsObject());
}

/// ds-opt MODEL --inference: the forward imported at a prompt chunk's tokens and at one
/// token, each made a generation program, in one module with the weights beside it.
static int runInference(llvm::StringRef inputFile, llvm::StringRef outputFile,
                        MLIRContext &context) {
#ifdef DS_ENABLE_TORCH
  if (configPath.empty())
    return fail("--inference needs --config F (DeepSpeed init_inference's keys: dtype, "
                "tensor_parallel, max_tokens, max_batch; and page_size, prefill_chunk)");
  if (!inputSpecs.empty() || lossIndex >= 0)
    return fail("--input and --loss-index do not apply to --inference: every input is i64 "
                "[max_batch, tokens] and the program returns the logits");
  if (outputFile == "-")
    return fail("-o GEN.mlir is required with --inference: the weights are written beside it "
                "as GEN.safetensors");
  auto object = readConfigObject();
  if (int *code = std::get_if<int>(&object))
    return *code;
  auto cfg = mlir::ds::parseGenerationConfig(std::get<llvm::json::Object>(object));
  if (!cfg)
    return fail(llvm::toString(cfg.takeError()));
  llvm::SmallString<256> weights(outputFile);
  llvm::sys::path::replace_extension(weights, ".safetensors");
  auto importAt = [&](int64_t tokens, bool writeWeights) {
    mlir::ds::TorchScriptImportOptions options;
    options.everyInput =
        RankedTensorType::get({cfg->maxBatch, tokens}, IntegerType::get(&context, 64));
    options.logits = true;
    if (writeWeights)
      options.weightsPath = weights.str().str();
    return mlir::ds::importTorchScript(inputFile, options, &context);
  };
  OwningOpRef<ModuleOp> prefill = importAt(cfg->prefillChunk, true);
  if (!prefill)
    return 1;
  OwningOpRef<ModuleOp> decode = importAt(1, false);
  if (!decode || failed(mlir::ds::buildGenerationModule(*prefill, *decode, *cfg)) ||
      failed(verify(*prefill)))
    return 1;
  return writeModule(*prefill, outputFile);
#else
  return fail("'" + inputFile + "' is a PyTorch model but this ds-opt was built without the "
              "TorchScript importer (run scripts/setup.sh and rebuild)");
#endif
}

/// ds-opt MODEL --plan: every layout compiled and ranked; the best written as a config.
static int runPlan(llvm::StringRef inputFile, MLIRContext &context) {
#ifdef DS_ENABLE_TORCH
  if (configPath.empty() || clusterSpec.empty())
    return fail("--plan needs --config (your DeepSpeed config: optimizer, precision and the "
                "rest; the planner sets the layout's keys) and --cluster (the machines)");
  auto cluster = mlir::ds::loadCluster(clusterSpec);
  if (!cluster)
    return fail(llvm::toString(cluster.takeError()));
  auto object = readConfigObject();
  if (int *code = std::get_if<int>(&object))
    return *code;
  const llvm::json::Object &base = std::get<llvm::json::Object>(object);
  mlir::ds::PlanRequest request;
  request.cluster = &*cluster;
  request.devices = worldSize ? worldSize : cluster->devices();
  if (request.devices > cluster->devices())
    return fail("--plan: " + llvm::Twine(request.devices) + " ranks but " + cluster->name +
                " has " + llvm::Twine(cluster->devices()) + " devices");
  request.globalBatch = globalBatch ? int64_t(globalBatch)
                                    : base.getInteger("train_batch_size").value_or(0);
  if (request.globalBatch <= 0)
    return fail("--plan needs the global batch: --global-batch B, or train_batch_size in the "
                "config");
  uint64_t budget = static_cast<uint64_t>(cluster->deviceMemoryBytes);
  if (!readDeviceMemory(budget))
    return 1;
  request.deviceMemory = static_cast<int64_t>(budget);
  request.exact = planExact;
  request.keep = planKeep ? std::max<int64_t>(planKeep, planRows) : 0;
  // A long search says how far it is, at most every 30 s.
  auto started = std::chrono::steady_clock::now();
  auto said = started;
  request.progress = [&](int64_t judged, int64_t total, int64_t fitting,
                         llvm::StringRef next) {
    auto now = std::chrono::steady_clock::now();
    if (now - said < std::chrono::seconds(30))
      return;
    said = now;
    llvm::errs() << "ds-opt: --plan: " << judged << " of " << total << " layouts judged, "
                 << fitting << " fit ("
                 << std::chrono::duration_cast<std::chrono::seconds>(now - started).count()
                 << " s); next " << next << "\n";
  };
  std::vector<mlir::ds::InputSpec> specs;
  for (const std::string &spec : inputSpecs) {
    auto one = mlir::ds::parseInputSpec(spec, &context);
    if (failed(one))
      return 1;
    specs.push_back(*one);
  }
  // The model at each micro-batch: every input's leading dimension is the micro-batch.
  auto importAt = [&](int64_t micro) -> OwningOpRef<ModuleOp> {
    mlir::ds::TorchScriptImportOptions options;
    for (const mlir::ds::InputSpec &s : specs) {
      SmallVector<int64_t> shape(s.type.getShape());
      if (!shape.empty())
        shape[0] = micro;
      options.inputs.push_back({s.name, RankedTensorType::get(shape, s.type.getElementType())});
    }
    if (lossIndex >= 0)
      options.lossIndex = lossIndex;
    return mlir::ds::importTorchScript(inputFile, options, &context);
  };
  if (!planFix.empty()) {
    auto fixed = mlir::ds::parsePlanFixed(planFix, request.devices);
    if (!fixed)
      return fail(llvm::toString(fixed.takeError()));
    request.fixed = *fixed;
  }
  std::string candidates; // the ranked layouts, for --plan-report
  auto writeChosen = [&](const mlir::ds::PlanCandidate &best) {
    std::error_code ec;
    llvm::raw_fd_ostream out(planOut, ec);
    if (ec)
      return fail("cannot write --plan-out '" + planOut + "': " + ec.message());
    out << llvm::formatv("{0:2}", *llvm::json::parse(best.config)) << "\n";
    llvm::outs() << "chose dp=" << best.dp << " tp=" << best.tp << " pp=" << best.pp
                 << " sp=" << best.sp << ", ZeRO " << best.zeroStage << ", micro-batch "
                 << best.microBatch << " x " << best.gas << ": wrote " << planOut
                 << "; compile it with: ds-opt " << inputFile << " --config " << planOut
                 << " --world-size " << best.dp;
    for (const mlir::ds::InputSpec &s : specs) {
      SmallVector<int64_t> shape(s.type.getShape());
      if (!shape.empty())
        shape[0] = best.microBatch;
      llvm::outs() << " --input '" << s.name << "="
                   << RankedTensorType::get(shape, s.type.getElementType()) << "'";
    }
    llvm::outs() << " -o STEP.mlir\n";
    if (planReport.empty())
      return 0;
    // The page of the chosen layout's step, compiled again from the config just written.
    auto step = mlir::ds::compileLayout(best, importAt, &context);
    if (failed(step))
      return 1;
    return failed(writeReportFile(**step, &*cluster, candidates.empty() ? nullptr : &candidates,
                                  request.deviceMemory, "ds plan: " + inputFile.str() + " on " +
                                                            cluster->name))
               ? 1
               : 0;
  };
  if (request.fixed.all()) { // will it fit
    mlir::ds::PlanCandidate given;
    auto fits = mlir::ds::printFitReport(base, request, importAt, &context, given, llvm::outs());
    if (failed(fits))
      return 1;
    if (!*fits)
      return fail("--plan-fix " + planFix + ": does not fit " +
                  llvm::Twine(request.deviceMemory) + " bytes a device (" + given.why +
                  " on its fullest rank); 'what would fit' above lists the nearest layouts "
                  "that do");
    return writeChosen(given);
  }
  auto ranked = mlir::ds::searchLayouts(base, request, importAt, &context);
  if (failed(ranked))
    return 1;
  candidates = mlir::ds::planToJSON(*ranked, request);
  mlir::ds::printPlanTable(*ranked, request, planRows, llvm::outs());
  if (!planJson.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream out(planJson, ec);
    if (ec)
      return fail("cannot write --plan-json '" + planJson + "': " + ec.message());
    out << candidates;
  }
  if (ranked->empty())
    return fail("--plan-fix " + planFix + ": no layout of " + llvm::Twine(request.devices) +
                " ranks has these axes (the micro-batch must divide the global batch over dp, "
                "dp x tp x pp x sp the ranks); free one of them");
  if (!ranked->front().fits()) {
    int64_t least = 0;
    for (const mlir::ds::PlanCandidate &c : *ranked)
      if (c.peakBytes && (!least || c.peakBytes < least))
        least = c.peakBytes;
    return fail("--plan: no layout of " + llvm::Twine(request.devices) + " ranks" +
                (planFix.empty() ? "" : " with --plan-fix " + planFix) + " fits " +
                llvm::Twine(request.deviceMemory) + " bytes a device (the least a compiled "
                "one needs is " + llvm::Twine(least) + "): give more devices, a smaller "
                "--global-batch, or offload in the config");
  }
  return writeChosen(ranked->front());
#else
  (void)inputFile;
  (void)context;
  return fail("--plan imports the model at each micro-batch: this ds-opt was built without "
              "the TorchScript importer (run scripts/setup.sh and rebuild)");
#endif
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  // LLVM's own options (codegen, targets), registered when libLLVM loads, stay out of --help
  // (--help-hidden lists them); MLIR's, registered below, and ds's are shown.
  mlir::ds::hideLLVMOptions({&importCategory, &trainCategory, &inferenceCategory});
  DialectRegistry registry;
  mlir::ds::registerAllDialects(registry);
  mlir::ds::registerAllPasses();
  mlir::ds::registerPipelines();

  static const std::string clusterHelp = clusterSpec.HelpStr.str() + " (presets: " +
                                         llvm::join(mlir::ds::clusterPresets(), ", ") + ")";
  clusterSpec.setDescription(clusterHelp);
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
  const bool model = isPyTorchModelInput(inputFile);
  if (!model && (!inputSpecs.empty() || lossIndex >= 0))
    return fail("--input and --loss-index apply only to a PyTorch model input (.pt or .pt2)");

  if (plan) {
    if (!model)
      return fail("--plan takes the model (.pt or .pt2): it imports it at each micro-batch");
    MLIRContext planContext(registry);
    planContext.loadAllAvailableDialects();
    return runPlan(inputFile, planContext);
  }

  if (inference) {
    if (!model)
      return fail("--inference takes the model (.pt or .pt2): it imports its forward at the "
                  "prompt chunk's tokens and at one token");
    MLIRContext inferenceContext(registry);
    inferenceContext.loadAllAvailableDialects();
    return runInference(inputFile, outputFile, inferenceContext);
  }

  // The DeepSpeed config: the training step to build (the pipeline ds-train-step).
  std::optional<::ds::DeepSpeedConfig> step;
  if (!configPath.empty()) {
    auto cfg = ::ds::loadDeepSpeedConfig(configPath, worldSize);
    if (!cfg)
      return fail(llvm::toString(cfg.takeError()));
    for (const std::string &w : cfg->warnings)
      llvm::errs() << "ds-opt: warning: " << configPath << ": " << w << "\n";
    step = std::move(*cfg);
    // A training step (STEP.mlir) keeps the model's source locations: ds-run --trace names its
    // lines.
    if (auto *o = llvm::cl::getRegisteredOptions().lookup("mlir-print-debuginfo"))
      static_cast<llvm::cl::opt<bool> *>(o)->setValue(true);
  } else if (worldSize != 0) {
    return fail("--world-size needs --config");
  }
  uint64_t budget = 0;
  if (!readDeviceMemory(budget))
    return 1;
  if (budget && !step)
    return fail("--device-memory needs --config (the budget of the training step it builds)");
  const bool reports = memoryReport || commReport || flopsReport || !planReport.empty();
  if (!clusterSpec.empty() && !commReport && planReport.empty())
    return fail("--cluster prices a step on the machines: give --comm-report, --plan-report "
                "or --plan with it");

  // An MLIR input is mlir-opt's, unless it is to become a training step or be reported on.
  if (!model && !reports && !budget && !step) {
    std::string message;
    std::unique_ptr<llvm::MemoryBuffer> buffer = openInputFile(inputFile, &message);
    if (!buffer)
      return fail(message);
    auto output = openOutputFile(outputFile, &message);
    if (!output)
      return fail(message);
    if (failed(MlirOptMain(output->os(), std::move(buffer), registry, config)))
      return 1;
    output->keep();
    return 0;
  }

  // A PyTorch model (or an MLIR input to build a step from or report on): the module, its
  // training step and the summary of it, the reports, then the command line's passes.
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // The importer's errors print their Python locations as they always have (MLIR's default
  // handler); from here on, as MlirOptMain prints them (with the source line).
  OwningOpRef<ModuleOp> module;
  if (model)
    module = importModel(inputFile, outputFile, context);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  if (!model)
    module = parseSourceFile<ModuleOp>(inputFile, sourceMgr, &context);
  if (!module)
    return 1;
  // ds-tensor-parallel's reasons for the parameters it keeps whole go to the summary.
  llvm::StringMap<std::string> wholeWhy;
  ScopedDiagnosticHandler remarks(&context, [&](Diagnostic &d) {
    std::string name, why;
    if (d.getSeverity() != DiagnosticSeverity::Remark ||
        !mlir::ds::readStaysWholeRemark(d.str(), name, why))
      return failure();
    wholeWhy[name] = why;
    return success();
  });
  if (step && budget) {
    auto fitted = mlir::ds::fitDeviceMemory(*module, *step, budget, llvm::errs());
    if (failed(fitted))
      return 1;
    module = std::move(*fitted);
  } else if (step && failed(mlir::ds::buildTrainingStep(*module, *step))) {
    return 1;
  }
  if (step)
    mlir::ds::printStepSummary(*module, *step, wholeWhy, llvm::errs());
  if (reports) {
    if (failed(printReports(*module, inputFile)))
      return 1;
    if (!model)
      return 0; // an MLIR input: the reports alone
  }
  PassManager pm(&context);
  if (failed(applyPassManagerCLOptions(pm)) || failed(config.setupPassPipeline(pm)))
    return 1;
  pm.enableVerifier(config.shouldVerifyPasses());
  if (failed(pm.run(*module)) || failed(verify(*module)))
    return 1;
  return writeModule(*module, outputFile);
}

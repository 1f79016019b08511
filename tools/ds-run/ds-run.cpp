//===- ds-run.cpp - JIT-compile a training step and train with it ----------===//
//
// ds-run STEP.mlir --data NAME=FILE.npy ... --steps N [--log LOG.jsonl] [driver flags]
//
// Lowers STEP.mlir (the output of ds-opt --config) to the runtime's C API, JIT-compiles it with
// MLIR's ExecutionEngine and hands the entry points to the runtime's training driver, the same
// driver that compiled executables run.
//
//===----------------------------------------------------------------------===//
#include "dsrt/dsrt.h"

#include "ds/Pipelines/StepJit.h"


#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

using namespace mlir;

static int fail(const llvm::Twine &msg) {
  llvm::errs() << "ds-run: error: " << msg << "\n";
  return 1;
}

int main(int argc, char **argv) {
  dsrt_ensure_passive_wait(argv);

  // --probe-bandwidth DIR: the offload tiers' rates for ds-opt --memory-report --rates.
  for (int i = 1; i < argc; ++i)
    if (llvm::StringRef(argv[i]) == "--probe-bandwidth") {
      if (i + 1 >= argc)
        return fail("--probe-bandwidth needs a directory (the NVMe tier's, DeepSpeed's "
                    "nvme_path)");
      int threads = 0;
      for (int j = 1; j + 1 < argc; ++j)
        if (llvm::StringRef(argv[j]) == "--threads")
          threads = std::atoi(argv[j + 1]);
      return dsrt_probe_bandwidth(argv[i + 1], threads);
    }

  // The step file is the one positional argument; every flag goes to the driver.
  std::string stepPath;
  bool hasWeights = false, wantsHelp = false;
  std::vector<char *> driverArgs = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef a = argv[i];
    if (a == "--help" || a == "-h")
      wantsHelp = true;
    if (a == "--weights" || a.starts_with("--weights="))
      hasWeights = true;
    if (!a.starts_with("-") && a.ends_with(".mlir") && stepPath.empty() &&
        !(i > 1 && llvm::StringRef(argv[i - 1]).starts_with("--") &&
          !llvm::StringRef(argv[i - 1]).contains('='))) {
      stepPath = a.str();
      continue;
    }
    driverArgs.push_back(argv[i]);
  }
  if (wantsHelp && stepPath.empty()) {
    llvm::outs() << "usage: ds-run STEP.mlir --data NAME=FILE.npy ... --steps N "
                    "[--log LOG.jsonl] [--weights FILE] [--config FILE] [--device-memory BYTES] "
                    "[--threads N] [--save-weights FILE] [--dump-grads FILE]\n"
                    "  STEP.mlir comes from: ds-opt MODEL.pt --input ... --config ds_config.json "
                    "-o STEP.mlir\n"
                    "       ds-run --probe-bandwidth DIR [--threads N]: measures the offload "
                    "tiers and prints ds-opt's --rates\n";
    return 0;
  }
  if (stepPath.empty())
    return fail("no STEP.mlir given (make one with: ds-opt MODEL.pt --input NAME=TYPE ... "
                "--config ds_config.json -o STEP.mlir)");
  if (!llvm::sys::fs::exists(stepPath))
    return fail("'" + stepPath + "' does not exist");

  // Initial weights: STEP.safetensors beside STEP.mlir unless --weights is given.
  std::string weights;
  if (!hasWeights) {
    llvm::SmallString<256> w(stepPath);
    llvm::sys::path::replace_extension(w, ".safetensors");
    weights = std::string(w);
    driverArgs.push_back(const_cast<char *>("--weights"));
    driverArgs.push_back(weights.data());
  }

  DialectRegistry registry;
  mlir::ds::registerStepDialects(registry);
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  std::string error;
  OwningOpRef<ModuleOp> module = mlir::ds::loadLoweredStep(stepPath, context, sourceMgr, error);
  if (!module)
    return fail(error);
  if (std::string why = mlir::ds::weightFreeReason(*module, stepPath); !why.empty() && !hasWeights)
    return fail(why);
  // The same target as ds-compile's executables, so both compute the same numbers.
  dsrt_program program;
  auto engine = mlir::ds::jitStep(*module, "", program, error);
  if (!engine)
    return fail(error);
  driverArgs.push_back(nullptr);
  return dsrt_driver_main((int)driverArgs.size() - 1, driverArgs.data(), &program);
}

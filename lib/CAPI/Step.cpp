//===- Step.cpp - a model to a compiled training step (ds-c/Step.h) -----------===//
#include "ds-c/Step.h"

#include "ds/Config/DeepSpeedConfig.h"
#include "ds/Pipelines/Pipelines.h"
#include "ds/Pipelines/StepJit.h"
#include "ds/Transforms/TensorParallelRemarks.h"
#ifdef DS_ENABLE_TORCH
#include "ds/Importer/TorchScript.h"
#endif

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <memory>
#include <string>

using namespace mlir;

struct DsStep {
  std::unique_ptr<MLIRContext> context;
  std::unique_ptr<ExecutionEngine> engine;
  dsrt_program program{};
  std::string summary;
};

namespace {
DsStep *failed(const std::string &message, char *err, size_t cap) {
  if (err && cap)
    std::snprintf(err, cap, "%s", message.c_str());
  return nullptr;
}
} // namespace

DsStep *dsStepCompile(const char *modelPath, intptr_t numInputs, const char *const *inputs,
                      int64_t lossIndex, const char *configPath, int64_t ranks,
                      const char *weightsPath, const char *runtimeLibrary, char *err,
                      size_t cap) {
#ifndef DS_ENABLE_TORCH
  (void)modelPath, (void)numInputs, (void)inputs, (void)lossIndex, (void)configPath,
      (void)ranks, (void)weightsPath, (void)runtimeLibrary;
  return failed("this ds was built without the PyTorch importer (LibTorch was not found; run "
                "scripts/setup.sh and rebuild)",
                err, cap);
#else
  if (!llvm::sys::fs::exists(modelPath))
    return failed(std::string("cannot open '") + modelPath + "': no such file", err, cap);
  auto cfg = ::ds::loadDeepSpeedConfig(configPath, /*worldSize=*/0, ranks);
  if (!cfg)
    return failed(llvm::toString(cfg.takeError()), err, cap);

  auto step = std::make_unique<DsStep>();
  DialectRegistry registry;
  mlir::ds::registerStepDialects(registry);
  step->context = std::make_unique<MLIRContext>(registry);
  MLIRContext &context = *step->context;
  context.loadAllAvailableDialects();
  llvm::raw_string_ostream summary(step->summary);
  for (const std::string &w : cfg->warnings)
    summary << "warning: " << configPath << ": " << w << "\n";
  // Errors as one line each; ds-tensor-parallel's reasons for the parameters it keeps whole go
  // to the summary.
  std::string errors;
  llvm::StringMap<std::string> wholeWhy;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    std::string name, why;
    if (d.getSeverity() == DiagnosticSeverity::Remark &&
        mlir::ds::readStaysWholeRemark(d.str(), name, why)) {
      wholeWhy[name] = why;
      return success();
    }
    if (d.getSeverity() != DiagnosticSeverity::Error)
      return success();
    llvm::raw_string_ostream os(errors);
    if (auto loc = dyn_cast<FileLineColLoc>(d.getLocation()))
      os << loc.getFilename() << ":" << loc.getLine() << ": ";
    os << d.str() << "\n";
    for (Diagnostic &note : d.getNotes())
      os << "  note: " << note.str() << "\n";
    return success();
  });
  auto fail = [&](const std::string &what) {
    return failed(errors.empty() ? what : what + ":\n" + errors, err, cap);
  };

  mlir::ds::TorchScriptImportOptions options;
  for (intptr_t i = 0; i < numInputs; ++i) {
    auto spec = mlir::ds::parseInputSpec(inputs[i], &context);
    if (failed(spec))
      return fail("bad input type '" + std::string(inputs[i]) + "'");
    options.inputs.push_back(*spec);
  }
  if (lossIndex >= 0)
    options.lossIndex = lossIndex;
  options.weightsPath = weightsPath;
  OwningOpRef<ModuleOp> module = mlir::ds::importTorchScript(modelPath, options, &context);
  if (!module)
    return fail(std::string("cannot import '") + modelPath + "'");
  if (failed(mlir::ds::buildTrainingStep(*module, *cfg)))
    return fail("cannot build the training step");
  mlir::ds::printStepSummary(*module, *cfg, wholeWhy, summary);
  if (failed(mlir::ds::lowerStepToLLVM(*module)))
    return fail("cannot lower the training step to the runtime");

  std::string jitError;
  step->engine = mlir::ds::jitStep(*module, runtimeLibrary ? runtimeLibrary : "",
                                   step->program, jitError);
  if (!step->engine)
    return fail(jitError);
  return step.release();
#endif
}

const dsrt_program *dsStepProgram(DsStep *step) { return &step->program; }

const char *dsStepSummary(DsStep *step) { return step->summary.c_str(); }

void dsStepDestroy(DsStep *step) { delete step; }

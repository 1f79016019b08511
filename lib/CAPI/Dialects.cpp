//===- Dialects.cpp - the C API of ds (ds-c/Dialects.h) ----------------------===//
#include "ds-c/Dialects.h"

#include "ds/IR/DSDialect.h"
#include "ds/InitAll.h"
#include "ds/Pipelines/Pipelines.h"
#ifdef DS_ENABLE_TORCH
#include "ds/Importer/TorchScript.h"
#endif

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/CAPI/Support.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/FileSystem.h"

#include <mutex>

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(DS, ds, mlir::ds::DSDialect)

void dsRegisterDialects(MlirDialectRegistry registry) {
  mlir::ds::registerAllDialects(*unwrap(registry));
}

void dsRegisterAllPasses(void) {
  static std::once_flag once;
  std::call_once(once, [] {
    mlir::ds::registerAllPasses();
    mlir::ds::registerPipelines();
  });
}

bool dsHasTorchScriptImporter(void) {
#ifdef DS_ENABLE_TORCH
  return true;
#else
  return false;
#endif
}

MlirModule dsImportTorchScript(MlirContext ctx, MlirStringRef path, intptr_t numInputs,
                               const MlirStringRef *inputs, MlirStringRef weightsPath) {
  mlir::MLIRContext *context = unwrap(ctx);
  if (!llvm::sys::fs::exists(unwrap(path))) {
    mlir::emitError(mlir::UnknownLoc::get(context))
        << "cannot open '" << unwrap(path) << "': no such file";
    return MlirModule{nullptr};
  }
#ifdef DS_ENABLE_TORCH
  mlir::ds::TorchScriptImportOptions options;
  for (intptr_t i = 0; i < numInputs; ++i) {
    auto spec = mlir::ds::parseInputSpec(unwrap(inputs[i]), context);
    if (mlir::failed(spec))
      return MlirModule{nullptr};
    options.inputs.push_back(*spec);
  }
  options.weightsPath = unwrap(weightsPath).str();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::ds::importTorchScript(unwrap(path), options, context);
  return module ? wrap(module.release()) : MlirModule{nullptr};
#else
  (void)numInputs;
  (void)inputs;
  (void)weightsPath;
  mlir::emitError(mlir::UnknownLoc::get(context))
      << "cannot import '" << unwrap(path)
      << "': this libdsCAPI was built without the TorchScript importer (LibTorch was not "
         "found; run scripts/setup.sh and rebuild)";
  return MlirModule{nullptr};
#endif
}

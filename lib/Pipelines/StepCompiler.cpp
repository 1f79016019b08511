//===- StepCompiler.cpp - STEP.mlir to native code, shared by JIT and AOT ----===//
#include "ds/Pipelines/StepCompiler.h"

#include "ds/InitAll.h"
#include "ds/Pipelines/Pipelines.h"

#include "mlir/Parser/Parser.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Support/TargetSelect.h"

using namespace mlir;

void mlir::ds::registerStepDialects(DialectRegistry &registry) {
  registerAllDialects(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
}

OwningOpRef<ModuleOp> mlir::ds::loadLoweredStep(llvm::StringRef path, MLIRContext &context,
                                                llvm::SourceMgr &sourceMgr, std::string &error) {
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(path, sourceMgr, &context);
  if (!module) {
    error = ("cannot parse '" + path + "'").str();
    return nullptr;
  }
  if (failed(lowerStepToLLVM(*module))) {
    error = ("cannot lower '" + path + "' to the runtime (see the errors above)").str();
    return nullptr;
  }
  return module;
}

llvm::Expected<std::unique_ptr<llvm::TargetMachine>>
mlir::ds::createStepTargetMachine(bool forObject) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb)
    return jtmb.takeError();
  jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::None);
  if (forObject) {
    jtmb->setRelocationModel(llvm::Reloc::PIC_);
    jtmb->setCodeModel(llvm::CodeModel::Small);
  }
  return jtmb->createTargetMachine();
}

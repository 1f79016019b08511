//===- StepCompiler.cpp - STEP.mlir to native code, shared by JIT and AOT ----===//
#include "ds/Pipelines/StepCompiler.h"

#include "ds/IR/DSDialect.h"
#include "ds/InitAll.h"
#include "ds/Pipelines/Pipelines.h"

#include "mlir/Parser/Parser.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"

using namespace mlir;

void mlir::ds::registerStepDialects(DialectRegistry &registry) {
  registerAllDialects(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
}

std::string mlir::ds::weightFreeReason(ModuleOp module, llvm::StringRef stepPath) {
  if (!module->hasAttr(kWeightFreeAttrName))
    return "";
  return ("'" + stepPath + "' was imported from an export that holds shapes and no weights "
          "(a model on the meta device or under FakeTensorMode), so it has no weights file: "
          "give --weights FILE.safetensors with the model's weights, or export the model "
          "with its weights to train it")
      .str();
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
mlir::ds::createStepTargetMachine(bool forObject, llvm::StringRef cpu) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb)
    return jtmb.takeError();
  if (!cpu.empty()) { // the named CPU's own features, none of the host's
    std::string err;
    const llvm::Triple &triple = jtmb->getTargetTriple();
    const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, err);
    if (!target)
      return llvm::createStringError(err);
    std::unique_ptr<llvm::MCSubtargetInfo> generic(
        target->createMCSubtargetInfo(triple, "", ""));
    if (!generic || !generic->isCPUStringValid(cpu))
      return llvm::createStringError(
          "unknown CPU '" + cpu.str() + "' for " + triple.getArchName().str() +
          " (for example x86-64-v2, x86-64-v3, x86-64-v4, skylake-avx512, sapphirerapids, "
          "znver4)");
    jtmb->setCPU(cpu.str());
    jtmb->getFeatures() = llvm::SubtargetFeatures();
  }
  jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::None);
  if (forObject) {
    jtmb->setRelocationModel(llvm::Reloc::PIC_);
    jtmb->setCodeModel(llvm::CodeModel::Small);
  }
  return jtmb->createTargetMachine();
}

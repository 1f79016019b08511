//===- ds-compile.cpp - a standalone training executable from STEP.mlir ----===//
//
// ds-compile STEP.mlir -o train
//
// Lowers the step exactly as ds-run does, emits it as a native object (the host's CPU features,
// codegen at O0 like the JIT, so both run the same calls in the same order and give the same
// numbers bit for bit) and links it with the runtime's driver into an executable that takes
// ds-run's flags and needs neither STEP.mlir nor LLVM/MLIR at run time. Its --weights defaults
// to STEP.safetensors as found at compile time.
//
//===----------------------------------------------------------------------===//

#include "ds/Tools/CommandLine.h"
#include "ds/Pipelines/StepCompiler.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory compileCategory("ds-compile options");
static cl::opt<std::string> stepPath(cl::Positional, cl::desc("STEP.mlir"), cl::Required,
                                     cl::cat(compileCategory));
static cl::opt<std::string> outputPath("o", cl::desc("the executable to write"),
                                       cl::value_desc("train"), cl::Required,
                                       cl::cat(compileCategory));
static cl::opt<std::string> weightsPath(
    "weights", cl::desc("default --weights of the executable (default: STEP.safetensors)"),
    cl::value_desc("FILE"), cl::cat(compileCategory));
static cl::opt<bool> keepObject("keep-object", cl::desc("also keep OUT.o"),
                                cl::cat(compileCategory));
static cl::opt<std::string> cpuName(
    "cpu",
    cl::desc("compile for this CPU instead of this machine's (e.g. x86-64-v3), so that the "
             "executable or object runs on other machines"),
    cl::value_desc("NAME"), cl::cat(compileCategory));
enum class Emit { Executable, Object };
static cl::opt<Emit> emit(
    "emit", cl::desc("what to write"), cl::init(Emit::Executable),
    cl::values(clEnumValN(Emit::Executable, "exe", "a training executable (default)"),
               clEnumValN(Emit::Object, "obj",
                          "the step's object alone, to link with a runtime built elsewhere: "
                          "cc OUT -ldsrt_main -ldsrt -lstdc++")),
    cl::cat(compileCategory));

static int fail(const llvm::Twine &msg) {
  llvm::errs() << "ds-compile: error: " << msg << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // LLVM's own options stay out of --help (--help-hidden lists them).
  mlir::ds::hideLLVMOptions({&compileCategory});
  cl::ParseCommandLineOptions(argc, argv,
                              "ds-compile: a standalone training executable from a step\n");
  if (!llvm::sys::fs::exists(stepPath))
    return fail("'" + stepPath + "' does not exist");

  DialectRegistry registry;
  mlir::ds::registerStepDialects(registry);
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  std::string error;
  OwningOpRef<ModuleOp> module = mlir::ds::loadLoweredStep(stepPath, context, sourceMgr, error);
  if (!module)
    return fail(error);
  if (std::string why = mlir::ds::weightFreeReason(*module, stepPath); !why.empty() &&
      weightsPath.empty())
    llvm::errs() << "ds-compile: warning: " << why << " (the executable takes --weights too)\n";

  // The default initial weights, as an absolute path.
  llvm::SmallString<256> weights(weightsPath.empty() ? stepPath : weightsPath);
  if (weightsPath.empty())
    llvm::sys::path::replace_extension(weights, ".safetensors");
  llvm::sys::fs::make_absolute(weights);
  {
    OpBuilder b = OpBuilder::atBlockEnd(module->getBody());
    std::string text = std::string(weights) + '\0';
    LLVM::GlobalOp::create(b, module->getLoc(),
                           LLVM::LLVMArrayType::get(IntegerType::get(&context, 8), text.size()),
                           /*isConstant=*/true, LLVM::Linkage::External, "ds_default_weights",
                           b.getStringAttr(text));
  }

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule = translateModuleToLLVMIR(*module, llvmContext);
  if (!llvmModule)
    return fail("translation to LLVM IR failed");

  // ds-run's target (host CPU features, or --cpu's; O0), as an object for a PIE.
  auto tm = mlir::ds::createStepTargetMachine(/*forObject=*/true, cpuName);
  if (!tm)
    return fail((cpuName.empty() ? "cannot create the target machine: " : "--cpu: ") +
                llvm::toString(tm.takeError()));
  llvmModule->setDataLayout((*tm)->createDataLayout());
  llvmModule->setTargetTriple((*tm)->getTargetTriple());

  std::string objectPath = emit == Emit::Object ? outputPath + "" : outputPath + ".o";
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(objectPath, ec, llvm::sys::fs::OF_None);
    if (ec)
      return fail("cannot write '" + objectPath + "': " + ec.message());
    llvm::legacy::PassManager pm;
    if ((*tm)->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile))
      return fail("the target cannot emit an object file");
    pm.run(*llvmModule);
  }

  if (emit == Emit::Object)
    return 0;

  // Link with the runtime (its driver and main): the installed one beside this ds-compile
  // (PREFIX/bin/../lib), else the one of the build it comes from.
  auto cc = llvm::sys::findProgramByName("cc");
  if (!cc)
    return fail("no C compiler driver 'cc' on PATH to link with (install gcc or clang)");
  std::string libDir = DS_RUNTIME_LIB_DIR;
  std::string self = llvm::sys::fs::getMainExecutable(argv[0], (void *)&fail);
  llvm::SmallString<256> installed(llvm::sys::path::parent_path(llvm::sys::path::parent_path(self)));
  llvm::sys::path::append(installed, "lib");
  llvm::SmallString<256> probe(installed);
  llvm::sys::path::append(probe, "libdsrt_main.a");
  if (llvm::sys::fs::exists(probe))
    libDir = installed.str().str();
  std::string libFlag = "-L" + libDir, rpath = "-Wl,-rpath," + libDir;
  llvm::SmallVector<llvm::StringRef> args = {*cc,    "-o",          outputPath, objectPath, libFlag,
                                             rpath, "-ldsrt_main", "-ldsrt",   "-lstdc++"};
  std::string errMsg;
  int rc = llvm::sys::ExecuteAndWait(*cc, args, std::nullopt, {}, 0, 0, &errMsg);
  if (!keepObject)
    llvm::sys::fs::remove(objectPath);
  if (rc != 0)
    return fail("linking '" + outputPath + "' failed" + (errMsg.empty() ? "" : ": " + errMsg));
  return 0;
}

//===- StepJit.h - a lowered step JIT-compiled into a dsrt_program --*- C++ -*-===//
//
// Shared by ds-run (a STEP.mlir) and ds-c/Step.h's dsStepCompile (a model compiled in-process):
// the step lowered to the runtime (loadLoweredStep, lowerStepToLLVM) becomes native code for
// the one step target (createStepTargetMachine) and its entry points a dsrt_program; and by
// ds-generate and ds-serve, whose generation module becomes a generator (GenerationJit).
// Header-only: its users include the runtime's dsrt/dsrt.h, which DSPipelines does not.
//
#ifndef DS_PIPELINES_STEPJIT_H
#define DS_PIPELINES_STEPJIT_H

#include "dsrt/dsrt.h"
#include "dsrt/generate.h"

#include "ds/IR/DSDialect.h"
#include "ds/Pipelines/StepCompiler.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include <memory>
#include <string>

namespace mlir::ds {

/// JIT-compiles `lowered` (a training step or generation's programs); `runtimeLibrary` is the
/// loaded libdsrt.so whose functions it calls ("": the process's global symbols). Null with
/// `error` on failure.
inline std::unique_ptr<ExecutionEngine> jitLowered(ModuleOp lowered,
                                                   llvm::StringRef runtimeLibrary,
                                                   std::string &error) {
  auto tm = createStepTargetMachine(/*forObject=*/false);
  if (!tm) {
    error = "cannot create the target machine: " + llvm::toString(tm.takeError());
    return nullptr;
  }
  ExecutionEngineOptions options;
  llvm::SmallVector<llvm::StringRef, 1> libs;
  if (!runtimeLibrary.empty())
    libs.push_back(runtimeLibrary);
  options.sharedLibPaths = libs;
  auto engine = ExecutionEngine::create(lowered, options, std::move(*tm));
  if (!engine) {
    error = "JIT compilation failed: " + llvm::toString(engine.takeError());
    return nullptr;
  }
  (*engine)->initialize();
  return std::move(*engine);
}

/// The address of entry point `name` of `engine`'s code, or null.
inline void *jitSymbol(ExecutionEngine &engine, llvm::StringRef name) {
  auto sym = engine.lookup(name);
  if (!sym) {
    llvm::consumeError(sym.takeError());
    return nullptr;
  }
  return *sym;
}

/// JIT-compiles `lowered` and fills `program` with its entry points (jitLowered). The engine
/// owns the code (keep it while `program` is used); null with `error` on failure.
inline std::unique_ptr<ExecutionEngine> jitStep(ModuleOp lowered, llvm::StringRef runtimeLibrary,
                                                dsrt_program &program, std::string &error) {
  std::unique_ptr<ExecutionEngine> engine = jitLowered(lowered, runtimeLibrary, error);
  if (!engine)
    return nullptr;
  auto lookup = [&](llvm::StringRef name) { return jitSymbol(*engine, name); };
  auto metadata = reinterpret_cast<const char *(*)()>(lookup("ds_metadata"));
  program.init_slots = reinterpret_cast<void (*)(dsrt_context *)>(lookup("ds_init_slots"));
  program.micro_step =
      reinterpret_cast<dsrt_tensor *(*)(dsrt_context *, dsrt_tensor **)>(lookup("ds_micro_step"));
  program.optimizer_step = reinterpret_cast<void (*)(dsrt_context *, dsrt_tensor *, dsrt_tensor *,
                                                     dsrt_tensor *, dsrt_tensor *)>(
      lookup("ds_optimizer_step"));
  if (!metadata || !program.init_slots || !program.micro_step || !program.optimizer_step) {
    error = "the compiled step lacks an entry point (ds_metadata, ds_init_slots, "
            "ds_micro_step, ds_optimizer_step)";
    return nullptr;
  }
  program.metadata = metadata();
  return engine;
}

/// JIT-compiles `lowered` (ds-opt --inference's module) and fills `program` with its metadata
/// and entry points; a missing @prefill or @decode is left null (dsrt_generator_open says
/// so). Null with `error` when the module is not a lowered generation module.
inline std::unique_ptr<ExecutionEngine> jitGeneration(ModuleOp lowered,
                                                      llvm::StringRef runtimeLibrary,
                                                      dsrt_generation_program &program,
                                                      std::string &error) {
  std::unique_ptr<ExecutionEngine> engine = jitLowered(lowered, runtimeLibrary, error);
  if (!engine)
    return nullptr;
  auto lookup = [&](llvm::StringRef name) { return jitSymbol(*engine, name); };
  auto metadata = reinterpret_cast<const char *(*)()>(lookup("ds_metadata"));
  program.init_slots = reinterpret_cast<void (*)(dsrt_context *)>(lookup("ds_init_slots"));
  program.prefill = reinterpret_cast<dsrt_generation_call>(lookup(entryPointName(kPrefillName)));
  program.decode = reinterpret_cast<dsrt_generation_call>(lookup(entryPointName(kDecodeName)));
  if (!metadata || !program.init_slots) {
    error = "the module lacks ds_metadata or ds_init_slots";
    return nullptr;
  }
  program.metadata = metadata();
  return engine;
}

/// A module of ds-opt --inference (GEN.mlir) lowered, JIT-compiled and opened as the
/// runtime's generator with its weights GEN.safetensors beside it: what ds-generate and
/// ds-serve run. Owns the compiled code and the generator.
class GenerationJit {
public:
  ~GenerationJit() {
    if (gen_)
      dsrt_generator_close(gen_);
  }
  /// False with `error` (the cause and its fix) when the module or its weights cannot be used.
  bool open(llvm::StringRef genPath, int32_t threads, std::string &error) {
    DialectRegistry registry;
    registerStepDialects(registry);
    context_ = std::make_unique<MLIRContext>(registry);
    llvm::SourceMgr sourceMgr;
    SourceMgrDiagnosticHandler diagnostics(sourceMgr, context_.get());
    module_ = loadLoweredStep(genPath, *context_, sourceMgr, error);
    if (!module_)
      return false;
    dsrt_generation_program program{};
    engine_ = jitGeneration(*module_, "", program, error);
    if (!engine_)
      return false;
    llvm::SmallString<256> weights(genPath);
    llvm::sys::path::replace_extension(weights, ".safetensors");
    char err[1024] = {0};
    gen_ = dsrt_generator_open(&program, weights.c_str(), threads, err, sizeof err);
    if (!gen_)
      error = err;
    return gen_ != nullptr;
  }
  dsrt_generator *generator() const { return gen_; }

private:
  std::unique_ptr<MLIRContext> context_;
  OwningOpRef<ModuleOp> module_;
  std::unique_ptr<ExecutionEngine> engine_;
  dsrt_generator *gen_ = nullptr;
};

} // namespace mlir::ds

#endif // DS_PIPELINES_STEPJIT_H

/*===- ds-c/Dialects.h - the ds dialect, passes and importer in C ---------===*\
|*                                                                            *|
|* MLIR's C API style: a dialect handle, pass registration (so that           *|
|* mlirParsePassPipeline understands every ds-* pass and its options) and the  *|
|* TorchScript importer. Link ds::CAPI (libdsCAPI.so), which also carries      *|
|* MLIR's own C API (mlir-c/IR.h, mlir-c/Pass.h, mlir-c/RegisterEverything.h). *|
\*===----------------------------------------------------------------------===*/
#ifndef DS_C_DIALECTS_H
#define DS_C_DIALECTS_H

#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

/* mlirGetDialectHandle__ds__(): the ds dialect. */
MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(DS, ds);

/* Registers the dialects a ds program uses (ds, func, arith, scf, shard, llvm) into
 * `registry`. */
MLIR_CAPI_EXPORTED void dsRegisterDialects(MlirDialectRegistry registry);

/* Registers every ds pass (ds-autodiff, ds-zero, ds-optimizer, ..., with their options), the
 * upstream passes ds pipelines use (canonicalize, cse, symbol-dce) and ds's pipelines
 * (ds-train-step{config=PATH world-size=N}: the training step ds-opt --config builds;
 * ds-lower-step: a step lowered to runtime calls), for mlirParsePassPipeline. Idempotent. */
MLIR_CAPI_EXPORTED void dsRegisterAllPasses(void);

/* Whether this library was built with the TorchScript importer (LibTorch). */
MLIR_CAPI_EXPORTED bool dsHasTorchScriptImporter(void);

/* Imports `forward` of the TorchScript archive at `path` into a module of `ctx` (with the
 * dialects of dsRegisterDialects): `inputs` are the forward arguments' per-rank micro-batch
 * types as ds-opt's --input takes them ("idx=tensor<8x128xi64>"); when `weightsPath` is not
 * empty the state_dict is written there as safetensors. Errors are emitted as diagnostics
 * on `ctx` (attach a handler to see them); the module is null on failure. */
MLIR_CAPI_EXPORTED MlirModule dsImportTorchScript(MlirContext ctx, MlirStringRef path,
                                                  intptr_t numInputs,
                                                  const MlirStringRef *inputs,
                                                  MlirStringRef weightsPath);

#ifdef __cplusplus
}
#endif

#endif /* DS_C_DIALECTS_H */

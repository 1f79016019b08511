/* import-and-shard MODEL.pt NAME=TYPE... : imports a TorchScript model with ds's C API, runs
 * ds's training-step passes from a pipeline string (ZeRO stage 3 over 2 ranks) and prints the
 * parameter table and what the pipeline made. */
#include "ds-c/Dialects.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"

#include <stdio.h>
#include <string.h>

static void printTo(MlirStringRef s, void *out) { fwrite(s.data, 1, s.length, (FILE *)out); }

static MlirLogicalResult onDiagnostic(MlirDiagnostic d, void *user) {
  (void)user;
  fprintf(stderr, "import-and-shard: ");
  mlirDiagnosticPrint(d, printTo, stderr);
  fprintf(stderr, "\n");
  return mlirLogicalResultSuccess();
}

/* Counts the shard dialect's collectives. */
static MlirWalkResult countShard(MlirOperation op, void *count) {
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  if (name.length > 6 && strncmp(name.data, "shard.", 6) == 0 &&
      strncmp(name.data, "shard.grid", name.length) != 0)
    ++*(int *)count;
  return MlirWalkResultAdvance;
}

static int run(MlirContext ctx, MlirModule m, const char *pipeline) {
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  MlirLogicalResult parsed = mlirParsePassPipeline(
      mlirPassManagerGetAsOpPassManager(pm), mlirStringRefCreateFromCString(pipeline), printTo,
      stderr);
  int ok = mlirLogicalResultIsSuccess(parsed) &&
           mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(m)));
  fflush(stdout);
  mlirPassManagerDestroy(pm);
  return ok;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: import-and-shard MODEL.pt NAME=TYPE...\n");
    return 2;
  }
  dsRegisterAllPasses();
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  dsRegisterDialects(registry);
  MlirContext ctx = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);
  mlirContextAttachDiagnosticHandler(ctx, onDiagnostic, NULL, NULL);

  MlirStringRef inputs[16];
  int n = 0;
  for (int i = 2; i < argc && n < 16; ++i)
    inputs[n++] = mlirStringRefCreateFromCString(argv[i]);
  MlirModule m = dsImportTorchScript(ctx, mlirStringRefCreateFromCString(argv[1]), n, inputs,
                                     mlirStringRefCreateFromCString(""));
  if (mlirModuleIsNull(m))
    return 1;
  if (!run(ctx, m, "builtin.module(ds-print-parameter-table)"))
    return 1;
  const char *pipeline = "builtin.module(ds-autodiff{gradient-accumulation-steps=1}, "
                         "ds-zero{stage=3 data-parallel-size=2}, ds-optimizer{type=AdamW}, "
                         "ds-verify-collectives)";
  if (!run(ctx, m, pipeline))
    return 1;
  int collectives = 0;
  mlirOperationWalk(mlirModuleGetOperation(m), countShard, &collectives, MlirWalkPostOrder);
  printf("%s: %d collectives\n", pipeline, collectives);
  mlirModuleDestroy(m);
  mlirContextDestroy(ctx);
  return 0;
}

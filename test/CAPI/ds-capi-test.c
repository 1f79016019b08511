/*===- ds-capi-test.c - the C API, from C: dialect, passes, pipeline, import ===*\
|* Run by CAPI/capi.test, which FileChecks what it prints.                     *|
\*===-----------------------------------------------------------------------===*/
#include "ds-c/Dialects.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/RegisterEverything.h"

#include <stdio.h>
#include <string.h>

static void printTo(MlirStringRef s, void *out) { fwrite(s.data, 1, s.length, (FILE *)out); }

static MlirLogicalResult onDiagnostic(MlirDiagnostic d, void *user) {
  (void)user;
  printf("diagnostic: ");
  mlirDiagnosticPrint(d, printTo, stdout);
  printf("\n");
  return mlirLogicalResultSuccess();
}

static MlirContext newContext(void) {
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  dsRegisterDialects(registry);
  MlirContext ctx = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);
  mlirContextAttachDiagnosticHandler(ctx, onDiagnostic, NULL, NULL);
  return ctx;
}

/* The dialect handle: its namespace, and the dialect it loads. */
static void dialectHandle(void) {
  MlirContext ctx = mlirContextCreate();
  MlirDialectHandle h = mlirGetDialectHandle__ds__();
  MlirStringRef ns = mlirDialectHandleGetNamespace(h);
  MlirDialect d = mlirDialectHandleLoadDialect(h, ctx);
  MlirStringRef loaded = mlirDialectGetNamespace(d);
  printf("dialect handle: %.*s, loaded: %.*s\n", (int)ns.length, ns.data, (int)loaded.length,
         loaded.data);
  mlirContextDestroy(ctx);
}

static const char *kModule =
    "module {\n"
    "  ds.parameter @w trainable : tensor<6xf32>\n"
    "  ds.state @\"w@grad\" of @w role \"grad\" : tensor<6xf32>\n"
    "  func.func @micro_step(%x: tensor<6xf32>) -> tensor<f32> {\n"
    "    %g = ds.mul %x, %x : tensor<6xf32>, tensor<6xf32> -> tensor<6xf32>\n"
    "    %s = ds.sum %x dims = [0] : tensor<6xf32> -> tensor<f32>\n"
    "    %o = ds.get_parameter @\"w@grad\" : tensor<6xf32>\n"
    "    %n = ds.add %o, %g : tensor<6xf32>, tensor<6xf32> -> tensor<6xf32>\n"
    "    ds.assign @\"w@grad\" = %n : tensor<6xf32>\n"
    "    return %s : tensor<f32>\n"
    "  }\n"
    "}\n";

/* A ds pass pipeline from a string, with options, on parsed ds IR; then an unknown option. */
static void pipeline(void) {
  dsRegisterAllPasses();
  MlirContext ctx = newContext();
  MlirModule m = mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(kModule));
  printf("parsed: %s\n", mlirModuleIsNull(m) ? "no" : "yes");
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  MlirOpPassManager opm = mlirPassManagerGetAsOpPassManager(pm);
  const char *text = "builtin.module(ds-zero{stage=1 data-parallel-size=2}, ds-optimizer{type=AdamW})";
  MlirLogicalResult parsed = mlirParsePassPipeline(
      opm, mlirStringRefCreateFromCString(text), printTo, stdout);
  printf("pipeline %s: %s\n", text, mlirLogicalResultIsSuccess(parsed) ? "parsed" : "refused");
  MlirLogicalResult ran = mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(m));
  printf("ran: %s\n", mlirLogicalResultIsSuccess(ran) ? "success" : "failure");
  mlirOperationPrint(mlirModuleGetOperation(m), printTo, stdout);
  printf("\n");
  mlirPassManagerDestroy(pm);

  MlirPassManager bad = mlirPassManagerCreate(ctx);
  printf("unknown option: ");
  MlirLogicalResult refused = mlirParsePassPipeline(
      mlirPassManagerGetAsOpPassManager(bad),
      mlirStringRefCreateFromCString("builtin.module(ds-zero{stages=2})"), printTo, stdout);
  printf("\nunknown option refused: %s\n", mlirLogicalResultIsFailure(refused) ? "yes" : "no");
  mlirPassManagerDestroy(bad);

  // ds's registered pipelines: the lowering takes no option; the training step needs a config.
  MlirPassManager lower = mlirPassManagerCreate(ctx);
  MlirLogicalResult lowerParsed = mlirParsePassPipeline(
      mlirPassManagerGetAsOpPassManager(lower),
      mlirStringRefCreateFromCString("builtin.module(ds-lower-step)"), printTo, stdout);
  printf("ds-lower-step: %s\n", mlirLogicalResultIsSuccess(lowerParsed) ? "parsed" : "refused");
  mlirPassManagerDestroy(lower);
  MlirPassManager step = mlirPassManagerCreate(ctx);
  printf("ds-train-step without a config: ");
  MlirLogicalResult stepRefused = mlirParsePassPipeline(
      mlirPassManagerGetAsOpPassManager(step),
      mlirStringRefCreateFromCString("builtin.module(ds-train-step)"), printTo, stdout);
  printf("\nrefused: %s\n", mlirLogicalResultIsFailure(stepRefused) ? "yes" : "no");
  mlirPassManagerDestroy(step);
  mlirModuleDestroy(m);
  mlirContextDestroy(ctx);
}

/* The importer: a missing file is a diagnostic and a null module; a model imports. */
static void import(const char *model) {
  MlirContext ctx = newContext();
  MlirStringRef inputs[] = {mlirStringRefCreateFromCString("idx=tensor<4x16xi64>"),
                            mlirStringRefCreateFromCString("targets=tensor<4x16xi64>")};
  MlirModule missing = dsImportTorchScript(ctx, mlirStringRefCreateFromCString("no/such/model.pt"),
                                           2, inputs, mlirStringRefCreateFromCString(""));
  printf("missing model: %s\n", mlirModuleIsNull(missing) ? "null module" : "a module");
  if (model && dsHasTorchScriptImporter()) {
    MlirModule m = dsImportTorchScript(ctx, mlirStringRefCreateFromCString(model), 2, inputs,
                                       mlirStringRefCreateFromCString(""));
    printf("imported: %s\n", mlirModuleIsNull(m) ? "no" : "yes");
    if (!mlirModuleIsNull(m)) {
      MlirPassManager pm = mlirPassManagerCreate(ctx);
      mlirParsePassPipeline(mlirPassManagerGetAsOpPassManager(pm),
                            mlirStringRefCreateFromCString("builtin.module(ds-print-parameter-table)"),
                            printTo, stdout);
      fflush(stdout);
      MlirLogicalResult ran = mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(m));
      fflush(stdout);
      printf("table printed: %s\n", mlirLogicalResultIsSuccess(ran) ? "yes" : "no");
      mlirPassManagerDestroy(pm);
      mlirModuleDestroy(m);
    }
  }
  mlirContextDestroy(ctx);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0); /* interleaved with what passes print through LLVM */
  dialectHandle();
  pipeline();
  import(argc > 1 ? argv[1] : NULL);
  return 0;
}

// my-ds-opt: this project's own mlir-opt-style tool with ds's dialect and passes registered,
// e.g. `my-ds-opt step.mlir --ds-zero="stage=1 data-parallel-size=2"`.
#include "ds/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::ds::registerAllDialects(registry);
  mlir::ds::registerAllPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "my-ds-opt: ds's dialect and passes in another tool\n",
                        registry));
}

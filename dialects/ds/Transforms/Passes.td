//===- Passes.td - passes of the ds dialect --------------------------------===//
#ifndef DS_TRANSFORMS_PASSES_TD
#define DS_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def DSPrintParameterTable : Pass<"ds-print-parameter-table", "::mlir::ModuleOp"> {
  let summary = "Prints the model's parameters and buffers as a table.";
  let description = [{
    Writes one row per `ds.parameter` (state_dict key, shape, dtype, kind, element count,
    bytes, tied names) and totals to standard output; the IR is unchanged.

    ```
    $ ds-opt model.mlir --ds-print-parameter-table -o /dev/null
    name              shape      dtype  kind       elements  bytes
    fc.weight         [32, 16]   f32    parameter       512   2048
    ...
    ```
  }];
}

#endif // DS_TRANSFORMS_PASSES_TD

//===- DSBase.td - the ds dialect and its base classes --------------------===//
#ifndef DS_BASE_TD
#define DS_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def DS_Dialect : Dialect {
  let name = "ds";
  let cppNamespace = "::mlir::ds";
  let summary = "Training programs for models bigger than one accelerator.";
  let description = [{
    The `ds` dialect holds a PyTorch model imported from TorchScript and, after the training
    passes, its training step. Parameters and buffers are module-level symbols named by their
    `state_dict` keys (`ds.parameter`); compute ops follow PyTorch's semantics (broadcasting,
    dimension conventions) on ranked tensors with static shapes, so every shape is known after
    import. The mesh and per-tensor sharding attributes describe how a program is laid out over
    ranks.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasConstantMaterializer = 1;
}

class DS_Op<string mnemonic, list<Trait> traits = []> : Op<DS_Dialect, mnemonic, traits>;

// What the memory plan may assume of an op's kernels on every device.
// The kernel reads each element of an operand before it writes that element of the result:
// the result may take the storage of an operand of its type that dies there.
def DS_WritesOverOperand : NativeOpTrait<"WritesOverOperand"> {
  let cppNamespace = "::mlir::OpTrait::ds";
}
// The results after the first are gradients that the kernel skips when nobody uses them (a
// null tensor, no storage).
def DS_OptionalGradients : NativeOpTrait<"OptionalGradients"> {
  let cppNamespace = "::mlir::OpTrait::ds";
}
class DS_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<DS_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

#endif // DS_BASE_TD

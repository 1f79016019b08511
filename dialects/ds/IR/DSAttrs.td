//===- DSAttrs.td - mesh, sharding and enum attributes ---------------------===//
#ifndef DS_ATTRS_TD
#define DS_ATTRS_TD

include "ds/IR/DSBase.td"
include "mlir/IR/EnumAttr.td"

def DS_MeshAttr : DS_Attr<"Mesh", "mesh"> {
  let summary = "A device mesh: named axes and their sizes.";
  let description = [{
    The ranks of a run arranged as an N-dimensional grid, e.g.
    `#ds.mesh<axes = ["dp", "tp"], shape = [4, 2]>` for 8 ranks. A module carries its mesh as
    the `ds.mesh` attribute; shardings name its axes.

    **Constraints:** as many sizes as axes; axis names unique and non-empty; every size >= 1.
  }];
  let parameters = (ins ArrayRefParameter<"::mlir::StringAttr">:$axes,
                        ArrayRefParameter<"int64_t">:$shape);
  let assemblyFormat = "`<` `axes` `=` `[` $axes `]` `,` `shape` `=` `[` $shape `]` `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Number of ranks in the mesh (product of the sizes).
    int64_t getNumRanks() const;
    /// Index of the axis named `name`, or -1.
    int64_t findAxis(::llvm::StringRef name) const;
  }];
}

def DS_ShardingAttr : DS_Attr<"Sharding", "sharding"> {
  let summary = "How each dimension of a tensor is split over mesh axes.";
  let description = [{
    One list of mesh-axis names per tensor dimension: `#ds.sharding<[["dp"], []]>` splits
    dimension 0 over the `dp` axis and replicates dimension 1. An empty list replicates.

    **Constraints:** every entry is a list of non-empty strings; an axis appears at most once
    in the whole sharding. Where the sharding is attached (`ds.parameter`), its rank must match
    the tensor's and every axis must exist in the module's `ds.mesh`.
  }];
  let parameters = (ins "::mlir::ArrayAttr":$dims);
  let assemblyFormat = "`<` $dims `>`";
  let genVerifyDecl = 1;
}

def DS_CmpPredicate : I32EnumAttr<"CmpPredicate", "comparison predicate", [
    I32EnumAttrCase<"eq", 0>, I32EnumAttrCase<"ne", 1>, I32EnumAttrCase<"lt", 2>,
    I32EnumAttrCase<"le", 3>, I32EnumAttrCase<"gt", 4>, I32EnumAttrCase<"ge", 5>]> {
  let cppNamespace = "::mlir::ds";
  let genSpecializedAttr = 0;
}
def DS_CmpPredicateAttr : EnumAttr<DS_Dialect, DS_CmpPredicate, "cmp_predicate">;

def DS_Reduction : I32EnumAttr<"Reduction", "loss reduction", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"mean", 1>, I32EnumAttrCase<"sum", 2>]> {
  let cppNamespace = "::mlir::ds";
  let genSpecializedAttr = 0;
}
def DS_ReductionAttr : EnumAttr<DS_Dialect, DS_Reduction, "reduction">;

def DS_GeluApproximate : I32EnumAttr<"GeluApproximate", "GELU approximation", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"tanh", 1>]> {
  let cppNamespace = "::mlir::ds";
  let genSpecializedAttr = 0;
}
def DS_GeluApproximateAttr : EnumAttr<DS_Dialect, DS_GeluApproximate, "gelu_approximate">;

#endif // DS_ATTRS_TD

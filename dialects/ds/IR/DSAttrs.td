//===- DSAttrs.td - mesh, sharding and enum attributes ---------------------===//
#ifndef DS_ATTRS_TD
#define DS_ATTRS_TD

include "ds/IR/DSBase.td"
include "mlir/IR/EnumAttr.td"
// DS_SlotRole and DS_MemorySpace, generated from dsrt.h's lists (cmake/DSRuntimeEnums.cmake).
include "ds/IR/DSRuntimeEnums.td"

/// What a persistent slot holds: `ds.state` and `ds.flat_buffer` say it (`role grad`); a
/// `ds.parameter` is a `parameter` or a `buffer`. The runtime's dsrt_slot_role.
def DS_SlotRoleAttr : EnumAttr<DS_Dialect, DS_SlotRole, "slot_role">;
/// Where a slot lives (`ds.memory_space`) or where `ds.move` copies to. The runtime's
/// dsrt_space.
def DS_MemorySpaceAttr : EnumAttr<DS_Dialect, DS_MemorySpace, "memory_space">;
// How a training step runs (#ds.run and its parts).
include "ds/IR/DSRunAttrs.td"

// MeshAxis (dp, pp, tp, sp, ep) is generated from dsrt.h's DSRT_MESH_AXES (DSRuntimeEnums.td).

def DS_MeshAttr : DS_Attr<"Mesh", "mesh"> {
  let summary = "A device mesh: its axes, named by role, and their sizes.";
  let description = [{
    The ranks of a run arranged as an N-dimensional grid, row-major (the last axis varies
    fastest between consecutive ranks), e.g. `#ds.mesh<axes = ["dp", "tp"], shape = [4, 2]>`
    for 8 ranks. Each axis is named by its role: `dp` (data parallel), `pp` (pipeline), `tp`
    (tensor parallel) or `sp` (sequence parallel). A module carries its mesh as the `ds.mesh`
    attribute; it is the one source of the module's grid (`shard.grid @mesh`, same axes in the
    same order) and of the runtime's groups. Shardings name its axes.

    **Constraints:** as many sizes as axes; every axis name is a role (dp, pp, tp, sp, ep) and
    appears once; every size >= 1.
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
    /// Index of the axis of `role`, or -1.
    int64_t findAxis(MeshAxis role) const;
    /// Size of the axis of `role` (1 when the mesh has none).
    int64_t getSize(MeshAxis role) const;
    /// "dp=2 x tp=2", for messages.
    std::string str() const;
  }];
}

def DS_ZeroAttr : DS_Attr<"Zero", "zero"> {
  let summary = "ds-zero's decision: the ZeRO stage the module is partitioned for.";
  let description = [{
    `ds-zero` sets it on the module (`ds.zero = #ds.zero<stage = 2>`) and `ds-optimizer` reads
    it: the stage decides which collectives the update makes (stage 0 all-reduces the
    gradients; stages 1-3 update this rank's shard of ds-zero's flat buffers).

    **Constraints:** the stage is 0, 1, 2 or 3; the attribute belongs on a builtin.module.
  }];
  let parameters = (ins "int64_t":$stage);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def DS_PipelineAttr : DS_Attr<"Pipeline", "pipeline"> {
  let summary = "How the model is cut into pipeline stages, and how the step runs them.";
  let description = [{
    `ds-pipeline-partition` sets `ds.pipeline = #ds.pipeline<stages = 2, virtual_stages = 1>`
    on the module (each pipeline rank holds `virtual_stages` chunks); `ds-pipeline` adds the
    schedule, the micro-batches per step and the cost model's work per phase (the forward of
    chunk c at index c, its backward at 2C - 1 - c), which `--comm-report`'s predicted bubble
    simulates:
    `#ds.pipeline<stages = 2, virtual_stages = 1, schedule = "1f1b", micro_batches = 4,
    phase_flops = [10, 10, 20, 20]>`.

    **Constraints:** stages and virtual_stages >= 1; the schedule, micro_batches (>= 1) and
    phase_flops (2 x stages x virtual_stages entries) come together; the attribute belongs on
    a builtin.module.
  }];
  let parameters = (ins "int64_t":$stages, "int64_t":$virtual_stages,
      OptionalParameter<"PipelineScheduleAttr">:$schedule,
      DefaultValuedParameter<"int64_t", "0">:$micro_batches,
      OptionalParameter<"::mlir::DenseI64ArrayAttr">:$phase_flops);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Chunks of the model: stages x virtual_stages.
    int64_t getChunks() const { return getStages() * getVirtualStages(); }
    /// Whether ds-pipeline has turned the step into each pipeline rank's program.
    bool isScheduled() const { return static_cast<bool>(getSchedule()); }
  }];
}

def DS_ShardingAttr : DS_Attr<"Sharding", "sharding"> {
  let summary = "How each dimension of a tensor is split over mesh axes.";
  let description = [{
    One list of mesh-axis names per tensor dimension: `#ds.sharding<[["tp"], []]>` splits
    dimension 0 over the `tp` axis and replicates dimension 1. An empty list replicates.
    On a `ds.parameter` the type is the local part that each rank holds: the state_dict
    tensor's dimension i is the type's times the product of its axes' sizes, and the rank at
    index r along them holds the r-th contiguous part. With `segments`, dimension i is
    `segments[i]` equal segments (a fused q/k/v projection's rows) and each rank holds its
    part of every segment, back to back:
    `#ds.sharding<[["tp"], []], segments = [3, 1]>`. With `sizes`, the segments of the one
    dimension that has several are of those rows of the state_dict tensor instead (a fused
    projection of grouped-query heads: q's rows, then k's and v's):
    `#ds.sharding<[["tp"], []], segments = [3, 1], sizes = [32, 16, 16]>`.

    **Constraints:** every entry is a list of non-empty strings; an axis appears at most once
    in the whole sharding; `segments`, when present, has one entry >= 1 per dimension; `sizes`,
    when present, one entry >= 1 per segment of the only dimension with several. Where
    the sharding is attached (`ds.parameter`), its rank must match the tensor's and every axis
    must exist in the module's `ds.mesh`.
  }];
  let parameters = (ins "::mlir::ArrayAttr":$dims, OptionalArrayRefParameter<"int64_t">:$segments,
                        OptionalArrayRefParameter<"int64_t">:$sizes);
  let assemblyFormat =
      "`<` $dims (`,` `segments` `=` `[` $segments^ `]`)? (`,` `sizes` `=` `[` $sizes^ `]`)? `>`";
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "::mlir::ArrayAttr":$dims), [{
      return $_get($_ctxt, dims, ::llvm::ArrayRef<int64_t>(), ::llvm::ArrayRef<int64_t>());
    }]>,
    AttrBuilder<(ins "::mlir::ArrayAttr":$dims, "::llvm::ArrayRef<int64_t>":$segments), [{
      return $_get($_ctxt, dims, segments, ::llvm::ArrayRef<int64_t>());
    }]>
  ];
  let extraClassDeclaration = [{
    /// The segments of dimension `dim` (1 when not given).
    int64_t getSegmentsOf(unsigned dim) const {
      return getSegments().empty() ? 1 : getSegments()[dim];
    }
    /// The rows of dimension `dim`'s segments when they are unequal (else empty).
    ::llvm::ArrayRef<int64_t> getSizesOf(unsigned dim) const {
      return getSegmentsOf(dim) > 1 ? getSizes() : ::llvm::ArrayRef<int64_t>();
    }
  }];
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

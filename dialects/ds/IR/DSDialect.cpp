//===- DSDialect.cpp - registration and dialect-level attribute checks -----===//
#include "ds/IR/DSDialect.h"
#include "ds/IR/DSOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::ds;

#include "ds/IR/DSDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "ds/IR/DSAttrs.cpp.inc"

void DSDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ds/IR/DSOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ds/IR/DSAttrs.cpp.inc"
      >();
  attachCostModels(getContext());
}

Operation *DSDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type,
                                          Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}

LogicalResult DSDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  if (attr.getName() == kMeshAttrName) {
    if (!isa<ModuleOp>(op))
      return op->emitError() << "'" << kMeshAttrName << "' belongs on a builtin.module";
    if (!isa<MeshAttr>(attr.getValue()))
      return op->emitError() << "'" << kMeshAttrName << "' must be a #ds.mesh attribute";
    return success();
  }
  if (attr.getName() == kInputNameAttrName)
    return success();
  if (attr.getName() == kModelCastAttrName) {
    if (!isa<ConvertOp>(op) || !isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << kModelCastAttrName << "' is a unit attribute of ds.convert";
    return success();
  }
  if (attr.getName() == kFusedAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << kFusedAttrName << "' is a unit attribute";
    return success();
  }
  if (attr.getName() == kMixedPrecisionAttrName) {
    if (!isa<ModuleOp>(op) || !isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << kMixedPrecisionAttrName
                             << "' is a unit attribute on a builtin.module";
    return success();
  }
  if (attr.getName() == kRunAttrName) {
    if (!isa<ModuleOp>(op) || !isa<RunAttr>(attr.getValue()))
      return op->emitError() << "'" << kRunAttrName << "' must be a #ds.run on a builtin.module";
    return success();
  }
  // ds-zero's stage, which ds-optimizer reads.
  if (attr.getName() == kZeroAttrName) {
    if (!isa<ModuleOp>(op) || !isa<ZeroAttr>(attr.getValue()))
      return op->emitError() << "'" << kZeroAttrName
                             << "' must be a #ds.zero on a builtin.module";
    return success();
  }
  // Pipeline parallelism (ds-pipeline-partition, ds-autodiff, ds-pipeline).
  StringRef name = attr.getName().getValue();
  if (name == kPipelineAttrName) {
    if (!isa<ModuleOp>(op) || !isa<PipelineAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be a #ds.pipeline on a builtin.module";
    return success();
  }
  if (name == kStageAttrName || name == kPipelineRankAttrName || name == kTileAttrName) {
    auto i = dyn_cast<IntegerAttr>(attr.getValue());
    if (!i || i.getInt() < 0)
      return op->emitError() << "'" << name << "' must be a non-negative integer";
    return success();
  }
  if (name == kBackwardAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' is a unit attribute";
    return success();
  }
  if (name == kStagesAttrName) {
    if (!isa<DenseI64ArrayAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be an array<i64> of pipeline ranks";
    return success();
  }
  if (name == kMemorySpaceAttrName) {
    if (!isa<MemorySpaceAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be a #ds<memory_space ...> (device, "
                             << "host or nvme)";
    if (!isa<ParameterOp, StateOp, FlatBufferOp>(op))
      return op->emitError() << "'" << name << "' belongs on a ds.parameter, ds.state or "
                             << "ds.flat_buffer";
    return success();
  }
  if (name == kRecomputeAttrName && isa<IntegerAttr>(attr.getValue()))
    return success();
  if (name == kOnHostAttrName || name == kRecomputeAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' is a unit attribute";
    return success();
  }
  if (name == kOffloadAttrName) {
    if (!isa<ModuleOp>(op) || !isa<DictionaryAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be a dictionary on a builtin.module";
    return success();
  }
  if (name == kWeightFreeAttrName) {
    if (!isa<ModuleOp>(op) || !isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' is a unit attribute on a builtin.module";
    return success();
  }
  if (name == kScheduleAttrName) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be a string";
    return success();
  }
  return op->emitError() << "unknown ds attribute '" << attr.getName().getValue() << "'";
}

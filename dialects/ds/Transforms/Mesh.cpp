//===- Mesh.cpp - the module's mesh and its grid, found by axis role ---------===//
#include "Mesh.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::ds;

MeshAttr mlir::ds::getMesh(ModuleOp module) {
  return module->getAttrOfType<MeshAttr>(kMeshAttrName);
}

MeshAttr mlir::ds::buildMesh(MLIRContext *ctx, int64_t dp, int64_t tp, int64_t sp, int64_t pp,
                             int64_t ep) {
  SmallVector<StringAttr> axes;
  SmallVector<int64_t> shape;
  if (pp > 1) { // outermost: a stage's ranks are consecutive world ranks
    axes.push_back(StringAttr::get(ctx, stringifyMeshAxis(MeshAxis::pp)));
    shape.push_back(pp);
  }
  axes.push_back(StringAttr::get(ctx, stringifyMeshAxis(MeshAxis::dp)));
  shape.push_back(ep > 1 ? dp / ep : dp);
  for (auto [role, size] : {std::pair{MeshAxis::ep, ep}, std::pair{MeshAxis::sp, sp},
                            std::pair{MeshAxis::tp, tp}})
    if (size > 1) {
      axes.push_back(StringAttr::get(ctx, stringifyMeshAxis(role)));
      shape.push_back(size);
    }
  return MeshAttr::get(ctx, axes, shape);
}

int64_t mlir::ds::dataParallelRanks(MeshAttr mesh) {
  return mesh ? mesh.getSize(MeshAxis::dp) * mesh.getSize(MeshAxis::ep) : 1;
}

LogicalResult mlir::ds::ensureDataParallelMesh(ModuleOp module, int64_t dp, StringRef pass) {
  MeshAttr mesh = getMesh(module);
  if (!mesh) {
    if (dp > 1)
      module->setAttr(kMeshAttrName, buildMesh(module.getContext(), dp, 1, 1));
    return success();
  }
  if (dp != 1 && dataParallelRanks(mesh) != dp)
    return module.emitError() << pass << ": data-parallel-size " << dp
                              << " disagrees with the module's mesh " << mesh.str()
                              << " (drop the option; the mesh decides)";
  return success();
}

FailureOr<MeshAxisRef> mlir::ds::getMeshAxis(ModuleOp module, MeshAxis role, StringRef pass) {
  MeshAttr mesh = getMesh(module);
  if (!mesh)
    return module.emitError() << pass << ": the module has no '" << kMeshAttrName
                              << "' attribute, so no " << stringifyMeshAxis(role) << " axis";
  int64_t index = mesh.findAxis(role);
  if (index < 0)
    return module.emitError() << pass << ": the module's mesh " << mesh.str() << " has no "
                              << stringifyMeshAxis(role) << " axis";
  auto grid = module.lookupSymbol<shard::GridOp>(kMeshGridName);
  if (!grid) {
    if (module.lookupSymbol(kMeshGridName))
      return module.emitError() << pass << ": the symbol @" << kMeshGridName
                                << " is taken by something other than the mesh's grid";
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    grid = shard::GridOp::create(b, module.getLoc(), kMeshGridName, mesh.getShape());
  } else if (grid.getShape() != mesh.getShape()) {
    return grid.emitError() << pass << ": grid @" << kMeshGridName
                            << " does not match the module's mesh " << mesh.str();
  }
  MeshAxisRef ref;
  ref.axis = static_cast<int16_t>(index);
  ref.size = mesh.getShape()[index];
  ref.list = {ref.axis};
  return ref;
}

/// The dp axis with those of `others` that have more than one rank.
static FailureOr<MeshAxisRef> withDataParallel(ModuleOp module, ArrayRef<MeshAxis> others,
                                               StringRef pass) {
  FailureOr<MeshAxisRef> dp = getMeshAxis(module, MeshAxis::dp, pass);
  if (failed(dp))
    return failure();
  MeshAxisRef group = *dp;
  for (MeshAxis role : others) {
    if (getMesh(module).getSize(role) == 1)
      continue;
    FailureOr<MeshAxisRef> a = getMeshAxis(module, role, pass);
    if (failed(a))
      return failure();
    group.size *= a->size;
    group.list.push_back(a->axis);
  }
  llvm::sort(group.list);
  return group;
}

FailureOr<MeshAxisRef> mlir::ds::getReplicaGroup(ModuleOp module, StringRef pass) {
  return withDataParallel(module, {MeshAxis::ep, MeshAxis::sp}, pass);
}

FailureOr<MeshAxisRef> mlir::ds::getExpertReplicaGroup(ModuleOp module, StringRef pass) {
  return withDataParallel(module, {MeshAxis::sp}, pass);
}

bool mlir::ds::splitsOver(ShardingAttr sharding, MeshAxis role) {
  if (!sharding)
    return false;
  StringRef name = stringifyMeshAxis(role);
  for (Attribute dim : sharding.getDims())
    for (Attribute axis : cast<ArrayAttr>(dim))
      if (cast<StringAttr>(axis).getValue() == name)
        return true;
  return false;
}

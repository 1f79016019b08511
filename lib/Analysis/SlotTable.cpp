//===- SlotTable.cpp - a step's persistent slots ----------------------------===//
#include "ds/Analysis/SlotTable.h"

#include "ds/IR/DSDialect.h"
#include "ds/IR/DSShapes.h"
#include "dsrt/dsrt.h"

using namespace mlir;
using namespace mlir::ds;

int64_t mlir::ds::storedBytes(RankedTensorType type) {
  unsigned bits = type.getElementType().getIntOrFloatBitWidth();
  return numElements(type.getShape()) * (bits == 1 ? 1 : bits / 8);
}

namespace {
/// A parameter split over one mesh axis (ds-tensor-parallel's sharding).
LogicalResult readSplit(ParameterOp p, ModuleOp module, PlannedSlot &s) {
  ShardingAttr sh = p.getShardingAttr();
  if (!sh)
    return success();
  auto mesh = module->getAttrOfType<MeshAttr>(kMeshAttrName);
  for (auto [d, axes] : llvm::enumerate(sh.getDims())) {
    auto list = cast<ArrayAttr>(axes);
    if (list.empty())
      continue;
    if (list.size() != 1 || s.splitDim >= 0 || !mesh)
      return p.emitError() << "ds-lower-to-runtime: a parameter may be split along one "
                              "dimension over one mesh axis";
    s.splitDim = static_cast<int64_t>(d);
    s.splitSegments = sh.getSegmentsOf(d);
    s.splitSizes.assign(sh.getSizesOf(d).begin(), sh.getSizesOf(d).end());
    s.splitAxis = cast<StringAttr>(list[0]).getValue().str();
    s.splitParts = mesh.getShape()[mesh.findAxis(s.splitAxis)];
  }
  return success();
}

} // namespace

int32_t mlir::ds::dtypeCodeOf(Type t) {
  std::string name;
  llvm::raw_string_ostream(name) << t;
  return dsrt_dtype_from_name(name.c_str());
}

FailureOr<SlotTable> SlotTable::build(ModuleOp module) {
  SlotTable table;
  std::vector<PlannedSlot> &slots = table.slots_;
  for (Operation &op : *module.getBody()) {
    PlannedSlot s;
    if (auto p = dyn_cast<ParameterOp>(op)) {
      s.name = p.getSymName().str();
      s.role = p.getRole();
      if (auto aliases = p.getAliases())
        for (Attribute a : *aliases)
          s.aliases.push_back(cast<StringAttr>(a).getValue().str());
      s.type = p.getTensorType();
      if (failed(readSplit(p, module, s)))
        return failure();
    } else if (auto st = dyn_cast<StateOp>(op)) {
      s.name = st.getSymName().str();
      s.role = st.getRole();
      s.of = st.getOf().value_or("").str();
      s.type = st.getTensorType();
      s.sharded = st.getOfAttr() && module.lookupSymbol<FlatBufferOp>(st.getOfAttr());
    } else if (auto f = dyn_cast<FlatBufferOp>(op)) {
      if (f.getRole() == SlotRole::params_sharded)
        continue; // only its shard (a ds.state) is stored
      s.name = f.getSymName().str();
      s.role = f.getRole();
      s.type = f.getTensorType();
      s.pinned = true;
    } else {
      continue;
    }
    if (auto st = op.getAttrOfType<DenseI64ArrayAttr>(kStagesAttrName))
      s.stages.assign(st.asArrayRef().begin(), st.asArrayRef().end());
    if (auto sp = op.getAttrOfType<MemorySpaceAttr>(kMemorySpaceAttrName))
      s.space = sp.getValue();
    if (dtypeCodeOf(s.type.getElementType()) < 0)
      return op.emitError() << "ds-lower-to-runtime: unsupported element type "
                            << s.type.getElementType();
    table.index_[s.name] = slots.size();
    slots.push_back(std::move(s));
  }
  // Members of partitioned buffers exist only in their shard state (stage 3); members of the
  // other flat buffers are views at their running offsets.
  for (auto f : module.getOps<FlatBufferOp>()) {
    bool partitioned = f.getRole() == SlotRole::params_sharded;
    int base = table.indexOf(partitioned ? (f.getSymName() + "@shard").str() : f.getSymName());
    int64_t offset = 0;
    for (Attribute a : f.getMembers()) {
      PlannedSlot &m = slots[table.indexOf(cast<FlatSymbolRefAttr>(a).getValue())];
      (partitioned ? m.shardOf : m.viewOf) = base;
      m.offset = offset;
      m.pinned = m.pinned || !partitioned;
      offset += m.type.getNumElements();
    }
  }
  return table;
}

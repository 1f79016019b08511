//===- DSAttrs.cpp - verifiers of the mesh and sharding attributes ---------===//
#include "ds/IR/DSDialect.h"

#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::ds;

LogicalResult MeshAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<StringAttr> axes, ArrayRef<int64_t> shape) {
  if (axes.size() != shape.size())
    return emitError() << "mesh has " << axes.size() << " axes but " << shape.size()
                       << " sizes";
  llvm::StringSet<> seen;
  for (auto [name, size] : llvm::zip(axes, shape)) {
    if (name.getValue().empty())
      return emitError() << "mesh axis names must not be empty";
    if (!symbolizeMeshAxis(name.getValue()))
      return emitError() << "mesh axis '" << name.getValue()
                         << "' is not a role: name axes dp, pp, tp or sp";
    if (!seen.insert(name.getValue()).second)
      return emitError() << "mesh axis '" << name.getValue() << "' appears twice";
    if (size < 1)
      return emitError() << "mesh axis '" << name.getValue() << "' has size " << size
                         << "; sizes must be >= 1";
  }
  return success();
}

int64_t MeshAttr::getNumRanks() const {
  int64_t n = 1;
  for (int64_t s : getShape())
    n *= s;
  return n;
}

int64_t MeshAttr::findAxis(StringRef name) const {
  for (auto [i, axis] : llvm::enumerate(getAxes()))
    if (axis.getValue() == name)
      return i;
  return -1;
}

int64_t MeshAttr::findAxis(MeshAxis role) const { return findAxis(stringifyMeshAxis(role)); }

int64_t MeshAttr::getSize(MeshAxis role) const {
  int64_t i = findAxis(role);
  return i < 0 ? 1 : getShape()[i];
}

std::string MeshAttr::str() const {
  std::string s;
  for (auto [i, axis] : llvm::enumerate(getAxes()))
    s += (i ? " x " : "") + axis.getValue().str() + "=" + std::to_string(getShape()[i]);
  return s;
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   ArrayAttr dims, ArrayRef<int64_t> segments) {
  if (!segments.empty() && segments.size() != dims.size())
    return emitError() << "sharding has " << segments.size() << " segment counts for "
                       << dims.size() << " dimensions";
  for (int64_t s : segments)
    if (s < 1)
      return emitError() << "sharding segment counts must be >= 1, not " << s;
  llvm::StringSet<> seen;
  for (Attribute dim : dims) {
    auto axes = dyn_cast<ArrayAttr>(dim);
    if (!axes)
      return emitError() << "each sharding entry must be a list of mesh axis names";
    for (Attribute axis : axes) {
      auto name = dyn_cast<StringAttr>(axis);
      if (!name || name.getValue().empty())
        return emitError() << "mesh axis names in a sharding must be non-empty strings";
      if (!seen.insert(name.getValue()).second)
        return emitError() << "mesh axis '" << name.getValue()
                           << "' shards more than one dimension";
    }
  }
  return success();
}

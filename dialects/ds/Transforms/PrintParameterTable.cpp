//===- PrintParameterTable.cpp - the ds-print-parameter-table pass ---------===//
#include "ds/Transforms/Passes.h"

#include "ds/IR/DSShapes.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSPRINTPARAMETERTABLE
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {
struct Row {
  std::string name, shape, dtype, kind, tied;
  int64_t elements = 0, bytes = 0;
};

std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

struct PrintParameterTablePass
    : mlir::ds::impl::DSPrintParameterTableBase<PrintParameterTablePass> {
  using DSPrintParameterTableBase::DSPrintParameterTableBase;
  void runOnOperation() override;
};
} // namespace

void PrintParameterTablePass::runOnOperation() {
  std::vector<Row> rows;
  int64_t paramElems = 0, paramBytes = 0, bufElems = 0, bufBytes = 0, numParams = 0;
  for (auto param : getOperation().getOps<ParameterOp>()) {
    RankedTensorType type = param.getTensorType();
    Row row;
    row.name = param.getSymName().str();
    row.shape = formatShape(type.getShape());
    row.dtype = typeName(type.getElementType());
    row.kind = stringifySlotRole(param.getRole()).str();
    row.elements = type.getNumElements();
    row.bytes = row.elements * std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
    SmallVector<StringRef> names = param.getNames();
    row.tied = llvm::join(llvm::ArrayRef(names).drop_front(), ", ");
    (param.getTrainable() ? paramElems : bufElems) += row.elements;
    (param.getTrainable() ? paramBytes : bufBytes) += row.bytes;
    numParams += param.getTrainable();
    rows.push_back(std::move(row));
  }
  size_t wName = 4, wShape = 5;
  for (const Row &r : rows) {
    wName = std::max(wName, r.name.size());
    wShape = std::max(wShape, r.shape.size());
  }
  llvm::raw_ostream &os = llvm::outs();
  os << llvm::left_justify("name", wName) << "  " << llvm::left_justify("shape", wShape)
     << "  dtype  kind       " << llvm::right_justify("elements", 10) << "  "
     << llvm::right_justify("bytes", 12) << "  tied to\n";
  for (const Row &r : rows)
    os << llvm::left_justify(r.name, wName) << "  " << llvm::left_justify(r.shape, wShape)
       << "  " << llvm::left_justify(r.dtype, 5) << "  " << llvm::left_justify(r.kind, 9)
       << "  " << llvm::right_justify(std::to_string(r.elements), 10) << "  "
       << llvm::right_justify(std::to_string(r.bytes), 12) << "  " << r.tied << "\n";
  os << "total: " << numParams << " parameters, " << paramElems << " elements, " << paramBytes
     << " bytes; " << rows.size() - numParams << " buffers, " << bufElems << " elements, "
     << bufBytes << " bytes\n";
  os.flush();
  markAllAnalysesPreserved();
}

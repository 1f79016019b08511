//===- KernelPatterns.cpp - the kernel pattern table ----------------------------===//
#include "KernelPatterns.h"

using namespace mlir;
using namespace mlir::ds::runtime;

Arg<const int64_t *> KernelEmitter::i64Array(ArrayRef<int64_t> values) {
  SmallVector<int64_t> v(values);
  if (v.empty())
    v.push_back(0); // a valid pointer for rank 0
  auto type = RankedTensorType::get({static_cast<int64_t>(v.size())},
                                    IntegerType::get(mlirContext(), 64));
  return Arg<const int64_t *>(DenseElementsAttr::get(type, ArrayRef<int64_t>(v)));
}

void KernelPatterns::insert(TypeID id, KernelLowering lower, bool optionalResults,
                            bool elementwise) {
  table[id] = Entry{std::move(lower), optionalResults, elementwise};
}

const KernelPatterns::Entry *KernelPatterns::lookup(Operation *op) const {
  std::optional<RegisteredOperationName> name = op->getRegisteredInfo();
  if (!name)
    return nullptr;
  auto it = table.find(name->getTypeID());
  return it == table.end() ? nullptr : &it->second;
}

void mlir::ds::runtime::populateKernelPatterns(KernelPatterns &patterns) {
  populateElementwiseKernels(patterns);
  populateReductionKernels(patterns);
  populateNormalizationKernels(patterns);
  populateLinearAlgebraKernels(patterns);
  populateConvolutionKernels(patterns);
  populateDataMovementKernels(patterns);
}

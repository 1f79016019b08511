//===- KernelPatterns.cpp - the kernel pattern table ----------------------------===//
#include "KernelPatterns.h"

using namespace mlir;
using namespace mlir::ds::runtime;

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

//===- KernelPatterns.cpp - every family's kernel patterns -----------------------===//
#include "RuntimeLowering.h"

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

void mlir::ds::runtime::populateKernelPatterns(KernelPatterns &patterns) {
  populateElementwiseKernels(patterns);
  populateReductionKernels(patterns);
  populateNormalizationKernels(patterns);
  populateAttentionKernels(patterns);
  populateLinearAlgebraKernels(patterns);
  populateExpertKernels(patterns);
  populateConvolutionKernels(patterns);
  populateDataMovementKernels(patterns);
  populateGenerationKernels(patterns);
}

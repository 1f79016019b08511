//===- CustomOps.cpp - model libraries' custom operators that exports call --------===//
//
// A .pt2 may call an operator that a Python library registers when it is imported (HF
// transformers' grouped_mm_fallback, its grouped_mm experts on the CPU). ds-reference runs the
// program in LibTorch and the importer reads the operator's schema, so such an operator is
// registered here, with a reference implementation in ATen ops that autograd differentiates,
// the first time a program calls it, unless the process already has it (a Python process
// that imported the library).
//
#include "ExportedProgram.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <memory>
#include <mutex>

namespace {

/// transformers::grouped_mm_fallback(input [S, in], weight [E, in, out], offs [E]): the rows
/// offs[e-1] .. offs[e] of the input (sorted by expert) times weight[e]; rows past offs[E-1]
/// are zeros, as transformers/integrations/moe.py computes it.
at::Tensor groupedMmFallback(const at::Tensor &input, const at::Tensor &weight,
                             const at::Tensor &offs) {
  at::Tensor ends = offs.to(at::kLong).cpu();
  std::vector<at::Tensor> parts;
  int64_t start = 0;
  for (int64_t e = 0; e < weight.size(0); ++e) {
    int64_t end = std::min<int64_t>(ends[e].item<int64_t>(), input.size(0));
    if (end > start)
      parts.push_back(at::mm(input.slice(0, start, end), weight[e]));
    start = std::max(start, end);
  }
  if (start < input.size(0))
    parts.push_back(at::zeros({input.size(0) - start, weight.size(2)}, input.options()));
  return at::cat(parts, 0);
}

struct Registered {
  std::unique_ptr<torch::Library> transformers;
};

} // namespace

void mlir::ds::ensureModelCustomOp(const std::string &qualifiedName) {
  static std::mutex lock;
  static Registered registered;
  std::lock_guard<std::mutex> guard(lock);
  if (qualifiedName != "transformers::grouped_mm_fallback" || registered.transformers ||
      c10::Dispatcher::singleton().findSchema({qualifiedName, ""}))
    return;
  registered.transformers = std::make_unique<torch::Library>(
      torch::Library::FRAGMENT, "transformers", std::nullopt, __FILE__, __LINE__);
  registered.transformers->def(
      "grouped_mm_fallback(Tensor input, Tensor weight, Tensor offs) -> Tensor",
      torch::dispatch(c10::DispatchKey::CompositeImplicitAutograd, &groupedMmFallback));
}

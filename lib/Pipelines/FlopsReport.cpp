//===- FlopsReport.cpp - each rank's floating-point work per step --------------===//
//
// ds-opt --flops-report: sums the cost model (CostOpInterface) over the training step: per
// function (gradient_accumulation_steps micro-steps, then the update), the FLOPs, those of the
// matrix products (what PyTorch's FlopCounterMode counts) and the bytes read and written; then
// the ops with the most FLOPs. Per rank: every rank runs the same program; on a pipeline, each
// rank's program and update are rows of their own, and the step's total is the stages' sum.
//
#include "ds/Pipelines/Pipelines.h"

#include "ds/IR/DSOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <map>

using namespace mlir;
using namespace mlir::ds;

LogicalResult mlir::ds::printFlopsReport(ModuleOp module, llvm::raw_ostream &os) {
  const int64_t gas = gradientAccumulationSteps(module);
  // The functions of a step, with their calls per step.
  SmallVector<std::pair<func::FuncOp, int64_t>> functions;
  PipelineAttr info = getPipeline(module);
  const int64_t stages = info ? info.getStages() : 1;
  if (module.lookupSymbol(pipelineStepName(0))) {
    for (int64_t r = 0; r < stages; ++r)
      for (StringRef name : {StringRef(kPipelineStepPrefix), StringRef(kOptimizerStepPrefix)})
        if (auto f = module.lookupSymbol<func::FuncOp>((name + Twine(r)).str()))
          functions.push_back({f, 1});
  } else if (auto micro = module.lookupSymbol<func::FuncOp>(kMicroStepName)) {
    functions.push_back({micro, gas});
    if (auto opt = module.lookupSymbol<func::FuncOp>(kOptimizerStepName))
      functions.push_back({opt, 1});
  }
  if (functions.size() < 2)
    return module.emitError() << "--flops-report needs a training step (@micro_step and "
                                 "@optimizer_step, or ds-pipeline's per-rank programs): pass "
                                 "--config to a TorchScript input";
  struct Sum {
    int64_t flops = 0, matmul = 0, bytes = 0, count = 0;
  };
  std::map<std::string, Sum> byOp;
  auto total = [&](func::FuncOp f, int64_t times) {
    Sum s;
    f.walk([&](CostOpInterface c) {
      Sum one{c.getFlops(), c.getMatmulFlops(), c.getMemoryBytes(), 1};
      s.flops += one.flops;
      s.matmul += one.matmul;
      s.bytes += one.bytes;
      Sum &o = byOp[c->getName().getStringRef().str()];
      o.flops += times * one.flops;
      o.matmul += times * one.matmul;
      o.bytes += times * one.bytes;
      o.count += times;
    });
    return s;
  };
  auto mesh = module->getAttrOfType<MeshAttr>(kMeshAttrName);
  if (stages > 1)
    os << "FLOPs per pipeline rank and step (its program of " << gas << " micro-batch"
       << (gas == 1 ? "" : "es") << " and its update";
  else
    os << "FLOPs per rank and step (" << gas << " micro-step" << (gas == 1 ? "" : "s")
       << " and the update";
  if (mesh)
    os << "; mesh " << mesh.str();
  os << "), counted as PyTorch's FlopCounterMode counts them (a multiply-add is 2; matmul: the "
        "matrix products)\n";
  os << llvm::format("%-18s %6s %16s %16s %14s\n", "function", "calls", "flops", "matmul flops",
                     "bytes");
  auto row = [&](StringRef name, int64_t calls, const Sum &s) {
    os << llvm::format("%-18s %6lld %16lld %16lld %14lld\n", name.str().c_str(),
                       (long long)calls, (long long)s.flops, (long long)s.matmul,
                       (long long)s.bytes);
  };
  Sum step;
  for (auto [f, calls] : functions) {
    Sum one = total(f, calls);
    row(f.getSymName(), calls, one);
    step.flops += calls * one.flops;
    step.matmul += calls * one.matmul;
    step.bytes += calls * one.bytes;
  }
  row(stages > 1 ? "step (all stages)" : "step", 1, step);
  // The op kinds with the most FLOPs over the step.
  std::vector<std::pair<std::string, Sum>> ops(byOp.begin(), byOp.end());
  std::stable_sort(ops.begin(), ops.end(),
                   [](const auto &a, const auto &b) { return a.second.flops > b.second.flops; });
  os << llvm::format("%-24s %8s %16s %7s %14s\n", "op", "calls", "flops", "share", "bytes");
  for (size_t i = 0; i < ops.size() && i < 10 && ops[i].second.flops > 0; ++i)
    os << llvm::format("%-24s %8lld %16lld %6.1f%% %14lld\n", ops[i].first.c_str(),
                       (long long)ops[i].second.count, (long long)ops[i].second.flops,
                       step.flops ? 100.0 * ops[i].second.flops / step.flops : 0.0,
                       (long long)ops[i].second.bytes);
  return success();
}

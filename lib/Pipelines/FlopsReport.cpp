//===- FlopsReport.cpp - each rank's floating-point work per step --------------===//
//
// ds-opt --flops-report: sums the cost model (CostOpInterface) over the training step: per
// function (gradient_accumulation_steps micro-steps, then the update), the FLOPs, those of the
// matrix products (what PyTorch's FlopCounterMode counts) and the bytes read and written; then
// the ops with the most FLOPs. Per rank: every rank runs the same program.
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
  auto micro = module.lookupSymbol<func::FuncOp>("micro_step");
  auto opt = module.lookupSymbol<func::FuncOp>("optimizer_step");
  if (!micro || !opt)
    return module.emitError() << "--flops-report needs a training step (@micro_step and "
                                 "@optimizer_step): pass --config to a TorchScript input";
  const int64_t gas = gradientAccumulationSteps(module);
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
  Sum m = total(micro, gas), u = total(opt, 1);
  auto mesh = module->getAttrOfType<MeshAttr>(kMeshAttrName);
  os << "FLOPs per rank and step (" << gas << " micro-step" << (gas == 1 ? "" : "s")
     << " and the update";
  if (mesh)
    os << "; mesh " << mesh.str();
  os << "), counted as PyTorch's FlopCounterMode counts them (a multiply-add is 2; matmul: the "
        "matrix products)\n";
  os << llvm::format("%-16s %6s %16s %16s %14s\n", "function", "calls", "flops", "matmul flops",
                     "bytes");
  auto row = [&](const char *name, int64_t calls, const Sum &s) {
    os << llvm::format("%-16s %6lld %16lld %16lld %14lld\n", name, (long long)calls,
                       (long long)s.flops, (long long)s.matmul, (long long)s.bytes);
  };
  row("micro_step", gas, m);
  row("optimizer_step", 1, u);
  Sum step{gas * m.flops + u.flops, gas * m.matmul + u.matmul, gas * m.bytes + u.bytes, 0};
  row("step", 1, step);
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

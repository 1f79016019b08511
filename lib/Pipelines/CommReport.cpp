//===- CommReport.cpp - each rank's collectives per step, by mesh axis --------===//
//
// ds-opt --comm-report: reads the training step's collectives (upstream shard ops on the
// mesh's grid) and counts, per mesh axis group, how many each rank issues in one optimizer
// step (gradient_accumulation_steps micro-steps, then the update) and their message bytes.
// Every rank runs the same program on parts of the same sizes (ds-verify-collectives), so the
// rows are every rank's.
//
#include "ds/Pipelines/Pipelines.h"

#include "ds/IR/DSDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

#include <map>

using namespace mlir;
using namespace mlir::ds;

namespace {
int64_t tensorBytes(Type t) {
  auto rt = cast<RankedTensorType>(t);
  int64_t bits = rt.getElementType().getIntOrFloatBitWidth();
  return rt.getNumElements() * std::max<int64_t>(1, bits / 8);
}
} // namespace

int64_t mlir::ds::gradientAccumulationSteps(ModuleOp module) {
  int64_t gas = 1;
  if (auto cfg = module->getAttrOfType<StringAttr>("ds.config")) {
    if (auto parsed = llvm::json::parse(cfg.getValue())) {
      if (auto *o = parsed->getAsObject())
        gas = o->getInteger("gradient_accumulation_steps").value_or(1);
    } else {
      llvm::consumeError(parsed.takeError());
    }
  }
  return gas;
}

LogicalResult mlir::ds::printCommReport(ModuleOp module, llvm::raw_ostream &os) {
  auto micro = module.lookupSymbol<func::FuncOp>("micro_step");
  auto opt = module.lookupSymbol<func::FuncOp>("optimizer_step");
  if (!micro || !opt)
    return module.emitError() << "--comm-report needs a training step (@micro_step and "
                                 "@optimizer_step): pass --config to a TorchScript input";
  const int64_t gas = gradientAccumulationSteps(module);
  auto mesh = module->getAttrOfType<MeshAttr>(kMeshAttrName);
  // (axes, collective) -> count and bytes per step.
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, int64_t>> rows;
  auto axesName = [&](Operation *op) {
    auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
    std::string s;
    if (!mesh || !axes || axes.empty())
      return std::string("all");
    for (int16_t a : axes.asArrayRef())
      s += (s.empty() ? "" : "+") +
           (a < static_cast<int64_t>(mesh.getAxes().size()) ? mesh.getAxes()[a].getValue().str()
                                                             : std::to_string(a));
    return s;
  };
  auto count = [&](func::FuncOp f, int64_t times) {
    f.walk([&](Operation *op) {
      int64_t bytes;
      if (isa<shard::AllReduceOp, shard::ReduceScatterOp, shard::AllToAllOp>(op))
        bytes = tensorBytes(op->getOperand(0).getType());
      else if (isa<shard::AllGatherOp>(op))
        bytes = tensorBytes(op->getResult(0).getType());
      else
        return; // all_slice is a view: no communication
      auto &row = rows[{axesName(op), op->getName().stripDialect().str()}];
      row.first += times;
      row.second += times * bytes;
    });
  };
  count(micro, gas);
  count(opt, 1);
  int64_t ranks = mesh ? mesh.getNumRanks() : 1;
  os << "collectives per rank and step (" << gas << " micro-step" << (gas == 1 ? "" : "s")
     << " and the update; " << ranks << " rank" << (ranks == 1 ? "" : "s");
  if (mesh)
    os << ", mesh " << mesh.str();
  os << "; bytes are each call's tensor, as DeepSpeed's comms logger counts them)\n";
  os << llvm::format("%-8s %-16s %10s %16s\n", "axis", "collective", "calls", "bytes");
  int64_t calls = 0, total = 0;
  for (auto &[key, row] : rows) {
    os << llvm::format("%-8s %-16s %10lld %16lld\n", key.first.c_str(), key.second.c_str(),
                       (long long)row.first, (long long)row.second);
    calls += row.first;
    total += row.second;
  }
  os << llvm::format("%-8s %-16s %10lld %16lld\n", "total", "", (long long)calls,
                     (long long)total);
  return success();
}

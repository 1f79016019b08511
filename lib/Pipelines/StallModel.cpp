//===- StallModel.cpp - the offload schedule's predicted stall --------------===//
//
// Replays a training step's two streams as the runtime runs them: the compute stream runs the
// ops in order (each taking the longer of its FLOPs at the compute rate and its bytes at the
// memory bandwidth, from the cost model), the transfer stream runs the moves and NVMe reads
// and writes in the order they are issued (bytes at the tier's bandwidth, never before the
// compute stream reaches the issuing op), and the compute stream waits at the first use of a
// transfer's result. The stall is the sum of those waits, plus the writes still in flight at
// the end of each function.
//
//===----------------------------------------------------------------------===//
#include "ds/Pipelines/Pipelines.h"

#include "ds/IR/DSDialect.h"
#include "ds/IR/DSShapes.h"
#include "ds/IR/DSOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::ds;

bool TierRates::parse(llvm::StringRef spec, std::string &err) {
  llvm::SmallVector<llvm::StringRef> items;
  spec.split(items, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef item : items) {
    auto [key, value] = item.split('=');
    key = key.trim();
    double v = 0;
    if (value.trim().getAsDouble(v) || v <= 0) {
      err = "--rates: '" + item.str() + "' needs a positive number (KEY=VALUE)";
      return false;
    }
    if (key == "d2h")
      d2h = v * 1e9;
    else if (key == "h2d")
      h2d = v * 1e9;
    else if (key == "nvme_read")
      nvmeRead = v * 1e9;
    else if (key == "nvme_write")
      nvmeWrite = v * 1e9;
    else if (key == "flops")
      flops = v * 1e9;
    else if (key == "memory")
      memory = v * 1e9;
    else {
      err = "--rates: unknown key '" + key.str() +
            "' (d2h, h2d, nvme_read, nvme_write, memory in GB/s; flops in GFLOP/s)";
      return false;
    }
  }
  if (!d2h || !h2d || !nvmeRead || !nvmeWrite || !flops || !memory) {
    err = "--rates needs d2h, h2d, nvme_read, nvme_write, memory (GB/s) and flops (GFLOP/s); "
          "ds-run --probe-bandwidth DIR measures them and prints the flag";
    return false;
  }
  return true;
}

namespace {
int64_t bytesOf(Type t) { return tensorBytes(t); }

/// The NVMe states of the module.
llvm::StringSet<> nvmeStates(ModuleOp module) {
  llvm::StringSet<> out;
  for (Operation &op : *module.getBody())
    if (auto sp = op.getAttrOfType<MemorySpaceAttr>(kMemorySpaceAttrName);
        sp && sp.getValue() == MemorySpace::nvme)
      if (auto sym = op.getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName()))
        out.insert(sym.getValue());
  return out;
}

/// One call of `func`: adds its compute, transfer and stall seconds.
void replay(func::FuncOp func, const llvm::StringSet<> &nvme, const TierRates &r,
            StallPrediction &p) {
  double compute = 0, transfer = 0;
  llvm::DenseMap<Value, double> ready;
  auto issue = [&](double seconds) {
    transfer = std::max(transfer, compute) + seconds;
    p.transferSeconds += seconds;
    return transfer;
  };
  for (Operation &op : func.getBody().front()) {
    if (isa<func::ReturnOp>(op))
      break;
    if (auto m = dyn_cast<MoveOp>(op)) {
      double bw = 0;
      switch (m.getTo()) {
      case MemorySpace::host:
        bw = r.d2h;
        break;
      case MemorySpace::device:
        bw = r.h2d;
        break;
      case MemorySpace::nvme: // the verifier refuses moves to nvme (a slot's space only)
        bw = r.nvmeWrite;
        break;
      }
      ready[m.getResult()] = issue(bytesOf(m.getType()) / bw);
      continue;
    }
    if (auto g = dyn_cast<GetParameterOp>(op)) {
      if (nvme.contains(g.getName()))
        ready[g.getResult()] = issue(bytesOf(g.getType()) / r.nvmeRead);
      continue;
    }
    if (auto a = dyn_cast<AssignOp>(op); a && nvme.contains(a.getName())) {
      issue(bytesOf(a.getValue().getType()) / r.nvmeWrite);
      continue;
    }
    for (Value v : op.getOperands())
      if (auto it = ready.find(v); it != ready.end() && it->second > compute) {
        p.stallSeconds += it->second - compute;
        compute = it->second;
      }
    if (auto c = dyn_cast<CostOpInterface>(op)) {
      double seconds = std::max(c.getFlops() / r.flops, c.getMemoryBytes() / r.memory);
      compute += seconds;
      p.computeSeconds += seconds;
    }
  }
  // The writes still in flight are waited for before the function returns.
  if (transfer > compute)
    p.stallSeconds += transfer - compute;
}
} // namespace

FailureOr<StallPrediction> mlir::ds::predictStall(ModuleOp module, const TierRates &rates) {
  auto micro = module.lookupSymbol<func::FuncOp>(kMicroStepName);
  auto opt = module.lookupSymbol<func::FuncOp>(kOptimizerStepName);
  if (!micro || !opt)
    return module.emitError() << "the stall prediction needs @micro_step and @optimizer_step";
  llvm::StringSet<> nvme = nvmeStates(module);
  StallPrediction p;
  int64_t gas = gradientAccumulationSteps(module);
  for (int64_t k = 0; k < gas; ++k)
    replay(micro, nvme, rates, p);
  replay(opt, nvme, rates, p);
  return p;
}

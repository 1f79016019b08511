//===- MemoryReport.cpp - each rank's memory from the compiler's plan -------===//
//
// ds-opt --memory-report: lowers a copy of the step as ds-run would and reads the exact buffer
// plan that the lowering embeds, then splits its peak into DeepSpeed's categories.
//
#include "ds/Pipelines/Pipelines.h"

#include "dsrt/dsrt.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

using namespace mlir;

namespace {
int64_t number(const llvm::json::Object *o, llvm::StringRef key) {
  if (!o)
    return 0;
  if (auto v = o->getInteger(key))
    return *v;
  return 0;
}
} // namespace

LogicalResult mlir::ds::printMemoryReport(ModuleOp module, llvm::raw_ostream &os,
                                          const TierRates *rates) {
  bool pipelined = module.lookupSymbol("pipeline_step_0") && module.lookupSymbol("optimizer_step_0");
  if (!pipelined && (!module.lookupSymbol("micro_step") || !module.lookupSymbol("optimizer_step")))
    return module.emitError() << "--memory-report needs a training step (@micro_step and "
                                 "@optimizer_step): pass --config to a TorchScript input";
  OwningOpRef<ModuleOp> copy = module.clone();
  if (failed(lowerStepToLLVM(*copy)))
    return failure();
  auto global = copy->lookupSymbol<LLVM::GlobalOp>("__ds_metadata");
  auto text = global ? dyn_cast_or_null<StringAttr>(global.getValueOrNull()) : StringAttr();
  if (!text)
    return module.emitError() << "--memory-report: the lowering left no plan";
  llvm::Expected<llvm::json::Value> meta = llvm::json::parse(text.getValue().drop_back());
  if (!meta) {
    llvm::consumeError(meta.takeError());
    return module.emitError() << "--memory-report: the plan is not JSON";
  }
  const llvm::json::Object *root = meta->getAsObject();
  const llvm::json::Object *plan = root->getObject("plan");

  // Persistent bytes by category on pipeline stage `ppRank` (-1: every slot); views of flat
  // buffers are counted in their buffer.
  struct Row {
    int64_t params = 0, grads = 0, optim = 0, buffers = 0, peak = 0, comm = 0, inputs = 0;
    int64_t activations = 0;
    bool microPeak = true;
  };
  const llvm::json::Object *pipe = root->getObject("pipeline");
  auto rowOf = [&](int64_t ppRank) {
    Row row;
    for (const llvm::json::Value &v : *root->getArray("slots")) {
      const llvm::json::Object *s = v.getAsObject();
      if (s->get("view_of") || s->get("sharded_by"))
        continue; // no storage of its own: part of a flat buffer or of a parameter shard
      if (const llvm::json::Array *st = s->getArray("stages"); st && ppRank >= 0 &&
          llvm::none_of(*st, [&](const llvm::json::Value &r) { return r.getAsInteger() == ppRank; }))
        continue; // another stage's
      int64_t n = 1;
      for (const llvm::json::Value &d : *s->getArray("dims"))
        n *= *d.getAsInteger();
      llvm::StringRef dtype = *s->getString("dtype");
      int64_t bytes = n * (dtype == "f64" || dtype == "i64"   ? 8
                           : dtype == "bf16" || dtype == "f16" ? 2
                           : dtype == "i1"                     ? 1
                                                               : 4);
      if (s->getString("space")) // offloaded: in host memory or the swap file
        continue;
      // The runtime's categories (the log's ranks entries).
      int32_t role = dsrt_slot_role_from_name(s->getString("role")->str().c_str());
      switch (dsrt_slot_role_category(static_cast<dsrt_slot_role>(role))) {
      case DSRT_CATEGORY_PARAMETERS:
        row.params += bytes;
        break;
      case DSRT_CATEGORY_GRADIENTS:
        row.grads += bytes;
        break;
      case DSRT_CATEGORY_OPTIMIZER_STATE:
        row.optim += bytes;
        break;
      case DSRT_CATEGORY_BUFFERS:
        row.buffers += bytes;
        break;
      case DSRT_CATEGORY_NONE:
        break;
      }
    }
    const llvm::json::Object *at = plan;
    if (pipe && ppRank >= 0)
      if (const llvm::json::Array *ranks = pipe->getArray("ranks");
          ranks && ppRank < (int64_t)ranks->size())
        at = (*ranks)[ppRank].getAsObject();
    int64_t micro = number(at, pipe ? "step_peak_bytes" : "micro_step_peak_bytes");
    int64_t opt = number(at, "optimizer_step_peak_bytes");
    row.microPeak = micro >= opt;
    row.peak = std::max(micro, opt);
    row.comm = number(at, row.microPeak ? (pipe ? "step_communication_bytes"
                                                : "micro_step_communication_bytes")
                                        : "optimizer_step_communication_bytes");
    row.inputs = row.microPeak ? number(plan, "input_bytes") : 0;
    row.activations = row.peak - row.params - row.grads - row.optim - row.buffers - row.comm -
                      row.inputs;
    return row;
  };
  Row whole = rowOf(-1);

  auto run = module->getAttrOfType<RunAttr>(kRunAttrName);
  int64_t stage = run ? run.getZeroStage() : 0;
  // The mesh: every rank and its coordinate (row-major, the last axis fastest).
  SmallVector<std::string> axes;
  SmallVector<int64_t> shape;
  if (const llvm::json::Object *mesh = root->getObject("mesh")) {
    for (const llvm::json::Value &a : *mesh->getArray("axes"))
      axes.push_back(a.getAsString()->str());
    for (const llvm::json::Value &n : *mesh->getArray("shape"))
      shape.push_back(*n.getAsInteger());
  }
  int64_t ranks = 1;
  std::string meshText;
  for (auto [i, a] : llvm::enumerate(axes)) {
    ranks *= shape[i];
    meshText += (i ? " x " : "") + a + "=" + std::to_string(shape[i]);
  }
  os << "memory plan per rank (bytes; ZeRO stage " << stage << ", " << ranks << " rank"
     << (ranks == 1 ? "" : "s");
  if (axes.size() > 1)
    os << ", mesh " << meshText;
  if (pipe)
    os << ", " << number(pipe, "micro_batches") << " micro-batches per step in each rank's "
       << pipe->getString("schedule").value_or("") << " program";
  else
    os << ", peak in " << (whole.microPeak ? "micro_step" : "optimizer_step");
  os << ")\n";
  // Columns only ever get added at the end, so that scripts reading them keep working.
  os << llvm::format("%-5s %14s %14s %14s %14s %14s %14s %14s %14s  %s\n", "rank", "parameters",
                     "gradients", "optimizer", "activations", "inputs", "communication",
                     "peak", "buffers", "mesh");
  // Every rank runs the same program (ds-verify-collectives) on parts of the same sizes, so
  // every rank has this plan; on a pipeline, its stage's (the coordinate's pp).
  for (int64_t r = 0; r < ranks; ++r) {
    std::string coord;
    int64_t rest = r, pp = -1;
    for (size_t i = axes.size(); i-- > 0;) {
      coord = axes[i] + std::to_string(rest % shape[i]) + (coord.empty() ? "" : ",") + coord;
      if (axes[i] == "pp")
        pp = rest % shape[i];
      rest /= shape[i];
    }
    Row row = pipe ? rowOf(pp) : whole;
    os << llvm::format("%-5lld %14lld %14lld %14lld %14lld %14lld %14lld %14lld %14lld  %s\n",
                       (long long)r, (long long)row.params, (long long)row.grads,
                       (long long)row.optim, (long long)row.activations, (long long)row.inputs,
                       (long long)row.comm, (long long)row.peak, (long long)row.buffers,
                       coord.c_str());
  }
  // ds-activation-checkpoint's cost.
  if (int64_t flops = recomputedFlops(module))
    os << "recomputed per rank and step (activation checkpointing): " << flops << " FLOPs\n";
  // ds-offload's spaces: what lives off the device and what moves per step.
  if (const llvm::json::Object *moved = plan->getObject("moved_bytes_per_step")) {
    int64_t offParams = 0, offGrads = 0, offOptim = 0;
    for (const llvm::json::Value &v : *root->getArray("slots")) {
      const llvm::json::Object *s = v.getAsObject();
      if (!s->getString("space"))
        continue;
      int64_t n = 4;
      for (const llvm::json::Value &d : *s->getArray("dims"))
        n *= *d.getAsInteger();
      int32_t role = dsrt_slot_role_from_name(s->getString("role")->str().c_str());
      switch (dsrt_slot_role_category(static_cast<dsrt_slot_role>(role))) {
      case DSRT_CATEGORY_PARAMETERS:
        offParams += n;
        break;
      case DSRT_CATEGORY_GRADIENTS:
        offGrads += n;
        break;
      case DSRT_CATEGORY_OPTIMIZER_STATE:
      case DSRT_CATEGORY_BUFFERS:
      case DSRT_CATEGORY_NONE:
        offOptim += n;
        break;
      }
    }
    os << "offloaded per rank (bytes): parameters " << offParams << ", gradients " << offGrads
       << ", optimizer " << offOptim << "; host peak " << number(plan, "host_peak_bytes")
       << " (offloaded state in host memory " << number(plan, "host_persistent_bytes")
       << ", the rest staging and the host optimizer's work), NVMe " << number(plan, "nvme_bytes")
       << "\n";
    os << "moved per rank and step (bytes): device->host " << number(moved, "device_to_host")
       << ", host->device " << number(moved, "host_to_device") << ", host->NVMe "
       << number(moved, "host_to_nvme") << ", NVMe->host " << number(moved, "nvme_to_host")
       << "\n";
    if (rates) {
      FailureOr<StallPrediction> p = predictStall(module, *rates);
      if (failed(p))
        return failure();
      os << llvm::format("predicted per step at --rates: compute %.1f ms, transfers %.1f ms, "
                         "stall %.1f ms (compute waiting on a move)\n",
                         p->computeSeconds * 1e3, p->transferSeconds * 1e3,
                         p->stallSeconds * 1e3);
    } else {
      os << "(pass --rates to predict the stall; ds-run --probe-bandwidth DIR measures them)\n";
    }
  } else if (const llvm::json::Object *off = plan->getObject("offloadable")) {
    bool any = false;
    for (auto [key, label] : {std::pair{"optimizer", "offload_optimizer"},
                              std::pair{"param", "offload_param"}})
      if (int64_t bytes = number(off->getObject(key), "bytes")) {
        os << (any ? ", " : "offloadable per rank (bytes): ") << label << " " << bytes;
        any = true;
      }
    if (any)
      os << "\n";
  }
  // The parameters that each rank holds only a part of (ds-tensor-parallel).
  bool header = false;
  for (const llvm::json::Value &v : *root->getArray("slots")) {
    const llvm::json::Object *s = v.getAsObject();
    const llvm::json::Object *split = s->getObject("split");
    if (!split)
      continue;
    if (!header)
      os << "split parameters (each rank holds its part):\n";
    header = true;
    SmallVector<int64_t> dims;
    for (const llvm::json::Value &d : *s->getArray("dims"))
      dims.push_back(*d.getAsInteger());
    int64_t dim = number(split, "dim"), parts = number(split, "parts");
    int64_t segments = number(split, "segments");
    std::string local, whole;
    for (auto [i, d] : llvm::enumerate(dims)) {
      local += (i ? "x" : "") + std::to_string(d);
      whole += (i ? "x" : "") + std::to_string(static_cast<int64_t>(i) == dim ? d * parts : d);
    }
    os << "  " << *s->getString("name") << ": " << local << " of " << whole << ", dimension "
       << dim << " over " << *split->getString("axis");
    if (segments > 1)
      os << " in " << segments << " segments";
    os << "\n";
  }
  return success();
}

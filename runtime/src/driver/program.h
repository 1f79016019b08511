// What a compiled step declares in its metadata: its inputs, its persistent slots (parameters,
// buffers, gradients, optimizer state, ZeRO flat buffers and shards), its config and its
// memory plan; and the checks of a user's --config and --device-memory against it.
#ifndef DSRT_DRIVER_PROGRAM_H
#define DSRT_DRIVER_PROGRAM_H

#include "../checkpoint/index.h"
#include "dsrt/dsrt.h"
#include "dsrt/io.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dsrt::driver {

struct InputSpec {
  std::string name;
  int32_t dtype = -1;
  std::vector<int64_t> dims;
};

struct SlotSpec {
  std::string name, of;
  dsrt_slot_role role = DSRT_ROLE_PARAMETER;
  /// "parameter", "buffer", "gradient", "state" or "flat": the role's word in messages.
  const char *kind() const { return dsrt_slot_role_kind(role); }
  int32_t dtype = -1;
  std::vector<int64_t> dims;
  std::vector<std::string> aliases;
  bool sharded = false;  ///< a ZeRO shard: differs between ranks
  std::string viewOf;    ///< a member of this flat buffer
  std::string shardedBy; ///< stage 3: a parameter kept only as part of this shard slot
  int64_t offset = 0;    ///< at this element
  int64_t numel = 0;
  /// A parameter split over mesh axis `splitAxis` (tensor parallelism): `dims` are this
  /// rank's part of dimension `splitDim` of the state_dict tensor, which is `splitSegments`
  /// segments (equal, or of `splitSizes` rows) of which each of the `splitParts` ranks holds
  /// its part, back to back.
  int64_t splitDim = -1, splitSegments = 1, splitParts = 1;
  std::vector<int64_t> splitSizes;
  dsrt_mesh_axis splitAxis = DSRT_AXIS_TP;
  /// The state_dict tensor's dims (`dims` unless split).
  /// The split as the checkpoint's geometry describes it (whole when not split).
  ckpt::Split tensorSplit() const {
    return splitDim < 0 ? ckpt::Split{}
                        : ckpt::Split{splitDim, splitSegments, splitParts, splitSizes};
  }
  std::vector<int64_t> globalDims() const {
    std::vector<int64_t> g = dims;
    if (splitDim >= 0)
      g[splitDim] *= splitParts;
    return g;
  }
  uint64_t bytes() const { return static_cast<uint64_t>(numel) * io::elementSize(dtype); }
  /// A pipeline: the pp ranks (stages) that hold it; empty: every rank.
  std::vector<int64_t> stages;
  bool heldBy(int64_t ppRank) const {
    if (stages.empty())
      return true;
    for (int64_t r : stages)
      if (r == ppRank)
        return true;
    return false;
  }
};

/// fp16's loss scaler as compiled (the descriptor's "run.loss_scaler").
struct LossScalerSpec {
  bool dynamic = true;
  double scale = 0; ///< the initial (or static) scale
  int64_t window = 0, hysteresis = 0;
  bool consecutiveHysteresis = false;
  double minScale = 0;
};
/// The NVMe tier (the descriptor's "run.nvme"): the swap directory and its asynchronous I/O.
struct NvmeSpec {
  std::string path;
  int64_t blockSize = 0, queueDepth = 0;
  bool singleSubmit = false;
};

/// A compiled step's descriptor: what ds-lower-to-runtime wrote for the driver, under its own
/// field names (no DeepSpeed key is read here).
struct ProgramSpec {
  io::Json meta;
  std::vector<InputSpec> inputs;
  std::vector<SlotSpec> slots;
  /// The batch: G = mb x gas x dp (run.train_batch_size ...).
  int64_t G = 0, mb = 0, gas = 0, dp = 1, stepsPerPrint = 0;
  /// The configured ZeRO stage (fp16's loss scaler follows DeepSpeed's optimizer of it).
  int64_t zeroStage = 0;
  /// The mesh the program was compiled for (metadata "mesh"; one dp axis when absent).
  std::vector<dsrt_mesh_axis> meshAxes;
  std::vector<int64_t> meshShape;
  uint64_t seed = 0;
  dsrt_precision precision = DSRT_PRECISION_FP32;
  io::LrSchedule lr;
  bool lossScaling = false; ///< fp16: `lossScaler` holds the scaler
  LossScalerSpec lossScaler;
  bool hasNvme = false; ///< an NVMe tier: `nvme` holds it
  NvmeSpec nvme;
  /// A pipeline (metadata "pipeline"): its stages, and the micro-batches that one call of
  /// micro_step runs (all gas of the step); 1 and 1 otherwise.
  int64_t pipelineStages = 1, microBatchesPerCall = 1;
  /// The normalized config a user's --config is checked against (keys compared, not read).
  const io::Json &config() const { return *meta.get("config"); }
  /// The config's values that change the numbers, as JSON text (what checkpoints record).
  std::string numericConfig() const { return meta.get("numeric_config")->dump(); }
  /// The index of the slot named `name`, or -1.
  int32_t slotNamed(const std::string &name) const;
  /// "fp32", "bf16" or "fp16".
  std::string precisionName() const { return dsrt_precision_name(precision); }
};

/// Parses the program's metadata JSON; `err` says it is malformed and to recompile.
bool readProgram(const char *metadata, ProgramSpec &out, std::string &err);
/// A user's --config must agree with the compiled one on every key both set.
bool checkConfigFile(const std::string &path, const ProgramSpec &p, std::string &err);
/// The compiled plan's peak against --device-memory (0 = unlimited), naming the largest
/// buffers when it does not fit.
bool checkPlan(const ProgramSpec &p, uint64_t deviceMemory, std::string &err);

} // namespace dsrt::driver

#endif

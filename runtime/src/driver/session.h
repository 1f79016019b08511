// A training session: one compiled step joined to its rank group, its slots defined and its
// weights loaded, stepped by a caller. ds-run's loop (driver.cpp) and the C API's
// dsrt_session_* (the Python package's engine) both drive it: begin a step, run its micro-step
// calls on the caller's input tensors, end it (the optimizer update, fp16's scaler, the
// checkpoint and the log line). Every failure after joining the group passes an agreement point.
#ifndef DSRT_DRIVER_SESSION_H
#define DSRT_DRIVER_SESSION_H

#include "checkpointing.h"
#include "group.h"
#include "loss_scaler.h"
#include "options.h"
#include "program.h"

#include "dsrt/dsrt.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace dsrt::driver {

/// Model state as allocated, by DeepSpeed's categories: each storage once (a flat buffer with
/// its padding, not its member views).
struct ModelStateBytes {
  uint64_t params = 0, grads = 0, optim = 0;
  uint64_t total() const { return params + grads + optim; }
};

/// What one ended step gives its caller.
struct StepOutcome {
  float loss = 0;      ///< the mean over every data-parallel rank's micro-batches
  double lr = 0;       ///< the step's learning rate
  bool skipped = false; ///< fp16: the update was skipped on overflow
};

class Session {
public:
  /// `tool` prefixes the messages ("ds-run", or "ds" in Python). With `quiet`, failures are
  /// not printed but kept for error() (a library raises them).
  Session(std::string tool, const dsrt_program *program, bool quiet);
  ~Session();

  /// Parses the flags, joins the group, checks and loads everything. 0: ready; 1: failed
  /// (error() says why, on every rank); 2: nothing to do (--help, or --resume at --steps).
  /// `data` is the training data's loader when the caller feeds from files (ds-run).
  int open(int argc, char **argv, class DataFeed *data);

  /// The step the next beginStep starts (1 + the steps already applied or resumed).
  int64_t nextStep() const { return step_; }
  const ProgramSpec &program() const { return p; }
  const Options &options() const { return opt; }
  const Group &group() const { return group_; }
  dsrt_context *context() const { return ctx; }
  const std::string &error() const { return error_; }
  /// An agreement point (this rank's failure `err`, "" if none): false when any rank failed,
  /// error() then saying why.
  bool agree(const std::string &err);

  void beginStep();
  /// One call of the micro-step on `inputs` (program().inputs per micro-batch, times
  /// microBatchesPerCall); appends its losses.
  void call(dsrt_tensor **inputs);
  /// This step's losses so far (this rank's micro-batches).
  const std::vector<float> &losses() const { return losses_; }
  /// The optimizer update, the scaler, the checkpoint the flags ask for and the log line.
  /// False (error() says why, on every rank) on failure.
  bool endStep(StepOutcome &out);
  /// After the last step: the trace and --save-weights the flags ask for.
  bool finish();

  /// Saves a checkpoint of the state after the last ended step into `dir`.
  bool save(const std::string &dir);
  /// Loads `dir`'s latest checkpoint (or DIR/TAG): the next step continues from it.
  bool load(const std::string &dir);
  /// Writes the fp32 state_dict (every rank takes part; rank 0 writes `path`).
  bool exportWeights(const std::string &path);
  /// The learning rate the next step applies.
  double nextLr() const;
  /// Sets the next step's learning rate in place of the compiled schedule's (that step only).
  void setLr(double lr) { lrOverride_ = lr; hasLrOverride_ = true; }
  ModelStateBytes modelState() const;

private:
  std::string tool;
  const dsrt_program *prog;
  bool quiet;
  Options opt;
  ProgramSpec p;
  Group group_;
  std::unique_ptr<Checkpointer> checkpoints;
  dsrt_context *ctx = nullptr;
  std::FILE *log = nullptr;
  std::string error_;
  double lrOverride_ = 0;
  bool hasLrOverride_ = false;
  bool offloading = false; ///< ds-offload's program: log each space's peak and the moves
  int64_t step_ = 1;
  bool resumed = false;      ///< the next log line is the first after a resume
  uint64_t resumePeak = 0;   ///< the resume's host memory growth
  ModelStateBytes state;
  int32_t lossScaleSlot = -1, foundInfSlot = -1;
  // fp16: the loss scale, and the optimizer steps applied (not skipped on overflow), which
  // drive Adam's step count and the LR schedule as in DeepSpeed.
  bool lossScaling = false;
  LossScaler scaler;
  int64_t applied = 0;
  double scalerState[6] = {}; ///< the scaler's progress as checkpoints hold it
  // The step in progress.
  std::vector<float> losses_;
  bool traced = false;
  int64_t traceStart = 0;
  std::chrono::steady_clock::time_point t0;
  double stepScale = 1, waited0 = 0, stalled0 = 0, inCalls = 0;
  uint64_t moved0[4] = {}, disk0[2] = {};

  /// A failure before the group exists (each rank sees the same flags and program).
  int fail(const std::string &msg);
  std::string prepare(DataFeed *data);
  std::string openLog();
  std::string openSwap();
  void packScaler();
  void unpackScaler();
};

} // namespace dsrt::driver

#endif

//===- driver.cpp - the training loop behind ds-run and compiled executables ===//
//
// Reads the program's metadata, joins the rank group, checks the data, weights, config and
// memory plan against the program, then runs `--steps` optimizer steps of gas micro-batches
// each and writes LOG.jsonl. Every failure after joining the group passes an agreement point,
// so that one rank's error ends every rank with that rank's message instead of leaving the
// others waiting in a collective. The flags, the program's metadata, the data, the weights and
// the checkpoints live in files of their own beside this one.
//
#include "checkpointing.h"
#include "data.h"
#include "group.h"
#include "loss_scaler.h"
#include "options.h"
#include "program.h"
#include "trace_file.h"
#include "weights.h"

#include "dsrt/dsrt.h"
#include "dsrt/io.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace dsrt::driver {
namespace {

// Scalars cross between the host and the device by explicit copies (the driver never
// addresses tensor data).
float scalarValue(dsrt_context *ctx, const dsrt_tensor *t) {
  if (t->dtype == DSRT_F64) {
    double v;
    dsrt_tensor_to_host(ctx, &v, t);
    return static_cast<float>(v);
  }
  float v;
  dsrt_tensor_to_host(ctx, &v, t);
  return v;
}

dsrt_tensor *scalarTensor(dsrt_context *ctx, float v) {
  int64_t none = 0;
  dsrt_tensor *t = dsrt_tensor_alloc(ctx, DSRT_F32, 0, &none);
  dsrt_tensor_from_host(ctx, t, &v);
  return t;
}

dsrt_tensor *scalarTensorF64(dsrt_context *ctx, double v) {
  int64_t none = 0;
  dsrt_tensor *t = dsrt_tensor_alloc(ctx, DSRT_F64, 0, &none);
  dsrt_tensor_from_host(ctx, t, &v);
  return t;
}

/// Model state as allocated, by DeepSpeed's categories: each storage once (a flat buffer with
/// its padding, not its member views).
struct ModelStateBytes {
  uint64_t params = 0, grads = 0, optim = 0;
  uint64_t total() const { return params + grads + optim; }
};

class Driver {
public:
  Driver(int argc, char **argv, const dsrt_program *program)
      : argc(argc), argv(argv), program(program) {
    tool = argc > 0 && argv[0] ? argv[0] : "ds-run";
    size_t slash = tool.rfind('/');
    if (slash != std::string::npos)
      tool = tool.substr(slash + 1);
  }

  int run();

private:
  int argc;
  char **argv;
  const dsrt_program *program;
  std::string tool;
  Options opt;
  bool offloading = false; ///< ds-offload's program: log each space's peak and the moves
  ProgramSpec p;
  DataFeed data;
  Group group;
  std::unique_ptr<Checkpointer> checkpoints;
  dsrt_context *ctx = nullptr;
  std::FILE *log = nullptr;
  int64_t firstStep = 1; // > 1 after --resume
  // fp16: the loss scale, and the optimizer steps applied (not skipped on overflow), which
  // drive Adam's step count and the LR schedule as in DeepSpeed.
  bool lossScaling = false;
  LossScaler scaler;
  int64_t applied = 0;
  double scalerState[6] = {}; ///< the scaler's progress as checkpoints hold it

  /// A failure before the group exists (each rank sees the same flags and program).
  int fail(const std::string &msg) {
    std::fprintf(stderr, "%s: error: %s\n", tool.c_str(), msg.c_str());
    return 1;
  }
  int finish(int rc) {
    if (log)
      std::fclose(log);
    log = nullptr;
    dsrt_context_destroy(ctx);
    ctx = nullptr;
    return rc;
  }
  /// What every rank checks for itself before the slots exist; "" when all is well.
  std::string prepare();
  std::string openLog();
  /// The NVMe tier's swap file (ZeRO-Infinity), before the slots; "" when all is well.
  std::string openSwap();
  void packScaler() {
    double v[6] = {scaler.scale, static_cast<double>(scaler.curHysteresis),
                   static_cast<double>(scaler.lastOverflowIter),
                   static_cast<double>(scaler.curIter), static_cast<double>(applied), 0};
    std::memcpy(scalerState, v, sizeof v);
  }
  void unpackScaler() {
    scaler.scale = scalerState[0];
    scaler.curHysteresis = static_cast<int64_t>(scalerState[1]);
    scaler.lastOverflowIter = static_cast<int64_t>(scalerState[2]);
    scaler.curIter = static_cast<int64_t>(scalerState[3]);
    applied = static_cast<int64_t>(scalerState[4]);
  }
  ModelStateBytes modelState() const;
  int train(uint64_t resumePeak);
};

std::string Driver::prepare() {
  std::string err;
  if (!opt.config.empty() && !checkConfigFile(opt.config, p, err))
    return err;
  if (!data.load(opt, p, err))
    return err;
  if (opt.weights.empty() && opt.resume.empty())
    return "no initial weights: pass --weights FILE.safetensors";
  if (opt.saveEvery > 0 && opt.save.empty() && opt.resume.empty())
    return "--save-every K needs --save DIR (where to write the checkpoints)";
  // Before anything allocates from the arena, so that an oversized plan fails fast.
  if (!checkPlan(p, opt.deviceMemory, err))
    return err;
  return "";
}

std::string Driver::openSwap() {
  const io::Json *plan = p.meta.get("plan");
  const io::Json *bytes = plan ? plan->get("nvme_file_bytes") : nullptr;
  if (!bytes || !bytes->isNumber() || bytes->number <= 0)
    return "";
  if (!p.hasNvme)
    return "the program has NVMe slots but no NVMe tier (its swap directory); recompile it";
  char err[1024] = {0};
  if (dsrt_nvme_open(ctx, p.nvme.path.c_str(), static_cast<uint64_t>(bytes->number),
                     p.nvme.blockSize, static_cast<int32_t>(p.nvme.queueDepth),
                     p.nvme.singleSubmit ? 1 : 0, err, sizeof err) != 0)
    return err;
  return "";
}

std::string Driver::openLog() {
  if (opt.log.empty() || group.rank() != 0)
    return "";
  log = std::fopen(opt.log.c_str(), "w");
  if (!log)
    return "cannot write --log '" + opt.log + "': " + std::strerror(errno) +
           " (choose a writable path)";
  return "";
}

ModelStateBytes Driver::modelState() const {
  ModelStateBytes m;
  for (size_t i = 0; i < p.slots.size(); ++i) {
    const SlotSpec &s = p.slots[i];
    if (!s.shardedBy.empty() || !s.heldBy(group.indexOn(DSRT_AXIS_PP)))
      continue; // no storage of its own (part of a parameter shard), or another stage's
    uint64_t owned = dsrt_slot_storage_bytes(ctx, static_cast<int32_t>(i));
    switch (dsrt_slot_role_category(s.role)) {
    case DSRT_CATEGORY_PARAMETERS:
      m.params += owned;
      break;
    case DSRT_CATEGORY_GRADIENTS:
      m.grads += owned;
      break;
    case DSRT_CATEGORY_OPTIMIZER_STATE:
      m.optim += owned;
      break;
    case DSRT_CATEGORY_BUFFERS:
    case DSRT_CATEGORY_NONE:
      break;
    }
  }
  return m;
}

int Driver::train(uint64_t resumePeak) {
  const ModelStateBytes state = modelState();
  const int32_t rank = group.rank(), worldSize = group.size();
  int32_t lossScaleSlot = -1, foundInfSlot = -1;
  for (size_t i = 0; i < p.slots.size(); ++i) {
    if (p.slots[i].role == DSRT_ROLE_LOSS_SCALE)
      lossScaleSlot = static_cast<int32_t>(i);
    if (p.slots[i].role == DSRT_ROLE_FOUND_INF)
      foundInfSlot = static_cast<int32_t>(i);
  }
  bool resumed = firstStep > 1;
  for (int64_t step = firstStep; step <= opt.steps; ++step) {
    // --trace: this step's runtime calls, and the driver's phases around them.
    const bool traced = opt.traced(step);
    if (traced)
      dsrt_trace_enable(ctx, 1);
    const int64_t traceStart = dsrt_trace_now();
    auto t0 = std::chrono::steady_clock::now();
    double stepScale = scaler.scale;
    if (lossScaleSlot >= 0) {
      dsrt_tensor *t = dsrt_slot_get(ctx, lossScaleSlot);
      float scale = static_cast<float>(stepScale);
      dsrt_tensor_from_host(ctx, t, &scale);
      dsrt_tensor_free(ctx, t);
    }
    std::vector<float> losses;
    // Each call runs microBatchesPerCall micro-batches: one (a micro-step) or, for a
    // pipeline, all of the step's (each rank's schedule), whose losses come back together.
    const int64_t perCall = p.microBatchesPerCall, n = static_cast<int64_t>(p.inputs.size());
    const double waited0 = dsrt_wait_seconds(ctx);
    const double stalled0 = dsrt_transfer_wait_seconds(ctx);
    uint64_t moved0[4];
    for (int k = 0; k < 4; ++k)
      moved0[k] = dsrt_moved_bytes(ctx, k);
    uint64_t disk0[2] = {0, 0};
    io::processDiskBytes(disk0[0], disk0[1]);
    double inCalls = 0; // seconds in the micro-step calls (the data excluded)
    for (int64_t k0 = 0; k0 < p.gas; k0 += perCall) {
      std::vector<dsrt_tensor *> ts(perCall * n);
      for (int64_t k = 0; k < perCall; ++k) {
        for (int64_t i = 0; i < n; ++i)
          ts[k * n + i] = dsrt_tensor_alloc(ctx, p.inputs[i].dtype,
                                            static_cast<int32_t>(p.inputs[i].dims.size()),
                                            p.inputs[i].dims.data());
        std::vector<dsrt_tensor *> mine(ts.begin() + k * n, ts.begin() + (k + 1) * n);
        const int64_t fillStart = dsrt_trace_now();
        data.fill(ctx, step, group.dpIndex(), k0 + k, mine);
        dsrt_trace_span(ctx, "data", fillStart, dsrt_trace_now());
      }
      auto tCall = std::chrono::steady_clock::now();
      const int64_t callStart = dsrt_trace_now();
      dsrt_tensor *loss = program->micro_step(ctx, ts.data());
      // The loss is read on the host: wait for the stream to produce it.
      dsrt_event *done = dsrt_event_record(ctx);
      dsrt_event_synchronize(done);
      dsrt_event_release(done);
      dsrt_trace_site(ctx, -1); // the driver's own calls follow
      dsrt_trace_span(ctx, perCall == 1 ? "micro_step" : "pipeline_step", callStart,
                      dsrt_trace_now());
      inCalls += std::chrono::duration<double>(std::chrono::steady_clock::now() - tCall).count();
      if (perCall == 1) {
        losses.push_back(scalarValue(ctx, loss));
      } else {
        std::vector<float> some(perCall);
        dsrt_tensor_to_host(ctx, some.data(), loss);
        losses.insert(losses.end(), some.begin(), some.end());
      }
      dsrt_tensor_free(ctx, loss);
      for (dsrt_tensor *t : ts)
        dsrt_tensor_free(ctx, t);
    }
    const double waitedMs = (dsrt_wait_seconds(ctx) - waited0) * 1e3;
    const double computeMs = std::max(0.0, inCalls * 1e3 - waitedMs);
    if (worldSize > 1) { // every data-parallel rank's micro-batch losses, in dp order (as
                         // ds-reference); the ranks that share samples computed the same ones
      std::vector<char> all = group.gather(losses.data(), losses.size() * sizeof(float));
      const size_t per = losses.size();
      losses.clear();
      for (int32_t q = 0; q < worldSize; ++q)
        if (group.leadsItsSamples(q)) {
          const float *l = reinterpret_cast<const float *>(all.data()) + q * per;
          losses.insert(losses.end(), l, l + per);
        }
    }
    float mean = io::meanLoss(losses); // dp * gas micro-batches
    // This step's failures (the same on every rank, or rank 0's writes), agreed on below.
    std::string stepError;
    if (!std::isfinite(mean))
      stepError = "step " + std::to_string(step) + ": loss is " +
                  (std::isnan(mean) ? "nan" : "inf") +
                  "; lower the learning rate or enable gradient_clipping";
    if (stepError.empty() && step == 1 && !opt.dumpGrads.empty()) {
      bool whole = false;
      for (const SlotSpec &s : p.slots)
        whole = whole || s.role == DSRT_ROLE_GRAD;
      if (!whole && rank == 0)
        std::fprintf(stderr, "%s: warning: --dump-grads: the gradients are partitioned (ZeRO "
                             "stage 2 or 3) and never whole; '%s' will hold no tensors\n",
                     tool.c_str(), opt.dumpGrads.c_str());
      if (lossScaling && rank == 0)
        std::fprintf(stderr, "%s: warning: --dump-grads: the fp16 gradients in '%s' are "
                             "multiplied by the loss scale %g\n",
                     tool.c_str(), opt.dumpGrads.c_str(), stepScale);
      std::string e;
      if (!dumpGradients(p, group, opt.dumpGrads, e))
        stepError = "--dump-grads: " + e;
    }
    if (!group.agree(tool, stepError))
      return 1;
    auto tOptimizer = std::chrono::steady_clock::now();
    // The schedule and Adam's step count advance with the applied steps (all of them unless
    // fp16 skips one on overflow).
    io::StepScalars hyper = io::scheduled(p.lr, applied + 1);
    double lrStep = hyper.lr;
    dsrt_tensor *lrT = scalarTensor(ctx, static_cast<float>(hyper.lr));
    dsrt_tensor *stepT = scalarTensor(ctx, static_cast<float>(applied + 1));
    dsrt_tensor *beta1T = scalarTensorF64(ctx, hyper.beta1);
    dsrt_tensor *auxLrT = scalarTensor(ctx, static_cast<float>(hyper.auxLr));
    const int64_t optimizerStart = dsrt_trace_now();
    program->optimizer_step(ctx, lrT, stepT, beta1T, auxLrT);
    dsrt_stream_synchronize(ctx); // the step time covers the work, not just its enqueueing
    dsrt_trace_site(ctx, -1);
    dsrt_trace_span(ctx, "optimizer_step", optimizerStart, dsrt_trace_now());
    if (std::getenv("DSRT_TIMING"))
      std::fprintf(stderr, "dsrt-timing step %lld micro_steps %.1f ms optimizer_step %.1f ms\n",
                   (long long)step,
                   std::chrono::duration<double, std::milli>(tOptimizer - t0).count(),
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                             tOptimizer)
                       .count());
    for (dsrt_tensor *t : {lrT, stepT, beta1T, auxLrT})
      dsrt_tensor_free(ctx, t);
    bool overflow = false;
    if (foundInfSlot >= 0) {
      dsrt_tensor *t = dsrt_slot_get(ctx, foundInfSlot);
      float found = 0.0f;
      dsrt_tensor_to_host(ctx, &found, t);
      overflow = found != 0.0f; // the same on every rank
      dsrt_tensor_free(ctx, t);
    }
    if (!overflow)
      ++applied;
    if (lossScaling) {
      if (overflow && rank == 0)
        std::fprintf(stderr, "%s: step %lld: gradient overflow at loss scale %g; step skipped\n",
                     tool.c_str(), (long long)step, stepScale);
      if (!scaler.update(overflow)) { // the same on every rank: every rank stops here
        group.agree(tool, "step " + std::to_string(step) +
                              ": the gradients overflow at the minimum loss scale " +
                              io::formatFloat(scaler.minScale) +
                              "; lower fp16.min_loss_scale or the learning rate, or use bf16");
        return 1;
      }
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count();
    if (traced) {
      dsrt_trace_span(ctx, ("step " + std::to_string(step)).c_str(), traceStart,
                      dsrt_trace_now());
      dsrt_trace_enable(ctx, 0);
    }

    // The checkpoint, before the log line, so that the line can carry its host peak.
    bool everyK = opt.saveEvery > 0 && step % opt.saveEvery == 0;
    std::string saveDir = opt.save.empty() ? opt.resume : opt.save;
    bool saving = (everyK || (step == opt.steps && !opt.save.empty())) && !saveDir.empty();
    uint64_t savePeak = 0;
    if (saving) {
      packScaler();
      if (!checkpoints->save(saveDir, step, savePeak))
        return 1;
    }

    io::LogRecord r;
    r.step = step;
    r.loss = mean;
    r.lr = lrStep;
    r.lossScale = lossScaling ? stepScale : 0.0;
    r.skipped = overflow;
    r.stepMs = ms;
    r.samplesPerS = ms > 0 ? static_cast<double>(p.G) * 1000.0 / ms : 0.0;
    r.devicePeakBytes = dsrt_device_peak_bytes(ctx);
    r.hostPeakBytes = io::hostPeakBytes();
    uint64_t disk[2] = {0, 0};
    io::processDiskBytes(disk[0], disk[1]);
    constexpr int kStats = 19;
    // The times in microseconds, as integers like the rest.
    uint64_t mine[kStats] = {r.devicePeakBytes, r.hostPeakBytes, state.total(), state.params,
                             state.grads,       state.optim,     savePeak,      resumePeak,
                             static_cast<uint64_t>(computeMs * 1e3),
                             static_cast<uint64_t>(waitedMs * 1e3),
                             dsrt_space_peak_bytes(ctx, DSRT_SPACE_HOST),
                             dsrt_space_peak_bytes(ctx, DSRT_SPACE_NVME),
                             dsrt_moved_bytes(ctx, 0) - moved0[0],
                             dsrt_moved_bytes(ctx, 1) - moved0[1],
                             dsrt_moved_bytes(ctx, 2) - moved0[2],
                             dsrt_moved_bytes(ctx, 3) - moved0[3],
                             static_cast<uint64_t>(
                                 (dsrt_transfer_wait_seconds(ctx) - stalled0) * 1e6),
                             disk[0] - disk0[0], disk[1] - disk0[1]};
    std::vector<char> all = worldSize > 1 ? group.gather(mine, sizeof mine)
                                          : std::vector<char>((char *)mine, (char *)(mine + kStats));
    // Each rank's swap-file I/O path, by name.
    char engine[32] = {};
    std::snprintf(engine, sizeof engine, "%s", dsrt_nvme_engine(ctx));
    std::vector<char> engines = worldSize > 1 ? group.gather(engine, sizeof engine)
                                              : std::vector<char>(engine, engine + sizeof engine);
    for (int32_t q = 0; q < worldSize; ++q) {
      uint64_t v[kStats];
      std::memcpy(v, all.data() + q * sizeof v, sizeof v);
      io::RankStats k{q, v[0], v[1], v[2], v[3], v[4], v[5]};
      k.saved = saving;
      k.saveHostPeakBytes = v[6];
      k.resumed = resumed;
      k.resumeHostPeakBytes = v[7];
      k.timed = p.pipelineStages > 1;
      k.computeMs = v[8] * 1e-3;
      k.waitMs = v[9] * 1e-3;
      k.offload = offloading;
      k.hostSpacePeakBytes = v[10];
      k.nvmePeakBytes = v[11];
      for (int m = 0; m < 4; ++m)
        k.movedBytes[m] = v[12 + m];
      k.stallMs = v[16] * 1e-3;
      k.diskReadBytes = v[17];
      k.diskWriteBytes = v[18];
      k.nvmeEngine = std::string(engines.data() + q * sizeof engine);
      r.ranks.push_back(k);
    }
    resumed = false;
    std::string logError;
    if (log && !io::writeLogLine(log, r))
      logError = "cannot write --log '" + opt.log + "': " + std::strerror(errno);
    if (rank == 0 &&
        ((p.stepsPerPrint > 0 && step % p.stepsPerPrint == 0) || step == opt.steps)) {
      std::printf("%s\n", io::formatProgress(r, opt.steps).c_str());
      std::fflush(stdout);
    }
    if (!group.agree(tool, logError))
      return 1;
  }
  if (!opt.trace.empty() && !group.agree(tool, writeTrace(ctx, group, p, opt.trace)))
    return 1;
  if (!opt.saveWeights.empty()) { // every rank: stage 3 gathers, rank 0 writes
    std::string e;
    if (!exportWeights(p, group, opt.saveWeights, e))
      e = "--save-weights: " + e;
    if (!group.agree(tool, e))
      return 1;
  }
  return 0;
}

int Driver::run() {
  std::string err;
  if (!parseFlags(argc, argv, opt, err))
    return fail(err);
  if (opt.help) {
    std::printf(kUsage, tool.c_str());
    return 0;
  }
  if (opt.steps < 0)
    return fail("--steps N is required (the number of optimizer steps to run)");
  if (!program || !readProgram(program->metadata, p, err))
    return fail(err);
  if (p.lossScaling) {
    lossScaling = true;
    scaler.configure(p.lossScaler, p.zeroStage);
  }

  char why[512] = {0};
  ctx = dsrt_context_create_on(opt.device.c_str(), opt.deviceMemory, opt.threads, p.seed, why,
                               sizeof why);
  if (!ctx) // before any log line: nothing has run
    return fail(std::string(why) + " (run with --device cpu, or see ds-report)");
  group.join(ctx, p.meshAxes, p.meshShape, opt.commTimeout); // exits naming both sizes on a mismatch
  checkpoints = std::make_unique<Checkpointer>(p, group, tool);
  if (lossScaling)
    checkpoints->setScalerState(scalerState);
  if (!group.agree(tool, prepare()))
    return finish(1);
  if (!group.agree(tool, openSwap()))
    return finish(1);
  if (const io::Json *plan = p.meta.get("plan"))
    offloading = plan->get("moved_bytes_per_step") != nullptr;
  program->init_slots(ctx);
  uint64_t resumePeak = 0;
  if (!opt.resume.empty()) {
    int64_t done = 0;
    if (!checkpoints->resume(opt.resume, done, resumePeak))
      return finish(1);
    if (done >= opt.steps) {
      if (group.rank() == 0)
        std::printf("checkpoint '%s' is at step %lld; --steps %lld is already reached\n",
                    opt.resume.c_str(), (long long)done, (long long)opt.steps);
      return finish(0);
    }
    firstStep = done + 1;
    if (lossScaling)
      unpackScaler();
    else
      applied = done;
  } else {
    loadWeights(p, group, opt.weights, err);
    checkpoints->startRun();
  }
  if (err.empty())
    err = openLog();
  if (err.empty() && !opt.trace.empty() && group.rank() == 0)
    err = checkTracePath(opt.trace);
  // The start-up barrier: every rank has compiled and loaded. (Every wait since joining the
  // group is bounded by --comm-timeout.)
  if (!group.agree(tool, err))
    return finish(1);
  return finish(train(resumePeak));
}

} // namespace
} // namespace dsrt::driver

extern "C" int dsrt_driver_main(int argc, char **argv, const dsrt_program *program) {
  return dsrt::driver::Driver(argc, argv, program).run();
}

//===- session.cpp - one compiled step, joined, loaded and stepped ------------===//
//
// Reads the program's metadata, joins the rank group, checks the weights, config and memory
// plan against the program, defines the slots and loads the weights (or resumes); then each
// step runs the caller's micro-step calls and ends with the optimizer update, fp16's scaler,
// the checkpoint and the log line. Every failure after joining the group passes an agreement
// point, so that one rank's error ends every rank with that rank's message instead of leaving
// the others waiting in a collective.
//
#include "session.h"

#include "data.h"
#include "trace_file.h"
#include "weights.h"

#include "dsrt/io.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

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

} // namespace

Session::Session(std::string tool, const dsrt_program *program, bool quiet)
    : tool(std::move(tool)), prog(program), quiet(quiet) {
  group_.setQuiet(quiet);
}

Session::~Session() {
  if (log)
    std::fclose(log);
  dsrt_context_destroy(ctx);
}

int Session::fail(const std::string &msg) {
  error_ = msg;
  if (!quiet)
    std::fprintf(stderr, "%s: error: %s\n", tool.c_str(), msg.c_str());
  return 1;
}

bool Session::agree(const std::string &err) {
  if (group_.agree(tool, err))
    return true;
  error_ = group_.lastError();
  return false;
}

void Session::packScaler() {
  double v[6] = {scaler.scale, static_cast<double>(scaler.curHysteresis),
                 static_cast<double>(scaler.lastOverflowIter),
                 static_cast<double>(scaler.curIter), static_cast<double>(applied), 0};
  std::memcpy(scalerState, v, sizeof v);
}

void Session::unpackScaler() {
  scaler.scale = scalerState[0];
  scaler.curHysteresis = static_cast<int64_t>(scalerState[1]);
  scaler.lastOverflowIter = static_cast<int64_t>(scalerState[2]);
  scaler.curIter = static_cast<int64_t>(scalerState[3]);
  applied = static_cast<int64_t>(scalerState[4]);
}

std::string Session::prepare(DataFeed *data) {
  std::string err;
  if (!opt.config.empty() && !checkConfigFile(opt.config, p, err))
    return err;
  if (data && !data->load(opt, p, err))
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

std::string Session::openSwap() {
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

std::string Session::openLog() {
  if (opt.log.empty() || group_.rank() != 0)
    return "";
  log = std::fopen(opt.log.c_str(), "w");
  if (!log)
    return "cannot write --log '" + opt.log + "': " + std::strerror(errno) +
           " (choose a writable path)";
  return "";
}

ModelStateBytes Session::modelState() const {
  ModelStateBytes m;
  for (size_t i = 0; i < p.slots.size(); ++i) {
    const SlotSpec &s = p.slots[i];
    if (!s.shardedBy.empty() || !s.heldBy(group_.indexOn(DSRT_AXIS_PP)))
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
    case DSRT_CATEGORY_KV_CACHE:
    case DSRT_CATEGORY_NONE:
      break;
    }
  }
  return m;
}

int Session::open(int argc, char **argv, DataFeed *data) {
  std::string err;
  if (!parseFlags(argc, argv, opt, err))
    return fail(err);
  if (opt.help) {
    std::printf(kUsage, tool.c_str());
    return 2;
  }
  if (!prog || !readProgram(prog->metadata, p, err))
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
  // Exits naming both sizes when the job has another size than the program's mesh.
  group_.join(ctx, p.meshAxes, p.meshShape, opt.commTimeout);
  checkpoints = std::make_unique<Checkpointer>(p, group_, tool);
  if (lossScaling)
    checkpoints->setScalerState(scalerState);
  if (!agree(prepare(data)) || !agree(openSwap()))
    return 1;
  if (const io::Json *plan = p.meta.get("plan"))
    offloading = plan->get("moved_bytes_per_step") != nullptr;
  prog->init_slots(ctx);
  for (size_t i = 0; i < p.slots.size(); ++i) {
    if (p.slots[i].role == DSRT_ROLE_LOSS_SCALE)
      lossScaleSlot = static_cast<int32_t>(i);
    if (p.slots[i].role == DSRT_ROLE_FOUND_INF)
      foundInfSlot = static_cast<int32_t>(i);
  }
  if (!opt.resume.empty()) {
    if (!load(opt.resume))
      return 1;
    if (opt.steps >= 0 && step_ > opt.steps) {
      if (group_.rank() == 0)
        std::printf("checkpoint '%s' is at step %lld; --steps %lld is already reached\n",
                    opt.resume.c_str(), (long long)(step_ - 1), (long long)opt.steps);
      return 2;
    }
  } else {
    loadWeights(p, group_, opt.weights, err);
    checkpoints->startRun();
  }
  if (err.empty())
    err = openLog();
  if (err.empty() && !opt.trace.empty() && group_.rank() == 0)
    err = checkTracePath(opt.trace);
  // The start-up barrier: every rank has compiled and loaded. (Every wait since joining the
  // group is bounded by --comm-timeout.)
  if (!agree(err))
    return 1;
  state = modelState();
  return 0;
}

bool Session::load(const std::string &dir) {
  int64_t done = 0;
  if (!checkpoints->resume(dir, done, resumePeak)) {
    error_ = group_.lastError();
    return false;
  }
  step_ = done + 1;
  resumed = true;
  if (lossScaling)
    unpackScaler();
  else
    applied = done;
  return true;
}

bool Session::save(const std::string &dir) {
  packScaler();
  uint64_t peak = 0;
  if (checkpoints->save(dir, step_ - 1, peak))
    return true;
  error_ = group_.lastError();
  return false;
}

bool Session::exportWeights(const std::string &path) {
  std::string e;
  if (!driver::exportWeights(p, group_, path, e))
    e = "--save-weights: " + e;
  return agree(e);
}

double Session::nextLr() const {
  return hasLrOverride_ ? lrOverride_ : io::scheduled(p.lr, applied + 1).lr;
}

void Session::beginStep() {
  // --trace: this step's runtime calls, and the driver's phases around them.
  traced = opt.traced(step_);
  if (traced)
    dsrt_trace_enable(ctx, 1);
  traceStart = dsrt_trace_now();
  t0 = std::chrono::steady_clock::now();
  stepScale = scaler.scale;
  if (lossScaleSlot >= 0) {
    dsrt_tensor *t = dsrt_slot_get(ctx, lossScaleSlot);
    float scale = static_cast<float>(stepScale);
    dsrt_tensor_from_host(ctx, t, &scale);
    dsrt_tensor_free(ctx, t);
  }
  losses_.clear();
  waited0 = dsrt_wait_seconds(ctx);
  stalled0 = dsrt_transfer_wait_seconds(ctx);
  for (int k = 0; k < 4; ++k)
    moved0[k] = dsrt_moved_bytes(ctx, k);
  io::processDiskBytes(disk0[0], disk0[1]);
  inCalls = 0; // seconds in the micro-step calls (the data excluded)
}

void Session::call(dsrt_tensor **inputs) {
  // Each call runs microBatchesPerCall micro-batches: one (a micro-step) or, for a pipeline,
  // all of the step's (each rank's schedule), whose losses come back together.
  const int64_t perCall = p.microBatchesPerCall;
  auto tCall = std::chrono::steady_clock::now();
  const int64_t callStart = dsrt_trace_now();
  dsrt_tensor *loss = prog->micro_step(ctx, inputs);
  // The loss is read on the host: wait for the stream to produce it.
  dsrt_event *done = dsrt_event_record(ctx);
  dsrt_event_synchronize(done);
  dsrt_event_release(done);
  dsrt_trace_site(ctx, -1); // the driver's own calls follow
  dsrt_trace_span(ctx, perCall == 1 ? "micro_step" : "pipeline_step", callStart,
                  dsrt_trace_now());
  inCalls += std::chrono::duration<double>(std::chrono::steady_clock::now() - tCall).count();
  if (perCall == 1) {
    losses_.push_back(scalarValue(ctx, loss));
  } else {
    std::vector<float> some(perCall);
    dsrt_tensor_to_host(ctx, some.data(), loss);
    losses_.insert(losses_.end(), some.begin(), some.end());
  }
  dsrt_tensor_free(ctx, loss);
}

bool Session::endStep(StepOutcome &out) {
  const int64_t step = step_;
  const int32_t rank = group_.rank(), worldSize = group_.size();
  std::vector<float> losses = losses_;
  const double waitedMs = (dsrt_wait_seconds(ctx) - waited0) * 1e3;
  const double computeMs = std::max(0.0, inCalls * 1e3 - waitedMs);
  if (worldSize > 1) { // every data-parallel rank's micro-batch losses, in dp order (as
                       // ds-reference); the ranks that share samples computed the same ones
    std::vector<char> all = group_.gather(losses.data(), losses.size() * sizeof(float));
    const size_t per = losses.size();
    losses.clear();
    for (int32_t q = 0; q < worldSize; ++q)
      if (group_.leadsItsSamples(q)) {
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
    if (!dumpGradients(p, group_, opt.dumpGrads, e))
      stepError = "--dump-grads: " + e;
  }
  if (!agree(stepError))
    return false;
  auto tOptimizer = std::chrono::steady_clock::now();
  // The schedule and Adam's step count advance with the applied steps (all of them unless
  // fp16 skips one on overflow).
  io::StepScalars hyper = io::scheduled(p.lr, applied + 1);
  if (hasLrOverride_) { // the caller's schedule; Muon's AdamW group keeps its ratio
    hyper.auxLr = p.lr.base > 0 ? lrOverride_ * p.lr.auxBase / p.lr.base : lrOverride_;
    hyper.lr = lrOverride_;
    hasLrOverride_ = false;
  }
  double lrStep = hyper.lr;
  dsrt_tensor *lrT = scalarTensor(ctx, static_cast<float>(hyper.lr));
  dsrt_tensor *stepT = scalarTensor(ctx, static_cast<float>(applied + 1));
  dsrt_tensor *beta1T = scalarTensorF64(ctx, hyper.beta1);
  dsrt_tensor *auxLrT = scalarTensor(ctx, static_cast<float>(hyper.auxLr));
  const int64_t optimizerStart = dsrt_trace_now();
  prog->optimizer_step(ctx, lrT, stepT, beta1T, auxLrT);
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
      agree("step " + std::to_string(step) +
            ": the gradients overflow at the minimum loss scale " +
            io::formatFloat(scaler.minScale) +
            "; lower fp16.min_loss_scale or the learning rate, or use bf16");
      return false;
    }
  }
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (traced) {
    dsrt_trace_span(ctx, ("step " + std::to_string(step)).c_str(), traceStart,
                    dsrt_trace_now());
    dsrt_trace_enable(ctx, 0);
  }
  ++step_;
  out.loss = mean;
  out.lr = lrStep;
  out.skipped = overflow;

  // The checkpoint, before the log line, so that the line can carry its host peak.
  bool everyK = opt.saveEvery > 0 && step % opt.saveEvery == 0;
  std::string saveDir = opt.save.empty() ? opt.resume : opt.save;
  bool saving = (everyK || (step == opt.steps && !opt.save.empty())) && !saveDir.empty();
  uint64_t savePeak = 0;
  if (saving) {
    packScaler();
    if (!checkpoints->save(saveDir, step, savePeak)) {
      error_ = group_.lastError();
      return false;
    }
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
  std::vector<char> all = worldSize > 1 ? group_.gather(mine, sizeof mine)
                                        : std::vector<char>((char *)mine, (char *)(mine + kStats));
  // Each rank's swap-file I/O path, by name.
  char engine[32] = {};
  std::snprintf(engine, sizeof engine, "%s", dsrt_nvme_engine(ctx));
  std::vector<char> engines = worldSize > 1 ? group_.gather(engine, sizeof engine)
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
  // Progress every steps_per_print steps and at the last: ds-run's on stdout, a library's
  // (no --steps) on stderr as DeepSpeed's logger prints it.
  if (rank == 0 &&
      ((p.stepsPerPrint > 0 && step % p.stepsPerPrint == 0) || step == opt.steps)) {
    std::FILE *to = opt.steps < 0 ? stderr : stdout;
    std::fprintf(to, "%s\n", io::formatProgress(r, opt.steps).c_str());
    std::fflush(to);
  }
  return agree(logError);
}

bool Session::finish() {
  if (!opt.trace.empty() && !agree(writeTrace(ctx, group_, p, opt.trace)))
    return false;
  if (!opt.saveWeights.empty()) // every rank: stage 3 gathers, rank 0 writes
    return exportWeights(opt.saveWeights);
  return true;
}

} // namespace dsrt::driver

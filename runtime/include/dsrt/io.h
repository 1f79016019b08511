//===- io.h - files and logs shared by the driver and ds-reference -*- C++ -*-===//
//
// .npy and safetensors readers/writers, a minimal JSON parser, the data order and the
// JSONL log format. C++17, no LLVM, no LibTorch, no exceptions: the training driver and
// the LibTorch oracle (ds-reference) both use this code, so their data order and logs
// cannot drift apart.
//
#ifndef DSRT_IO_H
#define DSRT_IO_H

#include "dsrt/dsrt.h"

#include <climits>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace dsrt::io {

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

/// dsrt_dtype values (DSRT_F32 ... DSRT_F16), plus types that only files hold: numpy's uint8
/// (the driver accepts it for i1 inputs), and the int8 and int16 tensors a state_dict may
/// have (ds-opt writes them to the model's .safetensors).
enum : int32_t { kU8 = 100, kI8, kI16 };

/// Bytes of one element (0 for an unknown type).
size_t elementSize(int32_t dtype);
/// "f32", "f64", "i64", "i32", "i1", "bf16", "f16", "u8", "i8", "i16"; "?" if unknown.
const char *dtypeName(int32_t dtype);
/// Inverse of dtypeName; -1 if unknown.
int32_t dtypeFromName(const std::string &name);
/// Safetensors names: F32 F64 I64 I32 BOOL BF16 F16 U8 I8 I16; -1 / "" if unknown.
int32_t dtypeFromSafetensors(const std::string &name);
const char *dtypeToSafetensors(int32_t dtype);

/// A dense, C-order, little-endian array in host memory.
struct Array {
  int32_t dtype = -1;
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;

  int64_t numel() const;
  /// "[4, 16] i64".
  std::string describe() const;
};
std::string formatDims(const std::vector<int64_t> &dims);

//===----------------------------------------------------------------------===//
// Checked arithmetic for sizes read from files and configs
//===----------------------------------------------------------------------===//

/// a * b and a + b of non-negative values; false on a negative operand or on overflow.
bool checkedMul(int64_t a, int64_t b, int64_t &out);
bool checkedAdd(int64_t a, int64_t b, int64_t &out);
/// The element count of `dims`; false when a dimension is negative or the product overflows.
bool checkedNumel(const std::vector<int64_t> &dims, int64_t &out);
/// `numel` elements of `dtype` in bytes, at most `limit`; false otherwise.
bool checkedBytes(int64_t numel, int32_t dtype, int64_t &out, int64_t limit = INT64_MAX);

//===----------------------------------------------------------------------===//
// .npy (format versions 1 to 3; <f4 <f8 <i8 <i4 <f2 |b1 |u1; C order)
//===----------------------------------------------------------------------===//

/// Reads `path`. On failure returns false and sets `err` to a message naming the file.
bool readNpy(const std::string &path, Array &out, std::string &err);
/// The same from the file's bytes (`path` names it in messages).
bool parseNpy(const std::string &bytes, const std::string &path, Array &out, std::string &err);
/// Writes a version 1.0 file.
bool writeNpy(const std::string &path, const Array &a, std::string &err);

//===----------------------------------------------------------------------===//
// safetensors
//===----------------------------------------------------------------------===//

using NamedArray = std::pair<std::string, Array>;

/// Reads every tensor of `path` in header order (`__metadata__` skipped).
bool readSafetensors(const std::string &path, std::vector<NamedArray> &out, std::string &err);
/// The same from the file's bytes (`path` names it in messages).
bool parseSafetensors(const std::string &bytes, const std::string &path,
                      std::vector<NamedArray> &out, std::string &err);

/// One tensor of a safetensors header: where its bytes are in the file.
struct SafetensorsEntryInfo {
  std::string name;
  int32_t dtype = -1;
  std::vector<int64_t> dims;
  uint64_t begin = 0, end = 0; ///< absolute file offsets
};
/// Parses a header (the 8-byte size and the JSON that follows, from `head`) of a file of
/// `fileSize` bytes: every entry, checked against the file's size and its own shape.
/// `headerBytes` gets the size of the JSON (so the data start at 8 + headerBytes).
bool parseSafetensorsHeader(const std::string &head, uint64_t fileSize, const std::string &path,
                            std::vector<SafetensorsEntryInfo> &out, uint64_t &headerBytes,
                            std::string &err);
/// Reads only the header of `path`.
bool readSafetensorsHeader(const std::string &path, std::vector<SafetensorsEntryInfo> &out,
                           std::string &err);
/// One entry to write; `data` points to `bytes` bytes that live until the call returns.
struct SafetensorsEntry {
  std::string name;
  int32_t dtype;
  std::vector<int64_t> dims;
  const void *data;
  size_t bytes;
};
/// The part of a safetensors file before its data: the 8-byte header size and the JSON
/// header (padded to 8 bytes) of `entries` stored back to back in this order (their `data` is
/// not read). `format` goes into __metadata__.
std::string safetensorsPrefix(const std::vector<SafetensorsEntry> &entries,
                              const char *format = "pt");
/// Writes atomically (a temporary file renamed over `path`).
bool writeSafetensors(const std::string &path, const std::vector<SafetensorsEntry> &entries,
                      std::string &err);

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

/// A parsed JSON value. Objects keep their keys in file order.
struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Null;
  bool boolean = false;
  double number = 0;
  std::string text; ///< a String's value; a Number's spelling as written
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  /// The member `key` of an object, or nullptr.
  const Json *get(const std::string &key) const;
  bool isNumber() const { return kind == Number; }
  bool isString() const { return kind == String; }
  bool isArray() const { return kind == Array; }
  bool isObject() const { return kind == Object; }
  /// Compact JSON text of this value.
  std::string dump() const;
  /// An integral number in [lo, hi] (no fraction, no overflow on conversion); false otherwise.
  bool asInt(int64_t lo, int64_t hi, int64_t &out) const;
};

/// Parses `text`; on failure sets `err` to "line L column C: cause".
bool parseJson(const std::string &text, Json &out, std::string &err);
/// `s` as a JSON string literal, quotes included.
std::string jsonQuote(const std::string &s);
/// A double with 9 significant digits (%.9g); non-finite values as null.
std::string formatFloat(double v);

bool readFile(const std::string &path, std::string &out, std::string &err);

//===----------------------------------------------------------------------===//
// Data order, sizes, logs
//===----------------------------------------------------------------------===//

/// First sample of micro-batch `k` (from 0) of data-parallel rank `rank` in optimizer step
/// `step` (from 1): (step-1)*G + (rank*gas + k)*mb, with G = train_batch_size.
int64_t sampleOffset(int64_t step, int64_t rank, int64_t k, int64_t G, int64_t mb,
                     int64_t gas);
/// How many whole optimizer steps `samples` samples feed.
int64_t stepsThatFit(int64_t samples, int64_t G);

/// Parses "1024", "64K", "64KiB", "1.5G", "2MiB" (K/M/G/T = KiB/MiB/GiB/TiB, powers of 1024;
/// a trailing "B" is allowed). False on anything else.
bool parseBytes(const std::string &text, uint64_t &out);
/// "12.3 MiB".
std::string formatBytes(uint64_t bytes);
/// Peak resident memory of this process over its life (the kernel's high-water mark, kept
/// across HostMemoryWindow's resets).
uint64_t hostPeakBytes();
/// The bytes this process has made the storage layer read and write (/proc/self/io's
/// read_bytes and write_bytes: block I/O, the page cache's hits not counted); false where the
/// kernel does not account them.
bool processDiskBytes(uint64_t &readBytes, uint64_t &writeBytes);

/// The most host memory an operation (a checkpoint save or resume) adds to what the process
/// held when it started: the growth of the resident set's high-water mark, which begin()
/// resets (Linux /proc/self/clear_refs). Where the reset is not allowed, the growth of the
/// resident set at the end (a lower bound).
class HostMemoryWindow {
public:
  void begin();
  uint64_t peakGrowth() const;

private:
  uint64_t startRss_ = 0;
  bool reset_ = false;
};

/// One rank's memory in a log line.
struct RankStats {
  int64_t rank = 0;
  uint64_t devicePeakBytes = 0;
  uint64_t hostPeakBytes = 0;
  uint64_t modelStateBytes = 0; ///< parameters + gradients + optimizer state
  /// The arena storage of each (flat buffers with their padding; views not again).
  uint64_t parameterBytes = 0, gradientBytes = 0, optimizerBytes = 0;
  /// A step that saved a checkpoint: the host memory the save added (HostMemoryWindow);
  /// logged as "save_host_peak_bytes". The first step after a resume likewise.
  bool saved = false, resumed = false;
  uint64_t saveHostPeakBytes = 0, resumeHostPeakBytes = 0;
  /// The forward and backward of the step's micro-batches on this rank: the time it computed
  /// and the time it waited for communication (a pipeline's bubble; logged as "compute_ms"
  /// and "wait_ms" when `timed`).
  bool timed = false;
  double computeMs = 0, waitMs = 0;
  /// ds-offload's program (`offload`): the host space's and the swap file's peaks, the bytes
  /// moved this step per dsrt_move_kind, and the time the compute stream waited for them
  /// ("host_space_peak_bytes", "nvme_peak_bytes", "moved_bytes", "stall_ms").
  bool offload = false;
  uint64_t hostSpacePeakBytes = 0, nvmePeakBytes = 0;
  uint64_t movedBytes[4] = {0, 0, 0, 0};
  double stallMs = 0;
  /// With a swap file: its I/O path (dsrt_nvme_engine) and the bytes the process read from
  /// and wrote to the storage layer this step, as the kernel counts them ("nvme_engine",
  /// "disk_read_bytes", "disk_write_bytes").
  std::string nvmeEngine;
  uint64_t diskReadBytes = 0, diskWriteBytes = 0;
};

/// One optimizer step's record: one line of LOG.jsonl.
struct LogRecord {
  int64_t step = 0;
  double loss = 0;
  double lr = 0;
  double stepMs = 0;
  double samplesPerS = 0;
  uint64_t devicePeakBytes = 0;
  uint64_t hostPeakBytes = 0;
  std::vector<RankStats> ranks;
  /// fp16 only (lossScale > 0): the loss scale of this step, and whether its gradients
  /// overflowed so that the update was skipped. Logged as "loss_scale" and "skipped".
  double lossScale = 0;
  bool skipped = false;
};

/// The JSON object of one log line, without the newline.
std::string formatLogLine(const LogRecord &r);
/// Appends formatLogLine(r) and a newline to `f` and flushes it.
bool writeLogLine(std::FILE *f, const LogRecord &r);
/// The terminal progress line: "step 10/20 loss 4.1589 samples/s 812.3 device 1.2 MiB host
/// 45.6 MiB".
std::string formatProgress(const LogRecord &r, int64_t steps);

/// The mean over the step's micro-batches: the (double) losses summed in order, divided by
/// their count in double, then rounded to float.
float meanLoss(const std::vector<float> &losses);

/// What the schedule sets for one optimizer step.
struct StepScalars {
  double lr = 0;    ///< the (first) parameter group's lr: the one logged
  double auxLr = 0; ///< Muon's AdamW group's lr (= lr for other optimizers)
  double beta1 = 0; ///< Adam's beta1 (cycled by OneCycle's cycle_momentum)
};

/// A learning-rate schedule with every parameter resolved (the program descriptor's "run.lr";
/// ds-opt applies DeepSpeed's defaults): the optimizer's base lr (and Muon's AdamW group's),
/// its beta1, and the schedule's kind and parameters as DeepSpeed names them.
struct LrSchedule {
  double base = 0, auxBase = 0, beta1 = 0;
  dsrt_lr_schedule kind = DSRT_LR_CONSTANT;
  double warmupMinLr = 0, warmupMaxLr = 0;
  int64_t warmupNumSteps = 0;
  bool warmupLinear = false; ///< else log
  int64_t totalNumSteps = 0;
  double warmupMinRatio = 0, cosMinRatio = 0;
  double cycleMinLr = 0, cycleMaxLr = 0, decayLrRate = 0;
  double cycleFirstStepSize = 0, cycleSecondStepSize = 0;
  int64_t cycleFirstStairCount = 0, cycleSecondStairCount = 0;
  double decayStepSize = 0;
  bool cycleMomentum = false;
  double cycleMinMom = 0, cycleMaxMom = 0, decayMomRate = 0;
  double rangeTestMinLr = 0, rangeTestStepSize = 0, rangeTestStepRate = 0;
  bool rangeTestStaircase = false;
};
/// Reads a descriptor's "lr" object; false with `err` naming the field when malformed.
bool readLrSchedule(const Json &j, LrSchedule &out, std::string &err);

/// The scalars applied at optimizer step `step` (from 1) under `schedule`. DeepSpeed's
/// semantics: a scheduler starts at its initial value and steps after each optimizer step, so
/// step s uses the schedule at batch iteration s - 2 (step 1 its value before starting).
StepScalars scheduled(const LrSchedule &schedule, int64_t step);

/// A flat token file as nanoGPT writes it (uint16 or uint32 tokens), memory-mapped. Sample j
/// of a language-model input is tokens [j T, j T + T); its target is the same window shifted
/// by one, so `samples(T)` = (tokens - 1) / T.
class TokenFile {
public:
  TokenFile() = default;
  TokenFile(const TokenFile &) = delete;
  TokenFile &operator=(const TokenFile &) = delete;
  ~TokenFile();
  /// `tokenBytes` is 2 (uint16) or 4 (uint32).
  bool open(const std::string &path, int tokenBytes, std::string &err);
  bool isOpen() const { return map_ != nullptr; }
  int64_t tokens() const { return static_cast<int64_t>(bytes_ / tokenBytes_); }
  int64_t samples(int64_t seqLen) const { return tokens() > 0 ? (tokens() - 1) / seqLen : 0; }
  /// Writes sample `j` (shifted by `shift` tokens) widened to `dtype` (DSRT_I64 or DSRT_I32).
  void window(int64_t j, int64_t seqLen, int64_t shift, int32_t dtype, void *dst) const;

private:
  void *map_ = nullptr;
  size_t bytes_ = 0;
  int tokenBytes_ = 2;
};

} // namespace dsrt::io

#endif // DSRT_IO_H

// dsrt internals shared by the core and the CPU kernels (not installed).
#ifndef DSRT_INTERNAL_H
#define DSRT_INTERNAL_H

#include "dsrt/dsrt.h"
#include "../device/device.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

struct dsrt_storage {
  void *data = nullptr;
  uint64_t bytes = 0; // counted bytes: numel * dtype size
  size_t real = 0;    // allocated bytes (padded to the alignment)
  int64_t refs = 1;
  bool borrowed = false;
  int32_t space = DSRT_SPACE_DEVICE; ///< device (the arena) or host (core/spaces.cpp)
};

struct dsrt_context {
  uint64_t budget = 0;
  /// Nanoseconds the host spent in dsrt_event_wait on the communication thread.
  uint64_t waitNs = 0;
  uint64_t inUse = 0;
  uint64_t peak = 0;
  int32_t threads = 1;
  std::mt19937_64 rng;
  struct Slot {
    dsrt_storage *storage = nullptr;
    int32_t dtype = 0;
    int32_t rank = 0;
    int64_t dims[DSRT_MAX_RANK] = {};
    int64_t offset = 0;  ///< bytes into the storage (a view of a flat buffer)
    bool pinned = false; ///< a view or a viewed buffer: writes copy instead of rebinding
    bool view = false;   ///< shares another slot's storage
    int32_t space = DSRT_SPACE_DEVICE;
    uint64_t fileOffset = 0; ///< an NVMe slot: its place in the swap file
  };
  std::vector<Slot> slots;
  /// The device: memory, copies, the compute stream and the kernels (src/device/device.h).
  std::unique_ptr<dsrt::Device> device;
  /// Freed blocks by allocated size. A training step allocates the same sizes in the same
  /// order every time, so reusing them avoids the page faults of fresh memory (the count of
  /// bytes in use, which the plan predicts, is unaffected).
  std::unordered_map<size_t, std::vector<void *>> freeBlocks;
  /// The data-parallel group (src/comm): a channel and its thread, created by dsrt_comm_init.
  std::shared_ptr<void> comm;
  /// Host memory (offloaded state, staging buffers) and the swap file's slots, counted apart
  /// from the arena; bytes moved per dsrt_move_kind; the transfer stream and the swap file
  /// (core/spaces.cpp).
  uint64_t hostInUse = 0, hostPeak = 0, nvmeInUse = 0, nvmePeak = 0;
  std::unordered_map<size_t, std::vector<void *>> hostFreeBlocks;
  std::atomic<uint64_t> moved[4] = {};
  uint64_t transferWaitNs = 0;
  std::shared_ptr<void> transfer;
  /// --trace (core/trace.cpp): whether runtime calls are being recorded, the site (the ds op)
  /// whose calls the program is making now, and the recorded events.
  std::atomic<bool> tracing{false};
  int32_t site = -1;
  std::shared_ptr<void> trace;
};

/// A point in a stream. A compute-stream event is the device's (`native`, or complete when
/// recorded on the CPU); a collective's event completes on the communication thread and holds
/// the storages it reads and writes.
struct dsrt_event {
  std::atomic<int32_t> done{0};
  void *native = nullptr; ///< the device's event (a cudaEvent_t), owned by ctx->device
  std::mutex mutex;
  std::condition_variable cv;
  dsrt_context *ctx = nullptr;
  std::vector<dsrt_storage *> held;
  bool transfer = false; ///< a move's: waiting for it is the offload stall
  void complete() {
    std::lock_guard<std::mutex> lock(mutex);
    done = 1;
    cv.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return done.load() != 0; });
  }
};

namespace dsrt {

/// Storage references: a collective holds its buffers until its event is released.
inline void retainStorage(dsrt_storage *s) {
  if (s)
    ++s->refs;
}
void releaseStorage(dsrt_context *ctx, dsrt_storage *s);
/// Copies `why` into a caller's buffer of `cap` bytes, NUL-terminated (error reasons).
void copyMessage(const std::string &why, char *err, size_t cap);
/// Host-space storage (core/spaces.cpp): allocation and return.
dsrt_storage *allocateHost(dsrt_context *ctx, uint64_t bytes);
void freeHost(dsrt_context *ctx, dsrt_storage *s);
/// NVMe slots (core/spaces.cpp): the file region of a slot defined in the swap file, and the
/// synchronous reads and writes of dsrt_slot_get / dsrt_slot_set.
uint64_t reserveSwap(dsrt_context *ctx, uint64_t bytes);
void readSwap(dsrt_context *ctx, uint64_t offset, dsrt_storage *dst, uint64_t bytes);
void writeSwap(dsrt_context *ctx, uint64_t offset, const void *src, dsrt_storage *owner,
               uint64_t bytes);
/// Ends the transfer stream and closes the swap file (dsrt_context_destroy).
void closeSpaces(dsrt_context *ctx);

/// Wall time per kernel (and op code) while the environment sets DSRT_PROFILE; the table goes
/// to stderr when the context is destroyed. Costs one getenv-cached branch when off.
struct ProfileScope {
  explicit ProfileScope(const char *name, int32_t op = -1);
  ~ProfileScope();
  const char *name;
  int32_t op;
  int64_t start = -1;
};
void printProfile();
#define DSRT_PROFILE(...) ::dsrt::ProfileScope dsrtProfileScope_(__VA_ARGS__)

/// The streams of a trace: the host thread that runs the compute stream (the CPU device's
/// kernels, the driver's phases), the transfer thread, and each group's collectives thread.
inline constexpr const char *kComputeStream = "compute";
inline constexpr const char *kTransferStream = "transfer";

/// Nanoseconds of the monotonic clock (shared by the ranks of one machine).
int64_t traceNow();
/// Records one span [start, end) of runtime call `name` of category `cat` ("kernel",
/// "collective", "transfer", "wait", "copy", "driver") on `stream`, made for site `site`
/// (core/trace.cpp). The strings outlive the trace (literals, or interned with
/// traceStreamName).
void traceRecord(dsrt_context *ctx, const char *stream, const char *cat, const char *name,
                 int32_t site, int64_t start, int64_t end, std::string detail = {});
/// A stable copy of `name` for traceRecord.
const char *traceStreamName(const std::string &name);

/// Records the enclosing scope as a span of `name` on the compute stream while tracing.
/// Costs one relaxed load when off. On a device whose stream runs apart from the host (CUDA),
/// the scope waits for the stream at both ends, so that the span is the work's own time, not
/// its launch (a traced step runs slower there: trace a step after the timed ones).
struct TraceScope {
  TraceScope(dsrt_context *ctx, const char *cat, const char *name)
      : ctx(ctx), cat(cat), name(name), start(begin(ctx)) {}
  ~TraceScope() {
    if (start < 0)
      return;
    if (!ctx->device->hostAddressable())
      ctx->device->synchronize();
    traceRecord(ctx, kComputeStream, cat, name, ctx->site, start, traceNow());
  }
  static int64_t begin(dsrt_context *ctx) {
    if (!ctx->tracing.load(std::memory_order_relaxed))
      return -1;
    if (!ctx->device->hostAddressable())
      ctx->device->synchronize();
    return traceNow();
  }
  dsrt_context *ctx;
  const char *cat, *name;
  int64_t start;
};
#define DSRT_TRACE(ctx, cat, name) ::dsrt::TraceScope dsrtTraceScope_(ctx, cat, name)

/// Ends the process after a fatal error (its message printed), and with it every rank of
/// its group: a multi-rank communication group registers a hook that aborts the whole job, so
/// that no other rank waits for this one. Flushes stdio first. Never returns.
[[noreturn]] void endJob(int code);
/// The group's hook (null to remove it).
void setEndJobHook(void (*hook)(void *arg, int code), void *arg);

/// Programming errors (compiler bugs): prints `dsrt: <kernel>: <what>` and aborts (the whole
/// job when there is one).
[[noreturn]] void fail(const char *kernel, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

const char *dtypeName(int32_t dtype);
std::string shapeString(int32_t rank, const int64_t *dims);
std::string shapeString(const dsrt_tensor *t);

inline bool isFloat(int32_t dt) { return dt == DSRT_F32 || dt == DSRT_F64; }

void checkDtype(const char *kernel, const dsrt_tensor *t, int32_t dtype, const char *what);
void checkSameShape(const char *kernel, const dsrt_tensor *a, const dsrt_tensor *b);

/// Calls f with a value of the C++ type of `dtype` (f32, f64, i64, i32, i1 as uint8).
template <class F> void dispatchAll(const char *kernel, int32_t dtype, F &&f) {
  switch (dtype) {
  case DSRT_F32:
    f(float());
    return;
  case DSRT_F64:
    f(double());
    return;
  case DSRT_I64:
    f(int64_t());
    return;
  case DSRT_I32:
    f(int32_t());
    return;
  case DSRT_I1:
    f(uint8_t());
    return;
  default:
    fail(kernel, "unsupported dtype %s", dtypeName(dtype));
  }
}
template <class F> void dispatchFloat(const char *kernel, int32_t dtype, F &&f) {
  switch (dtype) {
  case DSRT_F32:
    f(float());
    return;
  case DSRT_F64:
    f(double());
    return;
  default:
    fail(kernel, "unsupported dtype %s (needs f32 or f64)", dtypeName(dtype));
  }
}

/// Up to three operands broadcast (aligned from the right) to an output shape, coalesced.
/// strides are in elements, 0 on broadcast dims.
struct Broadcast {
  int nd = 0;
  int64_t dims[DSRT_MAX_RANK];
  int64_t strides[3][DSRT_MAX_RANK];
  int nin = 0;
  Broadcast(const char *kernel, const dsrt_tensor *out, const dsrt_tensor *const *ins, int nin);
  /// Calls row(outOffset, inOffsets[3], innerStrides[3], n) for every innermost row, in
  /// parallel over rows.
  template <class Row> void forEachRow(int64_t total, Row &&row) const;
};

/// A strided copy of `dims` elements of `elemSize` bytes (strides in elements).
void stridedCopy(int rank, const int64_t *dims, size_t elemSize, const void *src,
                 const int64_t *srcStrides, void *dst, const int64_t *dstStrides);

/// One strided copy of `dims` elements: element offsets and strides (in elements) into the
/// source and the destination (core/layout.cpp).
struct CopyLayout {
  int rank = 0;
  int64_t dims[DSRT_MAX_RANK] = {};
  int64_t src[DSRT_MAX_RANK] = {};
  int64_t dst[DSRT_MAX_RANK] = {};
  int64_t srcOffset = 0, dstOffset = 0;
};
/// The copies of the data-movement kernels, their operands checked (out's shape is the result).
CopyLayout transposeLayout(const dsrt_tensor *out, const dsrt_tensor *in, const int64_t *perm);
CopyLayout broadcastLayout(const dsrt_tensor *out, const dsrt_tensor *in);
CopyLayout sliceLayout(const dsrt_tensor *out, const dsrt_tensor *in, int64_t dim, int64_t start,
                       int64_t step);
CopyLayout insertSliceLayout(const dsrt_tensor *out, const dsrt_tensor *in, int64_t dim,
                             int64_t start, int64_t step);

/// The row-major product out = op(a) op(b) of dsrt_matmul, batched with broadcast batch dims
/// (checked): C[M,N] = A[M,K] B[K,N] per batch, A and B at element offsets `offsets(bi)`.
struct MatmulShape {
  int64_t M = 0, N = 0, K = 0, lda = 0, ldb = 0;
  int64_t batch = 1;
  int outBatch = 0;
  int64_t batchDims[DSRT_MAX_RANK] = {};
  int64_t sa[DSRT_MAX_RANK] = {}, sb[DSRT_MAX_RANK] = {}; ///< 0 on broadcast dims
  bool bShared = true; ///< one rhs for every batch
  bool aContig = true; ///< the lhs batches are contiguous (none broadcast)
  void offsets(int64_t bi, int64_t &oa, int64_t &ob) const;
};
MatmulShape matmulShape(const dsrt_tensor *out, const dsrt_tensor *a, const dsrt_tensor *b,
                        bool trans_a, bool trans_b);

/// dsrt_matmul_view's operands, checked: per batch (i0, i1), C = op(A) op(B) with each
/// matrix at `at(i0, i1)` elements into its tensor, row-major with leading dimension `ld`,
/// `trans` when its columns are strided (only A and B; when the result's rows are the unit
/// stride, the product is computed transposed, C^T = op(B)^T op(A)^T, with the operands
/// swapped).
struct MatmulViews {
  struct Matrix {
    int64_t offset = 0, s0 = 0, s1 = 0, ld = 1;
    bool trans = false;
    int64_t at(int64_t i0, int64_t i1) const { return offset + i0 * s0 + i1 * s1; }
  };
  int64_t b0 = 0, b1 = 0, M = 0, N = 0, K = 0;
  Matrix a, b, c;
  bool swapped = false; ///< a and b hold the original b and a
};
MatmulViews matmulViews(const dsrt_tensor *out, const dsrt_tensor *a, const dsrt_tensor *b,
                        const int64_t *views);

/// Row-major contiguous strides of a shape.
void contiguousStrides(int rank, const int64_t *dims, int64_t *strides);

/// Parallel-for threshold: loops with less work than this run on one thread.
constexpr int64_t kParallelGrain = 32768;

} // namespace dsrt

template <class Row> void dsrt::Broadcast::forEachRow(int64_t total, Row &&row) const {
  if (total == 0)
    return;
  int64_t inner = nd ? dims[nd - 1] : 1;
  int64_t rows = total / inner;
  int64_t is[3] = {0, 0, 0};
  for (int k = 0; k < nin; ++k)
    is[k] = nd ? strides[k][nd - 1] : 0;
  // Long rows are cut into chunks so that a few big rows still spread over the threads.
  const int64_t chunk = inner > 16384 ? 16384 : inner;
  const int64_t chunks = (inner + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (total > kParallelGrain && rows * chunks > 1)
  for (int64_t rc = 0; rc < rows * chunks; ++rc) {
    int64_t r = rc / chunks, c = rc % chunks;
    int64_t off[3] = {0, 0, 0};
    int64_t rem = r;
    for (int d = nd - 2; d >= 0; --d) {
      int64_t i = rem % dims[d];
      rem /= dims[d];
      for (int k = 0; k < nin; ++k)
        off[k] += i * strides[k][d];
    }
    int64_t b = c * chunk;
    for (int k = 0; k < nin; ++k)
      off[k] += b * is[k];
    int64_t n = inner - b < chunk ? inner - b : chunk;
    row(r * inner + b, off, is, n);
  }
}

#endif // DSRT_INTERNAL_H

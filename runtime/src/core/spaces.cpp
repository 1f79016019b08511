//===- spaces.cpp - host memory, the transfer stream, the NVMe swap file ----===//
//
// ZeRO-Offload and ZeRO-Infinity's tiers. Host tensors come from aligned host memory counted
// apart from the device arena. Moves and NVMe reads and writes run in call order on one
// transfer thread per context (the transfer stream); each returns an event that holds the
// storages it touches. The swap file is private to the process: created, reserved in full and
// unlinked at once, so no file is left behind however the process ends. Its I/O goes through
// io_uring with O_DIRECT where the kernel and the file system allow it, else pread/pwrite.
//
//===----------------------------------------------------------------------===//
#include "internal.h"

#include "dsrt/io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <utility>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <thread>

#ifdef DSRT_HAVE_URING
#include <liburing.h>
#endif

using namespace dsrt;

namespace {
constexpr uint64_t kAlign = 4096; // O_DIRECT's alignment (and the swap file's slot alignment)

uint64_t roundUp(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

/// The transfer stream: jobs run in order on one thread.
struct TransferStream {
  std::thread thread;
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::function<void()>> jobs;
  bool stop = false;

  TransferStream() {
    thread = std::thread([this] {
      for (;;) {
        std::function<void()> job;
        {
          std::unique_lock<std::mutex> lock(mutex);
          cv.wait(lock, [&] { return stop || !jobs.empty(); });
          if (jobs.empty())
            return;
          job = std::move(jobs.front());
          jobs.pop_front();
        }
        job();
      }
    });
  }
  ~TransferStream() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    cv.notify_all();
    thread.join();
  }
  void enqueue(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      jobs.push_back(std::move(job));
    }
    cv.notify_all();
  }
};

/// The swap file and its I/O engine.
struct SwapFile {
  int direct = -1;   ///< O_DIRECT descriptor (-1 where refused)
  int buffered = -1; ///< the same file without O_DIRECT (unaligned requests)
  uint64_t size = 0, used = 0;
  int64_t blockSize = 1 << 20;
  int32_t queueDepth = 8;
  bool singleSubmit = false;
  std::string engine;
#ifdef DSRT_HAVE_URING
  bool uring = false;
  struct io_uring ring;
#endif
  ~SwapFile() {
#ifdef DSRT_HAVE_URING
    if (uring)
      io_uring_queue_exit(&ring);
#endif
    if (direct >= 0)
      close(direct);
    if (buffered >= 0)
      close(buffered);
  }

  /// Reads (write = false) or writes `bytes` at file offset `offset`, all of it or the job ends.
  void io(bool write, uint64_t offset, void *buf, uint64_t bytes) {
    bool aligned = direct >= 0 && reinterpret_cast<uintptr_t>(buf) % kAlign == 0 &&
                   offset % kAlign == 0 && bytes % kAlign == 0;
    int fd = aligned ? direct : buffered;
#ifdef DSRT_HAVE_URING
    if (uring) {
      uringIo(write, fd, offset, static_cast<char *>(buf), bytes);
      return;
    }
#endif
    char *p = static_cast<char *>(buf);
    uint64_t done = 0;
    while (done < bytes) {
      ssize_t n = write ? pwrite(fd, p + done, bytes - done, offset + done)
                        : pread(fd, p + done, bytes - done, offset + done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        ioFailed(write, offset + done, n < 0 ? errno : EIO);
      done += static_cast<uint64_t>(n);
    }
  }

  [[noreturn]] void ioFailed(bool write, uint64_t offset, int err) {
    std::fprintf(stderr, "dsrt: NVMe swap %s at byte %llu failed: %s\n", write ? "write" : "read",
                 (unsigned long long)offset, std::strerror(err));
    endJob(1);
  }

#ifdef DSRT_HAVE_URING
  /// `blockSize` requests, at most `queueDepth` in flight; short transfers are continued.
  void uringIo(bool write, int fd, uint64_t offset, char *buf, uint64_t bytes) {
    struct Req {
      uint64_t off, len;
    };
    std::deque<Req> todo;
    for (uint64_t o = 0; o < bytes; o += blockSize)
      todo.push_back({o, std::min<uint64_t>(blockSize, bytes - o)});
    int inflight = 0;
    std::vector<Req> slots(queueDepth);
    std::vector<int> freeSlots;
    for (int i = queueDepth - 1; i >= 0; --i)
      freeSlots.push_back(i);
    while (!todo.empty() || inflight) {
      int queued = 0;
      while (!todo.empty() && !freeSlots.empty()) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
        if (!sqe)
          break;
        int k = freeSlots.back();
        freeSlots.pop_back();
        slots[k] = todo.front();
        todo.pop_front();
        if (write)
          io_uring_prep_write(sqe, fd, buf + slots[k].off, slots[k].len, offset + slots[k].off);
        else
          io_uring_prep_read(sqe, fd, buf + slots[k].off, slots[k].len, offset + slots[k].off);
        io_uring_sqe_set_data64(sqe, k);
        ++queued;
        ++inflight;
        if (singleSubmit) { // DeepSpeed's single_submit: one request per submission
          io_uring_submit(&ring);
          queued = 0;
        }
      }
      if (queued)
        io_uring_submit(&ring);
      struct io_uring_cqe *cqe = nullptr;
      int rc = io_uring_wait_cqe(&ring, &cqe);
      if (rc == -EINTR)
        continue;
      if (rc < 0)
        ioFailed(write, offset, -rc);
      int k = static_cast<int>(io_uring_cqe_get_data64(cqe));
      int res = cqe->res;
      io_uring_cqe_seen(&ring, cqe);
      --inflight;
      freeSlots.push_back(k);
      if (res <= 0)
        ioFailed(write, offset + slots[k].off, res < 0 ? -res : EIO);
      if (static_cast<uint64_t>(res) < slots[k].len) // short: the rest goes again
        todo.push_front({slots[k].off + res, slots[k].len - res});
    }
  }
#endif
};

TransferStream &stream(dsrt_context *ctx) {
  if (!ctx->transfer)
    ctx->transfer = std::make_shared<TransferStream>();
  return *static_cast<TransferStream *>(ctx->transfer.get());
}

/// Enqueues `job` on the transfer stream, recorded as a span `name` of `bytes` while tracing.
void transferJob(dsrt_context *ctx, const char *name, uint64_t bytes, std::function<void()> job) {
  if (!ctx->tracing.load(std::memory_order_relaxed))
    return stream(ctx).enqueue(std::move(job));
  int32_t site = ctx->site;
  stream(ctx).enqueue([=, job = std::move(job)] {
    int64_t start = traceNow();
    job();
    traceRecord(ctx, kTransferStream, "transfer", name, site, start, traceNow(),
                std::to_string(bytes) + " bytes");
  });
}

/// The swap file is the transfer stream's second member: both live in ctx->transfer's
/// neighbour, created by dsrt_nvme_open.
std::unordered_map<dsrt_context *, std::unique_ptr<SwapFile>> &swapFiles() {
  static std::unordered_map<dsrt_context *, std::unique_ptr<SwapFile>> files;
  return files;
}
std::mutex swapMutex;

SwapFile *swapOf(dsrt_context *ctx) {
  std::lock_guard<std::mutex> lock(swapMutex);
  auto it = swapFiles().find(ctx);
  return it == swapFiles().end() ? nullptr : it->second.get();
}

SwapFile &needSwap(dsrt_context *ctx, const char *kernel) {
  SwapFile *f = swapOf(ctx);
  if (!f)
    fail(kernel, "an NVMe slot without a swap file (dsrt_nvme_open was not called)");
  return *f;
}

dsrt_event *newTransferEvent(dsrt_context *ctx) {
  auto *e = new dsrt_event();
  e->ctx = ctx;
  e->transfer = true;
  return e;
}
} // namespace

//===----------------------------------------------------------------------===//
// Host memory
//===----------------------------------------------------------------------===//

dsrt_storage *dsrt::allocateHost(dsrt_context *ctx, uint64_t bytes) {
  auto *s = new dsrt_storage();
  size_t real = roundUp(std::max<uint64_t>(bytes, 1));
  auto &cached = ctx->hostFreeBlocks[real];
  if (!cached.empty()) {
    s->data = cached.back();
    cached.pop_back();
  } else {
    s->data = std::aligned_alloc(kAlign, real);
  }
  if (!s->data) {
    std::fprintf(stderr, "dsrt: out of host memory allocating %llu bytes (%llu in use)\n",
                 (unsigned long long)bytes, (unsigned long long)ctx->hostInUse);
    endJob(1);
  }
  s->real = real;
  s->bytes = bytes;
  s->space = DSRT_SPACE_HOST;
  ctx->hostInUse += bytes;
  ctx->hostPeak = std::max(ctx->hostPeak, ctx->hostInUse);
  return s;
}

void dsrt::freeHost(dsrt_context *ctx, dsrt_storage *s) {
  ctx->hostInUse -= s->bytes;
  ctx->hostFreeBlocks[s->real].push_back(s->data);
  delete s;
}

extern "C" dsrt_tensor *dsrt_tensor_alloc_host(dsrt_context *ctx, int32_t dtype, int32_t rank,
                                               const int64_t *dims) {
  // A view handle over fresh storage: the shape checks are dsrt_tensor_host's.
  dsrt_tensor *t = dsrt_tensor_host(ctx, dtype, rank, dims, nullptr);
  delete t->storage;
  t->storage = allocateHost(ctx, (uint64_t)t->numel * dsrt_dtype_size(dtype));
  t->data = t->storage->data;
  return t;
}

extern "C" int32_t dsrt_tensor_space(const dsrt_tensor *t) {
  return t->storage && !t->storage->borrowed ? t->storage->space : DSRT_SPACE_DEVICE;
}

/// The bytes in use and the peak of `space` (null for a code that is not a space).
static std::pair<const uint64_t *, const uint64_t *> spaceCounters(const dsrt_context *ctx,
                                                                   int32_t space) {
  switch (static_cast<dsrt_space>(space)) {
  case DSRT_SPACE_DEVICE:
    return {&ctx->inUse, &ctx->peak};
  case DSRT_SPACE_HOST:
    return {&ctx->hostInUse, &ctx->hostPeak};
  case DSRT_SPACE_NVME:
    return {&ctx->nvmeInUse, &ctx->nvmePeak};
  }
  return {nullptr, nullptr};
}
extern "C" uint64_t dsrt_space_bytes(dsrt_context *ctx, int32_t space) {
  const uint64_t *n = spaceCounters(ctx, space).first;
  return n ? *n : 0;
}
extern "C" uint64_t dsrt_space_peak_bytes(dsrt_context *ctx, int32_t space) {
  const uint64_t *n = spaceCounters(ctx, space).second;
  return n ? *n : 0;
}
extern "C" uint64_t dsrt_moved_bytes(dsrt_context *ctx, int32_t kind) {
  return kind >= 0 && kind < 4 ? ctx->moved[kind].load() : 0;
}
extern "C" double dsrt_transfer_wait_seconds(dsrt_context *ctx) {
  return ctx->transferWaitNs * 1e-9;
}

//===----------------------------------------------------------------------===//
// Moves
//===----------------------------------------------------------------------===//

extern "C" dsrt_event *dsrt_move(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *in) {
  uint64_t bytes = (uint64_t)in->numel * dsrt_dtype_size(in->dtype);
  if (bytes != (uint64_t)out->numel * dsrt_dtype_size(out->dtype))
    fail("move", "%s %s into %s %s: the byte counts differ", shapeString(in).c_str(),
         dtypeName(in->dtype), shapeString(out).c_str(), dtypeName(out->dtype));
  int32_t from = dsrt_tensor_space(in), to = dsrt_tensor_space(out);
  ctx->device->synchronize(); // after the compute stream's work so far
  dsrt_event *e = newTransferEvent(ctx);
  for (dsrt_storage *s : {in->storage, out->storage})
    if (s) {
      retainStorage(s);
      e->held.push_back(s);
    }
  int kind = -1;
  if (from != to)
    switch (static_cast<dsrt_space>(to)) {
    case DSRT_SPACE_HOST:
      kind = DSRT_MOVE_DEVICE_TO_HOST;
      break;
    case DSRT_SPACE_DEVICE:
      kind = DSRT_MOVE_HOST_TO_DEVICE;
      break;
    case DSRT_SPACE_NVME: // a swap file's slot moves by dsrt_slot_read / dsrt_slot_write
      fail("move", "a tensor in the swap file moves by dsrt_slot_read or dsrt_slot_write");
    }
  void *dst = out->data;
  const void *src = in->data;
  Device *device = ctx->device.get();
  transferJob(ctx, "move", bytes, [=] {
    if (dst != src)
      device->copy(dst, src, bytes);
    if (kind >= 0)
      ctx->moved[kind] += bytes;
    e->complete();
  });
  return e;
}

//===----------------------------------------------------------------------===//
// The swap file
//===----------------------------------------------------------------------===//

extern "C" int32_t dsrt_nvme_open(dsrt_context *ctx, const char *dir, uint64_t bytes,
                                  int64_t block_size, int32_t queue_depth, int32_t single_submit,
                                  char *err, size_t cap) {
  std::string d = dir ? dir : "";
  auto need = [&] {
    return std::to_string(bytes) + " bytes (" + dsrt::io::formatBytes(bytes) + ")";
  };
  struct stat st;
  if (d.empty() || stat(d.c_str(), &st) != 0) {
    copyMessage("nvme_path '" + d + "' does not exist; create the directory (this rank needs " +
                  need() + " in it) or point nvme_path at one",
              err, cap);
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) {
    copyMessage("nvme_path '" + d + "' is not a directory; point nvme_path at a directory with " +
                  need() + " free",
              err, cap);
    return -1;
  }
  auto file = std::make_unique<SwapFile>();
  char name[64];
  std::snprintf(name, sizeof name, "/ds-swap-%d-rank%d.bin", (int)getpid(),
                ctx->comm ? dsrt_comm_rank(ctx) : 0);
  std::string path = d + name;
  file->buffered = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (file->buffered < 0) {
    copyMessage("cannot create the swap file in nvme_path '" + d + "': " + std::strerror(errno) +
                  "; make the directory writable or point nvme_path at another one (this rank "
                  "needs " + need() + ")",
              err, cap);
    return -1;
  }
  file->direct = open(path.c_str(), O_RDWR | O_DIRECT | O_CLOEXEC);
  unlink(path.c_str()); // private: gone with the process, however it ends
  struct statvfs vfs;
  if (statvfs(d.c_str(), &vfs) == 0) {
    uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    if (avail < roundUp(bytes)) {
      copyMessage("nvme_path '" + d + "' has " + std::to_string(avail) + " bytes free but this " +
                    "rank's swap file needs " + need() +
                    "; free space there or point nvme_path at a larger device",
                err, cap);
      return -1;
    }
  }
  uint64_t size = roundUp(bytes);
  // A file-size limit (ulimit -f) must give an error that names it, not SIGXFSZ's core dump.
  std::signal(SIGXFSZ, SIG_IGN);
  int rc = size ? posix_fallocate(file->buffered, 0, static_cast<off_t>(size)) : 0;
  if (rc != 0) {
    copyMessage("cannot reserve " + need() + " for the swap file in nvme_path '" + d + "': " +
                  std::strerror(rc) + "; free space there or point nvme_path at a larger device",
              err, cap);
    return -1;
  }
  file->size = size;
  file->blockSize = std::max<int64_t>(kAlign, block_size / (int64_t)kAlign * (int64_t)kAlign);
  file->queueDepth = std::max(1, queue_depth);
  file->singleSubmit = single_submit != 0;
  std::string why;
#ifdef DSRT_HAVE_URING
  int u = io_uring_queue_init(static_cast<unsigned>(file->queueDepth), &file->ring, 0);
  file->uring = u == 0;
  if (u != 0)
    why = std::string("io_uring is unavailable (") + std::strerror(-u) + ")";
#else
  why = "this runtime was built without liburing (install liburing-dev)";
#endif
  if (file->direct < 0)
    why += std::string(why.empty() ? "" : "; ") + "O_DIRECT is refused by the file system (" +
           std::strerror(errno) + ")";
#ifdef DSRT_HAVE_URING
  file->engine = file->uring ? (file->direct >= 0 ? "io_uring+O_DIRECT" : "io_uring")
                             : "pread/pwrite";
#else
  file->engine = "pread/pwrite";
#endif
  if (!why.empty())
    std::fprintf(stderr, "dsrt: warning: NVMe swap in '%s' uses %s: %s\n", d.c_str(),
                 file->engine.c_str(), why.c_str());
  std::lock_guard<std::mutex> lock(swapMutex);
  swapFiles()[ctx] = std::move(file);
  return 0;
}

extern "C" const char *dsrt_nvme_engine(dsrt_context *ctx) {
  SwapFile *f = swapOf(ctx);
  return f ? f->engine.c_str() : "";
}

uint64_t dsrt::reserveSwap(dsrt_context *ctx, uint64_t bytes) {
  SwapFile &f = needSwap(ctx, "slot_define_in");
  uint64_t at = f.used;
  if (at + roundUp(bytes) > f.size)
    fail("slot_define_in", "the NVMe slots need more than the %llu bytes of the swap file",
         (unsigned long long)f.size);
  f.used += roundUp(bytes);
  ctx->nvmeInUse += bytes;
  ctx->nvmePeak = std::max(ctx->nvmePeak, ctx->nvmeInUse);
  return at;
}

void dsrt::readSwap(dsrt_context *ctx, uint64_t offset, dsrt_storage *dst, uint64_t bytes) {
  SwapFile &f = needSwap(ctx, "slot_get");
  // Host storages are padded to the alignment: read whole blocks straight into them.
  f.io(false, offset, dst->data, dst->real >= roundUp(bytes) ? roundUp(bytes) : bytes);
}

void dsrt::writeSwap(dsrt_context *ctx, uint64_t offset, const void *src, dsrt_storage *owner,
                     uint64_t bytes) {
  SwapFile &f = needSwap(ctx, "slot_set");
  bool whole = owner && owner->space == DSRT_SPACE_HOST && src == owner->data &&
               owner->real >= roundUp(bytes);
  f.io(true, offset, const_cast<void *>(src), whole ? roundUp(bytes) : bytes);
}

extern "C" void dsrt_slot_define_in(dsrt_context *ctx, int32_t index, int32_t space,
                                    int32_t dtype, int32_t rank, const int64_t *dims) {
  switch (static_cast<dsrt_space>(space)) {
  case DSRT_SPACE_DEVICE:
    return dsrt_slot_define(ctx, index, dtype, rank, dims);
  case DSRT_SPACE_HOST:
  case DSRT_SPACE_NVME:
    break;
  }
  if (index < 0)
    fail("slot_define_in", "negative slot index %d", index);
  if ((size_t)index >= ctx->slots.size())
    ctx->slots.resize(index + 1);
  dsrt_context::Slot &slot = ctx->slots[index];
  releaseStorage(ctx, slot.storage);
  slot = dsrt_context::Slot();
  slot.dtype = dtype;
  slot.rank = rank;
  uint64_t numel = 1;
  for (int i = 0; i < rank; ++i) {
    slot.dims[i] = dims[i];
    numel *= dims[i];
  }
  uint64_t bytes = numel * dsrt_dtype_size(dtype);
  slot.space = space;
  if (space == DSRT_SPACE_HOST) {
    slot.storage = allocateHost(ctx, bytes);
    std::memset(slot.storage->data, 0, slot.storage->real);
    return;
  }
  if (space != DSRT_SPACE_NVME)
    fail("slot_define_in", "unknown memory space %d", space);
  // The file's blocks read as zeros (reserved, never written). The slot's storage is a
  // placeholder that records the bytes.
  slot.fileOffset = reserveSwap(ctx, bytes);
  slot.storage = new dsrt_storage();
  slot.storage->borrowed = true;
  slot.storage->bytes = bytes;
  slot.storage->space = DSRT_SPACE_NVME;
}

extern "C" int32_t dsrt_slot_space(dsrt_context *ctx, int32_t index) {
  if (index < 0 || (size_t)index >= ctx->slots.size())
    fail("slot_space", "slot %d is not defined", index);
  return ctx->slots[index].space;
}

extern "C" dsrt_event *dsrt_slot_fetch(dsrt_context *ctx, int32_t index, dsrt_tensor *out) {
  if (index < 0 || (size_t)index >= ctx->slots.size() ||
      ctx->slots[index].space != DSRT_SPACE_NVME)
    fail("slot_fetch", "slot %d is not an NVMe slot", index);
  dsrt_context::Slot &slot = ctx->slots[index];
  uint64_t bytes = slot.storage->bytes, offset = slot.fileOffset;
  if (dsrt_tensor_space(out) != DSRT_SPACE_HOST ||
      (uint64_t)out->numel * dsrt_dtype_size(out->dtype) != bytes)
    fail("slot_fetch", "slot %d (%llu bytes) needs a host tensor of its size, got %s %s", index,
         (unsigned long long)bytes, shapeString(out).c_str(), dtypeName(out->dtype));
  SwapFile *f = &needSwap(ctx, "slot_fetch");
  dsrt_event *e = newTransferEvent(ctx);
  retainStorage(out->storage);
  e->held.push_back(out->storage);
  void *dst = out->data;
  bool whole = dst == out->storage->data && out->storage->real >= roundUp(bytes);
  transferJob(ctx, "slot_fetch", bytes, [=] {
    f->io(false, offset, dst, whole ? roundUp(bytes) : bytes);
    ctx->moved[DSRT_MOVE_NVME_TO_HOST] += bytes;
    e->complete();
  });
  return e;
}

extern "C" dsrt_event *dsrt_slot_store(dsrt_context *ctx, int32_t index, const dsrt_tensor *t) {
  if (index < 0 || (size_t)index >= ctx->slots.size() ||
      ctx->slots[index].space != DSRT_SPACE_NVME)
    fail("slot_store", "slot %d is not an NVMe slot", index);
  dsrt_context::Slot &slot = ctx->slots[index];
  uint64_t bytes = (uint64_t)t->numel * dsrt_dtype_size(t->dtype);
  if (bytes != slot.storage->bytes)
    fail("slot_store", "slot %d holds %llu bytes, got %s %s", index,
         (unsigned long long)slot.storage->bytes, shapeString(t).c_str(), dtypeName(t->dtype));
  if (dsrt_tensor_space(t) != DSRT_SPACE_HOST)
    fail("slot_store", "slot %d: the value is not in host memory", index);
  SwapFile *f = &needSwap(ctx, "slot_store");
  ctx->device->synchronize();
  dsrt_event *e = newTransferEvent(ctx);
  retainStorage(t->storage);
  e->held.push_back(t->storage);
  dsrt_storage *owner = t->storage;
  const void *src = t->data;
  uint64_t offset = slot.fileOffset;
  bool whole = src == owner->data && owner->real >= roundUp(bytes);
  transferJob(ctx, "slot_store", bytes, [=] {
    f->io(true, offset, const_cast<void *>(src), whole ? roundUp(bytes) : bytes);
    ctx->moved[DSRT_MOVE_HOST_TO_NVME] += bytes;
    e->complete();
  });
  return e;
}

void dsrt::closeSpaces(dsrt_context *ctx) {
  ctx->transfer.reset(); // runs what is queued, then joins
  std::lock_guard<std::mutex> lock(swapMutex);
  swapFiles().erase(ctx);
}

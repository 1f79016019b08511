// dsrt core: contexts, the device arena (over the device's raw memory), tensor handles and
// persistent slots.
#include "internal.h"

#include <dlfcn.h>
#include <omp.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

using namespace dsrt;

void dsrt::fail(const char *kernel, const char *fmt, ...) {
  std::fprintf(stderr, "dsrt: %s: ", kernel);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
  std::fflush(stderr);
  endJob(134); // as abort() would: 128 + SIGABRT
}

namespace {
std::mutex endJobMutex;
void (*endJobHook)(void *, int) = nullptr;
void *endJobArg = nullptr;
} // namespace

void dsrt::setEndJobHook(void (*hook)(void *, int), void *arg) {
  std::lock_guard<std::mutex> lock(endJobMutex);
  endJobHook = hook;
  endJobArg = arg;
}

void dsrt::endJob(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  void (*hook)(void *, int);
  void *arg;
  {
    std::lock_guard<std::mutex> lock(endJobMutex);
    hook = endJobHook;
    arg = endJobArg;
  }
  if (hook)
    hook(arg, code); // does not return
  std::_Exit(code);
}

const char *dsrt::dtypeName(int32_t dtype) {
  const char *name = dsrt_dtype_name(dtype);
  return name ? name : "?";
}

std::string dsrt::shapeString(int32_t rank, const int64_t *dims) {
  if (rank == 0)
    return "scalar";
  std::string s;
  for (int32_t i = 0; i < rank; ++i) {
    if (i)
      s += 'x';
    s += std::to_string(dims[i]);
  }
  return s;
}

std::string dsrt::shapeString(const dsrt_tensor *t) { return shapeString(t->rank, t->dims); }

void dsrt::checkDtype(const char *kernel, const dsrt_tensor *t, int32_t dtype, const char *what) {
  if (t->dtype != dtype)
    fail(kernel, "%s is %s, expected %s", what, dtypeName(t->dtype), dtypeName(dtype));
}

void dsrt::checkSameShape(const char *kernel, const dsrt_tensor *a, const dsrt_tensor *b) {
  bool same = a->rank == b->rank;
  for (int i = 0; same && i < a->rank; ++i)
    same = a->dims[i] == b->dims[i];
  if (!same)
    fail(kernel, "shapes %s and %s differ", shapeString(a).c_str(), shapeString(b).c_str());
}

void dsrt::contiguousStrides(int rank, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; --i) {
    strides[i] = s;
    s *= dims[i];
  }
}

dsrt::Broadcast::Broadcast(const char *kernel, const dsrt_tensor *out,
                           const dsrt_tensor *const *ins, int nin_)
    : nin(nin_) {
  int64_t st[3][DSRT_MAX_RANK];
  for (int k = 0; k < nin; ++k) {
    const dsrt_tensor *in = ins[k];
    if (in->rank > out->rank)
      fail(kernel, "operand %s has more dims than the result %s", shapeString(in).c_str(),
           shapeString(out).c_str());
    int64_t s = 1;
    for (int d = out->rank - 1, e = in->rank - 1; d >= 0; --d, --e) {
      int64_t id = e >= 0 ? in->dims[e] : 1;
      if (id == out->dims[d]) {
        st[k][d] = id == 1 ? 0 : s;
      } else if (id == 1) {
        st[k][d] = 0;
      } else {
        fail(kernel, "operand %s does not broadcast to %s", shapeString(in).c_str(),
             shapeString(out).c_str());
      }
      s *= id;
    }
  }
  // Drop size-1 dims and merge neighbours that are contiguous in every operand.
  nd = 0;
  for (int d = 0; d < out->rank; ++d) {
    if (out->dims[d] == 1)
      continue;
    if (nd > 0) {
      bool merge = true;
      for (int k = 0; k < nin; ++k)
        merge = merge && strides[k][nd - 1] == st[k][d] * out->dims[d];
      if (merge) {
        dims[nd - 1] *= out->dims[d];
        for (int k = 0; k < nin; ++k)
          strides[k][nd - 1] = st[k][d];
        continue;
      }
    }
    dims[nd] = out->dims[d];
    for (int k = 0; k < nin; ++k)
      strides[k][nd] = st[k][d];
    ++nd;
  }
}

namespace {
/// One contiguous row of n elements (glibc's memcpy picks the CPU's widest moves).
template <class T> inline void copyRow(T *__restrict o, const T *__restrict s, int64_t n) {
  if (n * sizeof(T) >= 64) {
    std::memcpy(o, s, n * sizeof(T));
    return;
  }
#pragma omp simd
  for (int64_t j = 0; j < n; ++j)
    o[j] = s[j];
}

template <class T>
void copyRows(int nd, const int64_t *dims, const T *src, const int64_t *ss, T *dst,
              const int64_t *ds, int64_t total) {
  int64_t inner = dims[nd - 1];
  int64_t rows = total / inner;
  int64_t si = ss[nd - 1], di = ds[nd - 1];
  // Blocks of rows per thread; within a block the outer index advances as an odometer (no
  // division per row: short rows, as a head-splitting transpose's 64, are most of the cost).
  const int64_t block = std::max<int64_t>(1, std::min<int64_t>(rows, 4096 / std::max<int64_t>(inner, 1)));
  const int64_t blocks = (rows + block - 1) / block;
#pragma omp parallel for schedule(static) if (total > kParallelGrain && rows > 1)
  for (int64_t bi = 0; bi < blocks; ++bi) {
    int64_t idx[DSRT_MAX_RANK] = {};
    int64_t so = 0, dof = 0, rem = bi * block;
    for (int d = nd - 2; d >= 0; --d) {
      idx[d] = rem % dims[d];
      rem /= dims[d];
      so += idx[d] * ss[d];
      dof += idx[d] * ds[d];
    }
    const int64_t end = std::min(rows, (bi + 1) * block);
    for (int64_t r = bi * block; r < end; ++r) {
      const T *s = src + so;
      T *o = dst + dof;
      if (si == 1 && di == 1)
        copyRow(o, s, inner);
      else if (di == 1)
        for (int64_t j = 0; j < inner; ++j)
          o[j] = s[j * si];
      else
        for (int64_t j = 0; j < inner; ++j)
          o[j * di] = s[j * si];
      for (int d = nd - 2; d >= 0; --d) { // the next row's offsets
        so += ss[d];
        dof += ds[d];
        if (++idx[d] < dims[d])
          break;
        so -= idx[d] * ss[d];
        dof -= idx[d] * ds[d];
        idx[d] = 0;
      }
    }
  }
}
} // namespace

void dsrt::stridedCopy(int rank, const int64_t *dims, size_t elemSize, const void *src,
                       const int64_t *srcStrides, void *dst, const int64_t *dstStrides) {
  int64_t d[DSRT_MAX_RANK], ss[DSRT_MAX_RANK], ds[DSRT_MAX_RANK];
  int nd = 0;
  int64_t total = 1;
  for (int i = 0; i < rank; ++i) {
    total *= dims[i];
    if (dims[i] == 1)
      continue;
    if (nd > 0 && ss[nd - 1] == srcStrides[i] * dims[i] && ds[nd - 1] == dstStrides[i] * dims[i]) {
      d[nd - 1] *= dims[i];
      ss[nd - 1] = srcStrides[i];
      ds[nd - 1] = dstStrides[i];
      continue;
    }
    d[nd] = dims[i];
    ss[nd] = srcStrides[i];
    ds[nd] = dstStrides[i];
    ++nd;
  }
  if (total == 0)
    return;
  if (nd == 0) {
    d[0] = 1;
    ss[0] = ds[0] = 1;
    nd = 1;
  }
  switch (elemSize) {
  case 1:
    copyRows(nd, d, (const uint8_t *)src, ss, (uint8_t *)dst, ds, total);
    return;
  case 2:
    copyRows(nd, d, (const uint16_t *)src, ss, (uint16_t *)dst, ds, total);
    return;
  case 4:
    copyRows(nd, d, (const uint32_t *)src, ss, (uint32_t *)dst, ds, total);
    return;
  case 8:
    copyRows(nd, d, (const uint64_t *)src, ss, (uint64_t *)dst, ds, total);
    return;
  default:
    fail("strided_copy", "element size %zu", elemSize);
  }
}

//===----------------------------------------------------------------------===//
// Context and arena
//===----------------------------------------------------------------------===//

extern "C" size_t dsrt_dtype_size(int32_t dtype) {
  switch (dtype) {
#define DSRT_DTYPE_SIZE_(e, name, bytes, ...)                                                  \
  case e:                                                                                      \
    return bytes;
    DSRT_DTYPES(DSRT_DTYPE_SIZE_)
#undef DSRT_DTYPE_SIZE_
  }
  fail("dtype_size", "unknown dtype %d", dtype);
}

namespace {
dsrt_context *newContext(uint64_t budget, int32_t threads, uint64_t seed) {
  auto *ctx = new dsrt_context();
  ctx->budget = budget;
  if (threads <= 0) {
    int localRanks = 1;
    if (const char *s = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
      localRanks = std::max(1, std::atoi(s));
    int cores = (int)std::thread::hardware_concurrency();
    threads = std::max(1, cores / localRanks);
  }
  ctx->threads = threads;
  omp_set_num_threads(threads);
  ctx->rng.seed(seed);
  return ctx;
}

} // namespace

void dsrt::copyMessage(const std::string &why, char *err, size_t cap) {
  if (!err || !cap)
    return;
  size_t n = std::min(cap - 1, why.size());
  std::memcpy(err, why.data(), n);
  err[n] = '\0';
}

extern "C" dsrt_context *dsrt_context_create(uint64_t device_budget, int32_t threads,
                                             uint64_t seed) {
  dsrt_context *ctx = newContext(device_budget, threads, seed);
  ctx->device.reset(createCpuDevice(ctx));
  return ctx;
}

extern "C" dsrt_context *dsrt_context_create_on(const char *device, uint64_t device_budget,
                                                int32_t threads, uint64_t seed, char *err,
                                                size_t cap) {
  std::string name = device && *device ? device : dsrt_default_device();
  if (name == "cpu")
    return dsrt_context_create(device_budget, threads, seed);
  if (name != "cuda") {
    copyMessage("unknown device '" + name + "' (expected cpu or cuda)", err, cap);
    return nullptr;
  }
  dsrt_context *ctx = newContext(device_budget, threads, seed);
  std::string why;
  ctx->device.reset(createPluginDevice(name.c_str(), ctx, why));
  if (!ctx->device) {
    delete ctx;
    copyMessage("device " + name + " unavailable: " + why, err, cap);
    return nullptr;
  }
  return ctx;
}

extern "C" const char *dsrt_context_device(dsrt_context *ctx) { return ctx->device->name(); }

extern "C" const char *dsrt_default_device(void) {
  static const std::string chosen = [] {
    // Without the NVIDIA driver there is no usable GPU: then the plugin, which maps cudart and
    // cuBLAS (about 150 MB of a process's resident memory), is not loaded at all.
    void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!driver)
      return std::string("cpu");
    dlclose(driver);
    std::string why;
    dsrt_context probe;
    std::unique_ptr<Device> d(createPluginDevice("cuda", &probe, why));
    return std::string(d ? "cuda" : "cpu");
  }();
  return chosen.c_str();
}

extern "C" int32_t dsrt_device_probe(const char *device, char *reason, size_t cap) {
  std::string name = device ? device : "";
  if (name == "cpu")
    return 1;
  if (name != "cuda") {
    copyMessage("unknown device '" + name + "'", reason, cap);
    return 0;
  }
  std::string why;
  dsrt_context probe;
  std::unique_ptr<Device> d(createPluginDevice("cuda", &probe, why));
  if (!d)
    copyMessage(why, reason, cap);
  return d ? 1 : 0;
}

extern "C" void dsrt_tensor_to_host(dsrt_context *ctx, void *dst, const dsrt_tensor *t) {
  DSRT_TRACE(ctx, "copy", "tensor_to_host");
  ctx->device->toHost(dst, t->data, (size_t)t->numel * dsrt_dtype_size(t->dtype));
}

extern "C" void dsrt_tensor_from_host(dsrt_context *ctx, dsrt_tensor *t, const void *src) {
  DSRT_TRACE(ctx, "copy", "tensor_from_host");
  ctx->device->fromHost(t->data, src, (size_t)t->numel * dsrt_dtype_size(t->dtype));
}

void dsrt::releaseStorage(dsrt_context *ctx, dsrt_storage *s) {
  if (!s || --s->refs > 0)
    return;
  if (s->space == DSRT_SPACE_HOST && !s->borrowed)
    return dsrt::freeHost(ctx, s);
  if (!s->borrowed) {
    ctx->inUse -= s->bytes;
    ctx->freeBlocks[s->real].push_back(s->data);
  }
  delete s;
}

extern "C" void dsrt_context_destroy(dsrt_context *ctx) {
  dsrt::printProfile();
  if (!ctx)
    return;
  ctx->comm.reset(); // joins the communication thread (and finalizes MPI)
  dsrt::closeSpaces(ctx); // joins the transfer stream; the swap file goes with its descriptor
  for (auto &slot : ctx->slots)
    dsrt::releaseStorage(ctx, slot.storage);
  ctx->slots.clear();
  ctx->device->synchronize();
  for (auto &blocks : ctx->freeBlocks)
    for (void *p : blocks.second)
      ctx->device->deallocate(p);
  for (auto &blocks : ctx->hostFreeBlocks)
    for (void *p : blocks.second)
      std::free(p);
  delete ctx; // the device last: its kernels' cached state goes with it
}

extern "C" uint64_t dsrt_device_bytes(dsrt_context *ctx) { return ctx->inUse; }
extern "C" uint64_t dsrt_device_peak_bytes(dsrt_context *ctx) { return ctx->peak; }
extern "C" void dsrt_reset_peak(dsrt_context *ctx) {
  ctx->peak = ctx->inUse;
  ctx->hostPeak = ctx->hostInUse;
  ctx->nvmePeak = ctx->nvmeInUse;
}

static dsrt_tensor *newHandle(const char *kernel, int32_t dtype, int32_t rank,
                              const int64_t *dims) {
  if (rank < 0 || rank > DSRT_MAX_RANK)
    fail(kernel, "rank %d out of range", rank);
  auto *t = new dsrt_tensor();
  t->dtype = dtype;
  t->rank = rank;
  t->numel = 1;
  for (int32_t i = 0; i < rank; ++i) {
    if (dims[i] < 0)
      fail(kernel, "negative dim %lld", (long long)dims[i]);
    t->dims[i] = dims[i];
    t->numel *= dims[i];
  }
  return t;
}

extern "C" dsrt_tensor *dsrt_tensor_alloc(dsrt_context *ctx, int32_t dtype, int32_t rank,
                                          const int64_t *dims) {
  dsrt_tensor *t = newHandle("tensor_alloc", dtype, rank, dims);
  uint64_t bytes = (uint64_t)t->numel * dsrt_dtype_size(dtype);
  if (ctx->budget && ctx->inUse + bytes > ctx->budget) {
    std::fprintf(stderr,
                 "dsrt: device memory budget exceeded: a %s %s tensor needs %llu bytes, %llu "
                 "in use, budget %llu (raise --device-memory or shard/offload)\n",
                 shapeString(rank, dims).c_str(), dtypeName(dtype), (unsigned long long)bytes,
                 (unsigned long long)ctx->inUse, (unsigned long long)ctx->budget);
    endJob(1);
  }
  auto *s = new dsrt_storage();
  // The count is exact (the compiler predicts it); the allocation is padded to the alignment.
  const size_t granule = DSRT_ALLOCATION_GRANULE;
  size_t real = std::max<size_t>(granule, (bytes + granule - 1) / granule * granule);
  auto cached = ctx->freeBlocks.find(real);
  if (cached != ctx->freeBlocks.end() && !cached->second.empty()) {
    s->data = cached->second.back();
    cached->second.pop_back();
  } else {
    s->data = ctx->device->allocate(real);
    if (!s->data) { // the blocks kept for reuse may be what is missing: return them, retry
      for (auto &blocks : ctx->freeBlocks)
        for (void *p : blocks.second)
          ctx->device->deallocate(p);
      ctx->freeBlocks.clear();
      s->data = ctx->device->allocate(real);
    }
  }
  s->real = real;
  if (!s->data) {
    std::fprintf(stderr,
                 "dsrt: out of %s memory allocating %llu bytes (%llu in use; lower the batch "
                 "size or --device-memory, or shard/offload)\n",
                 ctx->device->name(), (unsigned long long)bytes, (unsigned long long)ctx->inUse);
    endJob(1);
  }
  s->bytes = bytes;
  ctx->inUse += bytes;
  ctx->peak = std::max(ctx->peak, ctx->inUse);
  t->storage = s;
  t->data = s->data;
  return t;
}

extern "C" dsrt_tensor *dsrt_tensor_borrow(dsrt_context *ctx, int32_t dtype, int32_t rank,
                                           const int64_t *dims, const void *data) {
  dsrt_tensor *t = newHandle("tensor_borrow", dtype, rank, dims);
  auto *s = new dsrt_storage();
  s->data = const_cast<void *>(
      ctx->device->constant(data, (size_t)t->numel * dsrt_dtype_size(dtype)));
  s->borrowed = true;
  t->storage = s;
  t->data = s->data;
  return t;
}

extern "C" dsrt_tensor *dsrt_tensor_host(dsrt_context *, int32_t dtype, int32_t rank,
                                         const int64_t *dims, void *data) {
  dsrt_tensor *t = newHandle("tensor_host", dtype, rank, dims);
  auto *s = new dsrt_storage();
  s->data = data;
  s->borrowed = true;
  t->storage = s;
  t->data = data;
  return t;
}

extern "C" dsrt_tensor *dsrt_tensor_view(dsrt_context *, dsrt_tensor *src, int32_t rank,
                                         const int64_t *dims) {
  dsrt_tensor *t = newHandle("tensor_view", src->dtype, rank, dims);
  if (t->numel != src->numel)
    fail("tensor_view", "cannot view %s as %s", shapeString(src).c_str(),
         shapeString(rank, dims).c_str());
  t->data = src->data;
  t->storage = src->storage;
  if (t->storage)
    ++t->storage->refs;
  return t;
}

extern "C" dsrt_tensor *dsrt_tensor_view_at(dsrt_context *ctx, dsrt_tensor *src, int64_t offset,
                                           int32_t rank, const int64_t *dims) {
  dsrt_tensor *t = newHandle("tensor_view_at", src->dtype, rank, dims);
  if (offset < 0 || offset + t->numel > src->numel)
    fail("tensor_view_at", "%s at element %lld does not fit in %s", shapeString(rank, dims).c_str(),
         (long long)offset, shapeString(src).c_str());
  t->data = static_cast<char *>(src->data) + offset * (int64_t)dsrt_dtype_size(src->dtype);
  t->storage = src->storage;
  if (t->storage)
    ++t->storage->refs;
  return t;
}

extern "C" void dsrt_tensor_free(dsrt_context *ctx, dsrt_tensor *t) {
  if (!t)
    return;
  dsrt::releaseStorage(ctx, t->storage);
  delete t;
}

//===----------------------------------------------------------------------===//
// Slots
//===----------------------------------------------------------------------===//

static dsrt_context::Slot &slotAt(dsrt_context *ctx, int32_t index, const char *kernel) {
  if (index < 0 || (size_t)index >= ctx->slots.size() || !ctx->slots[index].storage)
    fail(kernel, "slot %d is not defined", index);
  return ctx->slots[index];
}

extern "C" void dsrt_slot_define(dsrt_context *ctx, int32_t index, int32_t dtype, int32_t rank,
                                 const int64_t *dims) {
  if (index < 0)
    fail("slot_define", "negative slot index %d", index);
  if ((size_t)index >= ctx->slots.size())
    ctx->slots.resize(index + 1);
  dsrt_tensor *t = dsrt_tensor_alloc(ctx, dtype, rank, dims);
  ctx->device->zero(t->data, t->numel * dsrt_dtype_size(dtype));
  dsrt_context::Slot &slot = ctx->slots[index];
  dsrt::releaseStorage(ctx, slot.storage);
  slot.storage = t->storage;
  slot.dtype = dtype;
  slot.rank = rank;
  for (int i = 0; i < rank; ++i)
    slot.dims[i] = dims[i];
  delete t; // the slot keeps the handle's reference
}

extern "C" void dsrt_slot_define_view(dsrt_context *ctx, int32_t index, int32_t base,
                                      int64_t offset, int32_t dtype, int32_t rank,
                                      const int64_t *dims) {
  slotAt(ctx, base, "slot_define_view"); // checks that the base is defined
  if (index < 0 || index == base)
    fail("slot_define_view", "bad slot index %d", index);
  // Growing the vector moves its slots: take references only after it.
  if ((size_t)index >= ctx->slots.size())
    ctx->slots.resize(index + 1);
  dsrt_context::Slot &baseSlot = ctx->slots[base];
  int64_t numel = 1, baseNumel = 1;
  for (int i = 0; i < rank; ++i)
    numel *= dims[i];
  for (int i = 0; i < baseSlot.rank; ++i)
    baseNumel *= baseSlot.dims[i];
  if (dtype != baseSlot.dtype || offset < 0 || offset + numel > baseNumel)
    fail("slot_define_view", "slot %d (%s %s at %lld) does not fit in slot %d (%s %s)", index,
         shapeString(rank, dims).c_str(), dtypeName(dtype), (long long)offset, base,
         shapeString(baseSlot.rank, baseSlot.dims).c_str(), dtypeName(baseSlot.dtype));
  dsrt_context::Slot &slot = ctx->slots[index];
  dsrt::releaseStorage(ctx, slot.storage);
  slot.storage = baseSlot.storage;
  ++slot.storage->refs;
  slot.offset = baseSlot.offset + offset * (int64_t)dsrt_dtype_size(dtype);
  slot.dtype = dtype;
  slot.rank = rank;
  for (int i = 0; i < rank; ++i)
    slot.dims[i] = dims[i];
  slot.pinned = true;
  slot.view = true;
  baseSlot.pinned = true;
}

extern "C" uint64_t dsrt_slot_storage_bytes(dsrt_context *ctx, int32_t index) {
  dsrt_context::Slot &slot = slotAt(ctx, index, "slot_storage_bytes");
  return slot.view ? 0 : slot.storage->bytes;
}

extern "C" dsrt_tensor *dsrt_slot_get(dsrt_context *ctx, int32_t index) {
  dsrt_context::Slot &slot = slotAt(ctx, index, "slot_get");
  if (slot.space == DSRT_SPACE_NVME) { // a copy in host memory, read now
    dsrt_tensor *t = dsrt_tensor_alloc_host(ctx, slot.dtype, slot.rank, slot.dims);
    dsrt::readSwap(ctx, slot.fileOffset, t->storage, t->storage->bytes);
    return t;
  }
  dsrt_tensor *t = newHandle("slot_get", slot.dtype, slot.rank, slot.dims);
  t->storage = slot.storage;
  t->data = static_cast<char *>(slot.storage->data) + slot.offset;
  ++slot.storage->refs;
  return t;
}

extern "C" void dsrt_slot_set(dsrt_context *ctx, int32_t index, dsrt_tensor *t) {
  dsrt_context::Slot &slot = slotAt(ctx, index, "slot_set");
  int64_t numel = 1;
  for (int i = 0; i < slot.rank; ++i)
    numel *= slot.dims[i];
  if (t->dtype != slot.dtype || t->numel != numel)
    fail("slot_set", "slot %d holds a %s %s tensor, got %s %s", index,
         shapeString(slot.rank, slot.dims).c_str(), dtypeName(slot.dtype), shapeString(t).c_str(),
         dtypeName(t->dtype));
  if (slot.space == DSRT_SPACE_NVME) {
    dsrt::writeSwap(ctx, slot.fileOffset, t->data, t->storage, numel * dsrt_dtype_size(t->dtype));
    return;
  }
  // Views share one buffer, and a value from another space stays there: copy the value in.
  if (slot.pinned || !t->storage || t->storage->space != slot.space) {
    void *dst = static_cast<char *>(slot.storage->data) + slot.offset;
    if (dst != t->data)
      ctx->device->copy(dst, t->data, numel * dsrt_dtype_size(t->dtype));
    return;
  }
  if (t->data != t->storage->data)
    fail("slot_set", "slot %d: the tensor does not start at its storage", index);
  ++t->storage->refs;
  dsrt::releaseStorage(ctx, slot.storage);
  slot.storage = t->storage;
}

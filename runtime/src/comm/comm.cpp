//===- comm.cpp - collectives on the communication thread ---------------------===//
//
// dsrt_comm_init starts one thread per context that owns the channel (MPI or loopback):
// collectives are queued in call order and run there while the compute stream goes on, so
// communication overlaps compute. Each returns an event that completes when its call returns.
//
#include "channel.h"

#include "../core/internal.h"

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <future>
#include <thread>

using namespace dsrt;

namespace {
struct Comm {
  std::unique_ptr<Channel> channel;
  int rank = 0, size = 1;
  std::string name;
  std::thread worker;
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  bool stop = false;

  explicit Comm(bool mpi) {
    std::promise<std::string> ready;
    std::future<std::string> started = ready.get_future();
    worker = std::thread([this, mpi, &ready] {
      std::string err;
      channel = mpi ? makeMpiChannel(err) : makeLoopbackChannel();
      if (channel) {
        rank = channel->rank();
        size = channel->size();
        name = channel->name();
      }
      ready.set_value(err);
      if (!channel)
        return;
      run();
      channel.reset(); // MPI_Finalize on this thread
    });
    std::string err = started.get();
    if (!err.empty()) {
      worker.join();
      std::fprintf(stderr, "dsrt: cannot join the data-parallel group: %s\n", err.c_str());
      std::exit(1);
    }
  }
  ~Comm() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    cv.notify_all();
    if (worker.joinable())
      worker.join();
  }
  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex);
        cv.wait(lock, [&] { return stop || !queue.empty(); });
        if (queue.empty())
          return;
        task = std::move(queue.front());
        queue.pop_front();
      }
      task();
    }
  }
  dsrt_event *enqueue(dsrt_context *ctx, std::initializer_list<const dsrt_tensor *> tensors,
                      std::function<void(Channel &)> work) {
    auto *e = new dsrt_event();
    e->ctx = ctx;
    for (const dsrt_tensor *t : tensors)
      if (t->storage) {
        retainStorage(t->storage);
        e->held.push_back(t->storage);
      }
    {
      std::lock_guard<std::mutex> lock(mutex);
      queue.push_back([this, e, work = std::move(work)] {
        work(*channel);
        e->complete();
      });
    }
    cv.notify_one();
    return e;
  }
};

Comm &comm(dsrt_context *ctx, const char *what) {
  if (!ctx->comm)
    fail(what, "the context has not joined a group (call dsrt_comm_init first)");
  return *static_cast<Comm *>(ctx->comm.get());
}
} // namespace

extern "C" void dsrt_comm_init(dsrt_context *ctx, int32_t expectedSize) {
  if (!ctx->comm)
    ctx->comm = std::make_shared<Comm>(launchedByMpiLauncher());
  Comm &c = comm(ctx, "comm_init");
  if (expectedSize > 0 && c.size != expectedSize) {
    if (c.rank == 0)
      std::fprintf(stderr,
                   "dsrt: this program was compiled for %d data-parallel rank%s but was started "
                   "with %d (%s); run it with `mpirun -np %d`, or recompile it for %d "
                   "rank%s (ds-opt --world-size %d)\n",
                   expectedSize, expectedSize == 1 ? "" : "s", c.size, c.name.c_str(),
                   expectedSize, c.size, c.size == 1 ? "" : "s", c.size);
    ctx->comm.reset();
    std::exit(1);
  }
}

extern "C" int32_t dsrt_comm_rank(dsrt_context *ctx) { return comm(ctx, "comm_rank").rank; }
extern "C" int32_t dsrt_comm_size(dsrt_context *ctx) { return comm(ctx, "comm_size").size; }
extern "C" const char *dsrt_comm_channel(dsrt_context *ctx) {
  return comm(ctx, "comm_channel").name.c_str();
}

extern "C" dsrt_event *dsrt_all_reduce(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *in,
                                       int32_t reduction) {
  Comm &c = comm(ctx, "all_reduce");
  checkSameShape("all_reduce", out, in);
  checkDtype("all_reduce", out, in->dtype, "output");
  void *o = out->data;
  const void *i = in->data;
  int64_t n = in->numel;
  int32_t dt = in->dtype;
  return c.enqueue(ctx, {out, in}, [=](Channel &ch) { ch.allReduce(o, i, n, dt, reduction); });
}

extern "C" dsrt_event *dsrt_all_gather(dsrt_context *ctx, dsrt_tensor *out,
                                       const dsrt_tensor *in) {
  Comm &c = comm(ctx, "all_gather");
  checkDtype("all_gather", out, in->dtype, "output");
  if (out->numel != in->numel * c.size)
    fail("all_gather", "output %s is not %d x input %s", shapeString(out).c_str(), c.size,
         shapeString(in).c_str());
  void *o = out->data;
  const void *i = in->data;
  int64_t bytes = in->numel * (int64_t)dsrt_dtype_size(in->dtype);
  return c.enqueue(ctx, {out, in}, [=](Channel &ch) { ch.allGather(o, i, bytes); });
}

extern "C" dsrt_event *dsrt_reduce_scatter(dsrt_context *ctx, dsrt_tensor *out,
                                           const dsrt_tensor *in, int32_t reduction) {
  Comm &c = comm(ctx, "reduce_scatter");
  checkDtype("reduce_scatter", out, in->dtype, "output");
  if (in->numel != out->numel * c.size)
    fail("reduce_scatter", "input %s is not %d x output %s", shapeString(in).c_str(), c.size,
         shapeString(out).c_str());
  void *o = out->data;
  const void *i = in->data;
  int64_t n = out->numel;
  int32_t dt = in->dtype;
  return c.enqueue(ctx, {out, in},
                   [=](Channel &ch) { ch.reduceScatter(o, i, n, dt, reduction); });
}

extern "C" dsrt_event *dsrt_comm_broadcast(dsrt_context *ctx, dsrt_tensor *t, int32_t root) {
  Comm &c = comm(ctx, "broadcast");
  void *d = t->data;
  int64_t bytes = t->numel * (int64_t)dsrt_dtype_size(t->dtype);
  return c.enqueue(ctx, {t}, [=](Channel &ch) { ch.broadcast(d, bytes, root); });
}

extern "C" dsrt_tensor *dsrt_comm_chunk(dsrt_context *ctx, dsrt_tensor *t, int32_t rank,
                                       const int64_t *dims) {
  Comm &c = comm(ctx, "comm_chunk");
  int64_t n = 1;
  for (int32_t i = 0; i < rank; ++i)
    n *= dims[i];
  if (n * c.size != t->numel)
    fail("comm_chunk", "%s is not %d chunks of %s", shapeString(t).c_str(), c.size,
         shapeString(rank, dims).c_str());
  return dsrt_tensor_view_at(ctx, t, n * c.rank, rank, dims);
}

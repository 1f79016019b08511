//===- comm.cpp - collectives on the communication thread ---------------------===//
//
// dsrt_comm_init starts one thread per context that owns the channel (MPI or loopback):
// collectives are queued in call order and run there while the compute stream goes on, so
// communication overlaps compute. Each returns an event that completes when its call returns.
// The thread also serves requests to end the job (dsrt_comm_abort, and the runtime's fatal
// errors through dsrt::endJob), so that one rank's failure ends every rank promptly.
//
#include "channel.h"

#include "../core/internal.h"

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <future>
#include <thread>

using namespace dsrt;

namespace {
struct Comm {
  CommControl control;
  std::unique_ptr<Channel> channel;
  int rank = 0, size = 1;
  std::string name;
  bool mpi = false;
  std::thread worker;
  std::thread::id workerId;
  std::atomic<bool> running{false};
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  bool stop = false;
  int64_t issued = 0; ///< collectives enqueued so far (their sequence numbers)

  /// `device`: the context's; one whose memory the host cannot address (cuda) gets the nccl
  /// channel, over the MPI or loopback channel as its bootstrap.
  Comm(bool useMpi, Device *device) : mpi(useMpi) {
    std::promise<std::string> ready;
    std::future<std::string> started = ready.get_future();
    worker = std::thread([this, &ready, device] {
      std::string err;
      channel = mpi ? makeMpiChannel(control, err) : makeLoopbackChannel();
      if (channel && !device->hostAddressable()) {
        channel = makePluginChannel("nccl", std::move(channel), control,
                                    device->collectivesStream(), device->ordinal(), err);
        if (!channel)
          err = "device " + std::string(device->name()) + " needs the nccl channel: " + err +
                " (run with --device cpu, or see ds-report)";
      }
      if (channel) {
        rank = channel->rank();
        size = channel->size();
        name = channel->name();
        workerId = std::this_thread::get_id();
        running = true;
      }
      ready.set_value(err);
      if (!channel)
        return;
      run();
      running = false;
      channel.reset(); // MPI_Finalize on this thread
    });
    std::string err = started.get();
    if (!err.empty()) {
      worker.join();
      std::fprintf(stderr, "dsrt: cannot join the data-parallel group: %s\n", err.c_str());
      std::exit(1);
    }
    if (mpi)
      setEndJobHook(
          [](void *self, int code) { static_cast<Comm *>(self)->endJob(code); }, this);
  }
  ~Comm() {
    if (mpi)
      setEndJobHook(nullptr, nullptr);
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
        cv.wait_for(lock, std::chrono::milliseconds(10), [&] {
          return stop || !queue.empty() || control.abortCode.load() >= 0;
        });
        if (!queue.empty()) {
          task = std::move(queue.front());
          queue.pop_front();
        } else if (stop) {
          return;
        }
      }
      if (task)
        task();
      else
        channel->idle(); // abort requests, peers' timeout reports
    }
  }
  /// Ends every rank: on the communication thread through the channel, from any other thread
  /// by asking the communication thread (the only one that may call MPI).
  [[noreturn]] void endJob(int code) {
    std::fflush(stdout);
    std::fflush(stderr);
    if (!mpi)
      std::_Exit(code);
    if (std::this_thread::get_id() == workerId)
      channel->abort(code);
    if (running.load()) {
      control.abortCode = code;
      cv.notify_all();
      // The communication thread notices within milliseconds unless MPI itself is stuck.
      for (int i = 0; i < 1000; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::_Exit(code);
  }
  CommOp next(const char *what, std::string detail) {
    std::lock_guard<std::mutex> lock(mutex);
    return CommOp{what, ++issued, std::move(detail)};
  }
  dsrt_event *enqueue(dsrt_context *ctx, std::initializer_list<const dsrt_tensor *> tensors,
                      const char *what, std::string detail,
                      std::function<void(Channel &, const CommOp &)> work) {
    auto *e = new dsrt_event();
    e->ctx = ctx;
    for (const dsrt_tensor *t : tensors)
      if (t->storage) {
        retainStorage(t->storage);
        e->held.push_back(t->storage);
      }
    CommOp op = next(what, std::move(detail));
    // On a device the host cannot address, the collective's inputs are ready at this point of
    // the compute stream: the channel waits for it on its own stream.
    dsrt_event *after = nullptr;
    if (ctx && !ctx->device->hostAddressable()) {
      after = new dsrt_event();
      after->ctx = ctx;
      ctx->device->record(after);
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      queue.push_back([this, e, after, op = std::move(op), work = std::move(work)] {
        if (after)
          channel->orderAfter(after->native);
        work(*channel, op);
        if (after) {
          after->ctx->device->destroy(after);
          delete after;
        }
        e->complete();
      });
    }
    cv.notify_one();
    return e;
  }
  /// Runs `work` on the communication thread after everything queued before it; returns
  /// when it has run.
  void runSync(const char *what, std::function<void(Channel &, const CommOp &)> work) {
    dsrt_event *e = enqueue(nullptr, {}, what, "", std::move(work));
    e->wait();
    delete e;
  }
};

Comm &comm(dsrt_context *ctx, const char *what) {
  if (!ctx->comm)
    fail(what, "the context has not joined a group (call dsrt_comm_init first)");
  return *static_cast<Comm *>(ctx->comm.get());
}

std::string elements(int64_t n, int32_t dtype) {
  return std::to_string(n) + " " + dtypeName(dtype);
}
} // namespace

extern "C" void dsrt_comm_init(dsrt_context *ctx, int32_t expectedSize) {
  if (!ctx->comm)
    ctx->comm = std::make_shared<Comm>(launchedByMpiLauncher(), ctx->device.get());
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

extern "C" void dsrt_comm_set_timeout(dsrt_context *ctx, double seconds) {
  comm(ctx, "comm_set_timeout").control.timeoutSeconds = seconds > 0 ? seconds : 0;
}

extern "C" void dsrt_comm_barrier(dsrt_context *ctx) {
  comm(ctx, "comm_barrier").runSync("barrier", [](Channel &ch, const CommOp &op) {
    ch.barrier(op);
  });
}

extern "C" int32_t dsrt_comm_agree(dsrt_context *ctx, const char *error, char *msg,
                                   size_t cap) {
  Comm &c = comm(ctx, "comm_agree");
  std::string text = error ? error : "";
  int64_t failing = INT64_MAX;
  c.runSync("agree", [&](Channel &ch, const CommOp &op) {
    int64_t who = text.empty() ? INT64_MAX : c.rank;
    ch.allReduce(op, &who, &who, 1, DSRT_I64, DSRT_COMM_MIN);
    failing = who;
    if (who == INT64_MAX)
      return;
    std::vector<char> buf(4096, 0);
    if (who == c.rank)
      std::snprintf(buf.data(), buf.size(), "%s", text.c_str());
    ch.broadcast(op, buf.data(), static_cast<int64_t>(buf.size()), static_cast<int>(who));
    text = buf.data();
  });
  if (failing == INT64_MAX)
    return -1;
  if (msg && cap)
    std::snprintf(msg, cap, "%s", text.c_str());
  return static_cast<int32_t>(failing);
}

extern "C" void dsrt_comm_abort(dsrt_context *ctx, int32_t code) {
  if (ctx && ctx->comm)
    static_cast<Comm *>(ctx->comm.get())->endJob(code);
  endJob(code);
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
  return c.enqueue(ctx, {out, in}, "all_reduce", elements(n, dt),
                   [=](Channel &ch, const CommOp &op) { ch.allReduce(op, o, i, n, dt, reduction); });
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
  return c.enqueue(ctx, {out, in}, "all_gather", elements(in->numel, in->dtype) + " per rank",
                   [=](Channel &ch, const CommOp &op) { ch.allGather(op, o, i, bytes); });
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
  return c.enqueue(ctx, {out, in}, "reduce_scatter", elements(n, dt) + " per rank",
                   [=](Channel &ch, const CommOp &op) {
                     ch.reduceScatter(op, o, i, n, dt, reduction);
                   });
}

extern "C" dsrt_event *dsrt_comm_broadcast(dsrt_context *ctx, dsrt_tensor *t, int32_t root) {
  Comm &c = comm(ctx, "broadcast");
  void *d = t->data;
  int64_t bytes = t->numel * (int64_t)dsrt_dtype_size(t->dtype);
  return c.enqueue(ctx, {t}, "broadcast", elements(t->numel, t->dtype),
                   [=](Channel &ch, const CommOp &op) { ch.broadcast(op, d, bytes, root); });
}

extern "C" dsrt_event *dsrt_gather(dsrt_context *ctx, void *out, const void *in,
                                   const int64_t *bytes, int32_t root) {
  Comm &c = comm(ctx, "gather");
  std::vector<int64_t> b(bytes, bytes + c.size);
  int64_t total = 0;
  for (int64_t n : b)
    total += n;
  return c.enqueue(ctx, {}, "gather", std::to_string(total) + " bytes to rank " +
                                          std::to_string(root),
                   [=](Channel &ch, const CommOp &op) { ch.gather(op, out, in, b, root); });
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

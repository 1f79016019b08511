//===- comm.cpp - collectives on the communication thread ---------------------===//
//
// dsrt_comm_init_mesh starts one thread per group that owns its channel: the world's (MPI or
// loopback, which the groups are split from) and one per proper subset of the mesh's axes.
// Collectives are queued in call order on their group's thread and run there while the compute
// stream goes on, so communication overlaps compute and a tensor-parallel all-reduce never
// waits behind a data-parallel bucket. Each returns an event that completes when its call
// returns. The world's thread also serves requests to end the job (dsrt_comm_abort, and the
// runtime's fatal errors through dsrt::endJob), so that one rank's failure ends every rank
// promptly.
//
#include "channel.h"
#include "queue.h"

#include "../core/internal.h"

#include <chrono>
#include <climits>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <future>
#include <thread>

using namespace dsrt;

namespace {
/// One group's channel and the thread that runs its collectives in call order.
struct Queue {
  CommControl &control;
  std::unique_ptr<Channel> channel;
  int rank = 0, size = 1;
  std::string name;
  /// The trace's stream of this queue's collectives: "collectives (world)", "(dp)", "(tp+sp)".
  const char *traceStream = "collectives (world)";
  std::thread worker;
  std::thread::id workerId;
  std::atomic<bool> running{false};
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  bool stop = false;
  int64_t issued = 0; ///< collectives enqueued so far (their sequence numbers)

  /// The world's queue: its thread makes the MPI or loopback channel; a device whose memory
  /// the host cannot address (cuda) gets the nccl channel over it as its bootstrap. On failure
  /// `err` says why and the queue has no thread.
  Queue(CommControl &control, bool mpi, Device *device, std::string &err) : control(control) {
    std::promise<std::string> ready;
    std::future<std::string> result = ready.get_future();
    worker = std::thread([this, &ready, mpi, device] {
      std::string why;
      channel = mpi ? makeMpiChannel(this->control, why) : makeLoopbackChannel();
      if (channel && !device->hostAddressable()) {
        channel = makePluginChannel("nccl", std::move(channel), this->control,
                                    device->collectivesStream(), device->ordinal(), why);
        if (!channel)
          why = "device " + std::string(device->name()) + " needs the nccl channel: " + why +
                " (run with --device cpu, or see ds-report)";
      }
      if (channel)
        started();
      ready.set_value(why);
      if (!channel)
        return;
      run();
      running = false;
      channel.reset(); // MPI_Finalize on this thread
    });
    err = result.get();
    if (!err.empty())
      worker.join();
  }
  /// A group's queue over `split`, a channel split from the world's.
  Queue(CommControl &control, std::unique_ptr<Channel> split) : control(control) {
    channel = std::move(split);
    started();
    std::promise<void> ready;
    std::future<void> entered = ready.get_future();
    worker = std::thread([this, &ready] {
      workerId = std::this_thread::get_id();
      channel->enterThread();
      ready.set_value();
      run();
      running = false;
      channel.reset(); // frees the communicator before the world finalizes MPI
    });
    entered.wait();
  }
  ~Queue() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    cv.notify_all();
    if (worker.joinable())
      worker.join();
  }
  void started() {
    rank = channel->rank();
    size = channel->size();
    name = channel->name();
    workerId = std::this_thread::get_id();
    running = true;
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
      // While tracing, the collective is a span on this group's thread, with the site that
      // issued it.
      const bool traced = ctx && ctx->tracing.load(std::memory_order_relaxed);
      const int32_t site = ctx ? ctx->site : -1;
      queue.push_back([this, e, after, traced, site, ctx, op = std::move(op),
                       work = std::move(work)] {
        if (after)
          channel->orderAfter(after->native);
        const int64_t start = traced ? traceNow() : 0;
        work(*channel, op);
        if (traced)
          traceRecord(ctx, traceStream, "collective", op.name, site, start,
                      traceNow(), op.detail);
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

/// The context's place in the mesh: the world's queue and one queue per group of axes.
struct Comm {
  CommControl control;
  bool mpi = false;
  std::unique_ptr<Queue> world;
  int rank = 0, size = 1; ///< in the world
  std::vector<int64_t> shape;
  std::vector<std::string> names;
  std::vector<int> coords;
  int nontrivial = 0; ///< mask of the axes of more than one rank
  /// By mask of axes: the proper, non-empty subsets of `nontrivial` (the others are the
  /// world's or this rank alone).
  std::map<int, std::unique_ptr<Queue>> groups;
  std::unique_ptr<Queue> self;

  Comm(bool useMpi, Device *device) : mpi(useMpi) {
    std::string err;
    world = std::make_unique<Queue>(control, useMpi, device, err);
    if (!err.empty()) {
      std::fprintf(stderr, "dsrt: cannot join the data-parallel group: %s\n", err.c_str());
      std::exit(1);
    }
    rank = world->rank;
    size = world->size;
    if (mpi)
      setEndJobHook([](void *c, int code) { static_cast<Comm *>(c)->endJob(code); }, this);
  }
  ~Comm() {
    if (mpi)
      setEndJobHook(nullptr, nullptr);
    groups.clear(); // their threads free their communicators first
    self.reset();
    world.reset();
  }
  std::string meshString() const {
    std::string s;
    for (size_t i = 0; i < shape.size(); ++i)
      s += (i ? " x " : "") + names[i] + "=" + std::to_string(shape[i]);
    return s;
  }
  /// The queue of `group` (DSRT_GROUP_WORLD or a mask of axes).
  Queue &queue(int32_t group, const char *what) {
    if (group == DSRT_GROUP_WORLD)
      return *world;
    if (group < 0 || group >= (1 << shape.size()))
      fail(what, "group %d is not a mask of the mesh's %zu axes (%s)", group, shape.size(),
           meshString().c_str());
    int m = group & nontrivial;
    if (m == nontrivial)
      return *world;
    if (m == 0) {
      if (!self) {
        self = std::make_unique<Queue>(control, makeLoopbackChannel());
        self->traceStream = "collectives (self)";
      }
      return *self;
    }
    return *groups.at(m);
  }
  /// Ends every rank: on a communication thread through its channel, from any other thread by
  /// asking the world's communication thread.
  [[noreturn]] void endJob(int code) {
    std::fflush(stdout);
    std::fflush(stderr);
    if (!mpi)
      std::_Exit(code);
    if (std::this_thread::get_id() == world->workerId)
      world->channel->abort(code);
    for (auto &[mask, q] : groups)
      if (std::this_thread::get_id() == q->workerId)
        q->channel->abort(code);
    if (world->running.load()) {
      control.abortCode = code;
      world->cv.notify_all();
      // The communication thread notices within milliseconds unless MPI itself is stuck.
      for (int i = 0; i < 1000; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::_Exit(code);
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

namespace {
Comm &joinWorld(dsrt_context *ctx) {
  if (!ctx->comm)
    ctx->comm = std::make_shared<Comm>(launchedByMpiLauncher(), ctx->device.get());
  return comm(ctx, "comm_init");
}

/// Leaves the group and exits after rank 0 printed `message`.
[[noreturn]] void refuse(dsrt_context *ctx, const Comm &c, const std::string &message) {
  if (c.rank == 0)
    std::fprintf(stderr, "dsrt: %s\n", message.c_str());
  ctx->comm.reset();
  std::exit(1);
}
} // namespace

extern "C" void dsrt_comm_init_mesh(dsrt_context *ctx, int32_t naxes, const int64_t *shape,
                                    const char *const *names) {
  Comm &c = joinWorld(ctx);
  if (naxes < 1 || naxes > 8)
    fail("comm_init_mesh", "a mesh has 1 to 8 axes, not %d", naxes);
  std::vector<int64_t> sh(shape, shape + naxes);
  std::vector<std::string> nm;
  int64_t ranks = 1;
  for (int32_t i = 0; i < naxes; ++i) {
    if (sh[i] < 1)
      fail("comm_init_mesh", "mesh axis %d has size %lld", i, (long long)sh[i]);
    nm.push_back(names && names[i] ? names[i] : "axis" + std::to_string(i));
    ranks *= sh[i];
  }
  if (!c.shape.empty()) {
    if (c.shape != sh)
      fail("comm_init_mesh", "the context already joined the mesh %s", c.meshString().c_str());
    return;
  }
  if (ranks != c.size) {
    char buf[512] = {0};
    if (naxes == 1)
      std::snprintf(buf, sizeof buf,
                    "this program was compiled for %lld data-parallel rank%s but was started "
                    "with %d (%s); run it with `mpirun -np %lld`, or recompile it for %d rank%s "
                    "(ds-opt --world-size %d)",
                    (long long)ranks, ranks == 1 ? "" : "s", c.size, c.world->name.c_str(),
                    (long long)ranks, c.size, c.size == 1 ? "" : "s", c.size);
    std::string message = buf;
    if (naxes > 1) {
      c.shape = sh;
      c.names = nm;
      message = "this program was compiled for the mesh " + c.meshString() + " (" +
                std::to_string(ranks) + " ranks) but was started with " +
                std::to_string(c.size) + " (" + c.world->name + "); run it with `mpirun -np " +
                std::to_string(ranks) + "`, or recompile it for " + std::to_string(c.size) +
                " ranks (the config's batch sizes, tensor_parallel.autotp_size and "
                "sequence_parallel_size, or ds-opt --world-size)";
    }
    refuse(ctx, c, message);
  }
  c.shape = sh;
  c.names = nm;
  // Row-major: the last axis varies fastest between consecutive world ranks.
  c.coords.assign(naxes, 0);
  for (int32_t i = naxes - 1, r = c.rank; i >= 0; --i) {
    c.coords[i] = static_cast<int>(r % sh[i]);
    r = static_cast<int>(r / sh[i]);
  }
  c.nontrivial = 0;
  for (int32_t i = 0; i < naxes; ++i)
    if (sh[i] > 1)
      c.nontrivial |= 1 << i;
  // Every proper subset of the axes that have several ranks gets its channel, split from the
  // world's in the same order on every rank: color = position along the other axes, key =
  // position along the group's.
  for (int m = 1; m < c.nontrivial; ++m) {
    if ((m & ~c.nontrivial) != 0)
      continue;
    int color = 0, key = 0;
    for (int32_t i = 0; i < naxes; ++i) {
      int &x = (m >> i) & 1 ? key : color;
      x = x * static_cast<int>(sh[i]) + c.coords[i];
    }
    std::unique_ptr<Channel> sub;
    std::string why;
    c.world->runSync("split", [&](Channel &ch, const CommOp &) { sub = ch.split(color, key, why); });
    if (!sub)
      refuse(ctx, c, "cannot form the groups of the mesh " + c.meshString() + ": " + why);
    c.groups[m] = std::make_unique<Queue>(c.control, std::move(sub));
    std::string axes;
    for (int32_t i = 0; i < naxes; ++i)
      if ((m >> i) & 1)
        axes += (axes.empty() ? "" : "+") + c.names[i];
    c.groups[m]->traceStream = traceStreamName("collectives (" + axes + ")");
  }
}

extern "C" void dsrt_comm_init(dsrt_context *ctx, int32_t expectedSize) {
  Comm &c = joinWorld(ctx);
  int64_t n = expectedSize > 0 ? expectedSize : c.size;
  const char *dp = dsrt_mesh_axis_name(DSRT_AXIS_DP);
  dsrt_comm_init_mesh(ctx, 1, &n, &dp);
}

extern "C" int32_t dsrt_comm_rank(dsrt_context *ctx) { return comm(ctx, "comm_rank").rank; }
extern "C" int32_t dsrt_comm_size(dsrt_context *ctx) { return comm(ctx, "comm_size").size; }
extern "C" const char *dsrt_comm_channel(dsrt_context *ctx) {
  return comm(ctx, "comm_channel").world->name.c_str();
}
extern "C" int32_t dsrt_comm_coordinate(dsrt_context *ctx, int32_t axis) {
  Comm &c = comm(ctx, "comm_coordinate");
  if (axis < 0 || axis >= static_cast<int32_t>(c.coords.size()))
    fail("comm_coordinate", "axis %d is not an axis of the mesh %s", axis, c.meshString().c_str());
  return c.coords[axis];
}
extern "C" int32_t dsrt_group_rank(dsrt_context *ctx, int32_t group) {
  return comm(ctx, "group_rank").queue(group, "group_rank").rank;
}
extern "C" int32_t dsrt_group_size(dsrt_context *ctx, int32_t group) {
  return comm(ctx, "group_size").queue(group, "group_size").size;
}

extern "C" void dsrt_comm_set_timeout(dsrt_context *ctx, double seconds) {
  comm(ctx, "comm_set_timeout").control.timeoutSeconds = seconds > 0 ? seconds : 0;
}

extern "C" void dsrt_comm_barrier(dsrt_context *ctx) {
  comm(ctx, "comm_barrier").world->runSync("barrier", [](Channel &ch, const CommOp &op) {
    ch.barrier(op);
  });
}

extern "C" int32_t dsrt_comm_agree(dsrt_context *ctx, const char *error, char *msg,
                                   size_t cap) {
  Comm &c = comm(ctx, "comm_agree");
  std::string text = error ? error : "";
  int64_t failing = INT64_MAX;
  c.world->runSync("agree", [&](Channel &ch, const CommOp &op) {
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

extern "C" dsrt_event *dsrt_all_reduce(dsrt_context *ctx, int32_t group, dsrt_tensor *out,
                                       const dsrt_tensor *in, int32_t reduction) {
  Queue &q = comm(ctx, "all_reduce").queue(group, "all_reduce");
  checkSameShape("all_reduce", out, in);
  checkDtype("all_reduce", out, in->dtype, "output");
  void *o = out->data;
  const void *i = in->data;
  int64_t n = in->numel;
  int32_t dt = in->dtype;
  return q.enqueue(ctx, {out, in}, "all_reduce", elements(n, dt),
                   [=](Channel &ch, const CommOp &op) { ch.allReduce(op, o, i, n, dt, reduction); });
}

extern "C" dsrt_event *dsrt_all_gather(dsrt_context *ctx, int32_t group, dsrt_tensor *out,
                                       const dsrt_tensor *in) {
  Queue &q = comm(ctx, "all_gather").queue(group, "all_gather");
  checkDtype("all_gather", out, in->dtype, "output");
  if (out->numel != in->numel * q.size)
    fail("all_gather", "output %s is not %d x input %s", shapeString(out).c_str(), q.size,
         shapeString(in).c_str());
  void *o = out->data;
  const void *i = in->data;
  int64_t bytes = in->numel * (int64_t)dsrt_dtype_size(in->dtype);
  return q.enqueue(ctx, {out, in}, "all_gather", elements(in->numel, in->dtype) + " per rank",
                   [=](Channel &ch, const CommOp &op) { ch.allGather(op, o, i, bytes); });
}

extern "C" dsrt_event *dsrt_reduce_scatter(dsrt_context *ctx, int32_t group, dsrt_tensor *out,
                                           const dsrt_tensor *in, int32_t reduction) {
  Queue &q = comm(ctx, "reduce_scatter").queue(group, "reduce_scatter");
  checkDtype("reduce_scatter", out, in->dtype, "output");
  if (in->numel != out->numel * q.size)
    fail("reduce_scatter", "input %s is not %d x output %s", shapeString(in).c_str(), q.size,
         shapeString(out).c_str());
  void *o = out->data;
  const void *i = in->data;
  int64_t n = out->numel;
  int32_t dt = in->dtype;
  return q.enqueue(ctx, {out, in}, "reduce_scatter", elements(n, dt) + " per rank",
                   [=](Channel &ch, const CommOp &op) {
                     ch.reduceScatter(op, o, i, n, dt, reduction);
                   });
}

extern "C" dsrt_event *dsrt_all_to_all(dsrt_context *ctx, int32_t group, dsrt_tensor *out,
                                       const dsrt_tensor *in) {
  Queue &q = comm(ctx, "all_to_all").queue(group, "all_to_all");
  checkDtype("all_to_all", out, in->dtype, "output");
  if (out->numel != in->numel || in->numel % q.size != 0)
    fail("all_to_all", "input %s and output %s must have the same size, a multiple of the "
         "group's %d ranks", shapeString(in).c_str(), shapeString(out).c_str(), q.size);
  if (out->storage && out->storage == in->storage)
    fail("all_to_all", "the output must not share the input's storage");
  void *o = out->data;
  const void *i = in->data;
  int64_t bytes = in->numel / q.size * (int64_t)dsrt_dtype_size(in->dtype);
  return q.enqueue(ctx, {out, in}, "all_to_all",
                   elements(in->numel / q.size, in->dtype) + " per rank pair",
                   [=](Channel &ch, const CommOp &op) { ch.allToAll(op, o, i, bytes); });
}

dsrt_event *dsrt::enqueueOnGroup(dsrt_context *ctx, int32_t group, const char *what,
                                 std::initializer_list<const dsrt_tensor *> tensors,
                                 std::string detail,
                                 std::function<void(Channel &, const CommOp &)> work) {
  Queue &q = comm(ctx, what).queue(group, what);
  return q.enqueue(ctx, tensors, what, std::move(detail), std::move(work));
}

extern "C" dsrt_event *dsrt_send_recv(dsrt_context *ctx, int32_t group, dsrt_tensor *out,
                                      int32_t src, const dsrt_tensor *in, int32_t dst) {
  Queue &q = comm(ctx, "send_recv").queue(group, "send_recv");
  if ((src >= 0) != (out != nullptr) || (dst >= 0) != (in != nullptr) || (!out && !in))
    fail("send_recv", "a receive needs an output and a source rank, a send an input and a "
         "destination rank (null and -1 for none, not both)");
  if (src >= q.size || dst >= q.size)
    fail("send_recv", "peer %d is not a rank of the group of %d", std::max(src, dst), q.size);
  if (q.size == 1 && (src < 0 || dst < 0))
    fail("send_recv", "a group of one rank can only send to itself what it receives");
  if (out && in && out->storage && out->storage == in->storage)
    fail("send_recv", "the output must not share the input's storage");
  void *o = out ? out->data : nullptr;
  const void *i = in ? in->data : nullptr;
  int64_t recvBytes = out ? out->numel * (int64_t)dsrt_dtype_size(out->dtype) : 0;
  int64_t sendBytes = in ? in->numel * (int64_t)dsrt_dtype_size(in->dtype) : 0;
  std::string detail;
  if (in)
    detail = elements(in->numel, in->dtype) + " to " + std::to_string(dst);
  if (out)
    detail += (in ? ", " : "") + elements(out->numel, out->dtype) + " from " +
              std::to_string(src);
  auto work = [=](Channel &ch, const CommOp &op) {
    ch.sendRecv(op, o, recvBytes, src, i, sendBytes, dst);
  };
  if (out && in)
    return q.enqueue(ctx, {out, in}, "send_recv", detail, work);
  return q.enqueue(ctx, {out ? out : in}, "send_recv", detail, work);
}

extern "C" dsrt_event *dsrt_comm_broadcast(dsrt_context *ctx, int32_t group, dsrt_tensor *t,
                                           int32_t root) {
  Queue &q = comm(ctx, "broadcast").queue(group, "broadcast");
  void *d = t->data;
  int64_t bytes = t->numel * (int64_t)dsrt_dtype_size(t->dtype);
  return q.enqueue(ctx, {t}, "broadcast", elements(t->numel, t->dtype),
                   [=](Channel &ch, const CommOp &op) { ch.broadcast(op, d, bytes, root); });
}

extern "C" dsrt_event *dsrt_gather(dsrt_context *ctx, int32_t group, void *out, const void *in,
                                   const int64_t *bytes, int32_t root) {
  Queue &q = comm(ctx, "gather").queue(group, "gather");
  std::vector<int64_t> b(bytes, bytes + q.size);
  int64_t total = 0;
  for (int64_t n : b)
    total += n;
  return q.enqueue(ctx, {}, "gather", std::to_string(total) + " bytes to rank " +
                                          std::to_string(root),
                   [=](Channel &ch, const CommOp &op) { ch.gather(op, out, in, b, root); });
}

extern "C" dsrt_tensor *dsrt_comm_chunk(dsrt_context *ctx, int32_t group, dsrt_tensor *t,
                                       int32_t rank, const int64_t *dims) {
  Queue &q = comm(ctx, "comm_chunk").queue(group, "comm_chunk");
  int64_t n = 1;
  for (int32_t i = 0; i < rank; ++i)
    n *= dims[i];
  if (n * q.size != t->numel)
    fail("comm_chunk", "%s is not %d chunks of %s", shapeString(t).c_str(), q.size,
         shapeString(rank, dims).c_str());
  return dsrt_tensor_view_at(ctx, t, n * q.rank, rank, dims);
}

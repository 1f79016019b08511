// Channels: the transports of the mesh's groups (not installed). Every call blocks and runs on
// its group's communication thread (comm.cpp), one at a time, in the order the program issued
// them. A channel that can wait on peers waits at most the control's timeout, then ends the
// job naming the ranks that did not answer.
#ifndef DSRT_COMM_CHANNEL_H
#define DSRT_COMM_CHANNEL_H

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dsrt {

/// One collective as the timeout report names it: "all_reduce #57 (1024 f32)".
struct CommOp {
  const char *name = "";
  int64_t seq = 0;    ///< 1-based position among the group's collectives (the same on every rank)
  std::string detail; ///< its size
};

/// Shared by the communication thread, the channel and the threads that ask to end the job.
struct CommControl {
  /// Seconds a collective may wait for its peers; 0 waits forever.
  std::atomic<double> timeoutSeconds{1800};
  /// >= 0: another thread asks the channel to end every rank with this exit code.
  std::atomic<int> abortCode{-1};
};

class Channel {
public:
  virtual ~Channel() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char *name() const = 0;
  /// `count` elements of `dtype` (DSRT_*); `out` may equal `in`.
  virtual void allReduce(const CommOp &op, void *out, const void *in, int64_t count,
                         int32_t dtype, int32_t reduction) = 0;
  /// `in` is `bytes` long; `out` size() times that, in rank order. `in` may be this rank's
  /// part of `out` (in place).
  virtual void allGather(const CommOp &op, void *out, const void *in, int64_t bytes) = 0;
  /// `in` holds size() chunks of `count` elements; rank r's `out` gets the reduced chunk r.
  virtual void reduceScatter(const CommOp &op, void *out, const void *in, int64_t count,
                             int32_t dtype, int32_t reduction) = 0;
  virtual void broadcast(const CommOp &op, void *data, int64_t bytes, int root) = 0;
  /// Rank `root` receives bytes[q] bytes from each rank q, one after another in rank order,
  /// into `out` (ignored elsewhere). The total is at most INT_MAX bytes.
  virtual void gather(const CommOp &op, void *out, const void *in,
                      const std::vector<int64_t> &bytes, int root) = 0;
  /// `in` holds size() blocks of `bytes` each; block q goes to rank q, and `out`'s block q
  /// comes from rank q (MPI_Alltoall). `out` and `in` do not overlap.
  virtual void allToAll(const CommOp &op, void *out, const void *in, int64_t bytes) = 0;
  /// `in` holds size() blocks one after another, block q (sendBytes[q] bytes) going to rank
  /// q; `out` gets recvBytes[q] bytes from each rank q, one after another in rank order
  /// (MPI_Alltoallv with 64-bit counts). Each rank's recvBytes[q] equals rank q's
  /// sendBytes[rank()] (the caller exchanged them first). `out` and `in` do not overlap.
  virtual void allToAllV(const CommOp &op, void *out, const std::vector<int64_t> &recvBytes,
                         const void *in, const std::vector<int64_t> &sendBytes) = 0;
  /// Point to point, both at once: sends `sendBytes` at `in` to rank `dst` and receives
  /// `recvBytes` into `out` from rank `src` (-1: none), as one exchange, so that two ranks that
  /// each send to the other never wait on each other (a pipeline's forward activations one
  /// way, gradients the other). The peers call it with the matching receive and send.
  virtual void sendRecv(const CommOp &op, void *out, int64_t recvBytes, int src, const void *in,
                        int64_t sendBytes, int dst) = 0;
  /// Returns when every rank has called it.
  virtual void barrier(const CommOp &op) = 0;
  /// A channel over the ranks of this one that pass the same `color`, ranked by `key`
  /// (MPI_Comm_split). Every rank of this channel calls it, on this channel's thread, in the
  /// same order; the new channel may then be used on another thread. Null with the reason in
  /// `why` where the transport cannot.
  virtual std::unique_ptr<Channel> split(int color, int key, std::string &why) = 0;
  /// Called first on the thread that will use a channel made by split().
  virtual void enterThread() {}
  /// Called on the communication thread while no work is queued: serves the control's abort
  /// request and peers' timeout reports.
  virtual void idle() {}
  /// The next collective reads data that the compute stream produces up to `event` (a device
  /// event, dsrt_event::native): a channel that moves device memory on its own stream waits for
  /// it there. Called on the communication thread before each collective of a device whose
  /// memory the host cannot address; host channels ignore it (their data are ready).
  virtual void orderAfter(void *event) { (void)event; }
  /// Ends every rank of the group with `code` (the caller has printed why).
  [[noreturn]] virtual void abort(int code) = 0;
};

/// One rank: every collective is a copy.
std::unique_ptr<Channel> makeLoopbackChannel();
/// Whether the process was started by an MPI launcher (mpirun, srun).
bool launchedByMpiLauncher();
/// MPI_COMM_WORLD; must be created, used and destroyed on one thread. On failure (no MPI in
/// this build, MPI_Init failing, or the thread level it needs not provided) returns null and
/// sets `err`.
std::unique_ptr<Channel> makeMpiChannel(CommControl &control, std::string &err);
/// The MPI library's version line ("Open MPI v4.1.4"), or "" when built without MPI.
std::string mpiLibraryVersion();

/// The channel of a device plugin (nccl, in libdsrt_nccl.so) over `host`, the MPI or loopback
/// channel that bootstraps it and carries host-memory traffic; null with the reason in `why`
/// when the plugin is missing or cannot start (src/device/plugin.cpp).
std::unique_ptr<Channel> makePluginChannel(const char *name, std::unique_ptr<Channel> host,
                                           CommControl &control, void *stream, int ordinal,
                                           std::string &why);

/// Splits [0, total) into calls of at most `limit` elements: f(offset, count) for each.
template <class F> void forEachChunk(int64_t total, int64_t limit, F &&f) {
  for (int64_t off = 0; off < total || (total == 0 && off == 0); off += limit) {
    f(off, total - off < limit ? total - off : limit);
    if (total == 0)
      break;
  }
}

} // namespace dsrt

#endif // DSRT_COMM_CHANNEL_H

// Channels: the transports of the data-parallel group (not installed). Every call blocks and
// runs on the communication thread (comm.cpp), one at a time, in the order the program issued
// them.
#ifndef DSRT_COMM_CHANNEL_H
#define DSRT_COMM_CHANNEL_H

#include <cstdint>
#include <memory>
#include <string>

namespace dsrt {

class Channel {
public:
  virtual ~Channel() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char *name() const = 0;
  /// `count` elements of `dtype` (DSRT_*); `out` may equal `in`.
  virtual void allReduce(void *out, const void *in, int64_t count, int32_t dtype,
                         int32_t reduction) = 0;
  /// `in` is `bytes` long; `out` size() times that, in rank order.
  virtual void allGather(void *out, const void *in, int64_t bytes) = 0;
  /// `in` holds size() chunks of `count` elements; rank r's `out` gets the reduced chunk r.
  virtual void reduceScatter(void *out, const void *in, int64_t count, int32_t dtype,
                             int32_t reduction) = 0;
  virtual void broadcast(void *data, int64_t bytes, int root) = 0;
};

/// One rank: every collective is a copy.
std::unique_ptr<Channel> makeLoopbackChannel();
/// Whether the process was started by an MPI launcher (mpirun, srun).
bool launchedByMpiLauncher();
/// MPI_COMM_WORLD; must be created, used and destroyed on one thread. On failure (no MPI in
/// this build, or MPI_Init failing) returns null and sets `err`.
std::unique_ptr<Channel> makeMpiChannel(std::string &err);

} // namespace dsrt

#endif // DSRT_COMM_CHANNEL_H

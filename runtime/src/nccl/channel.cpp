//===- channel.cpp - the NCCL channel (libdsrt_nccl.so) --------------------------------===//
//
// The data-parallel group's channel for the cuda device: collectives on device memory run
// through NCCL on the device's collectives stream, after the compute stream's point where
// their inputs are ready (orderAfter). Host-memory traffic (the driver's agreements, checkpoint
// gathers, the start-up barrier) stays on the MPI or loopback channel that bootstraps NCCL: it
// carries the unique id from rank 0. NCCL runs nonblocking and is polled, so a wait ends at
// --comm-timeout like MPI's: the rank reports where it waits, aborts NCCL and ends the job.
// Built into its own plugin, so that a machine without libnccl still has the cuda device.
//
#include "../comm/channel.h"
#include "../core/internal.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace dsrt {
namespace {

ncclDataType_t ncclType(int32_t dtype) {
  switch (dtype) {
  case DSRT_F32:
    return ncclFloat32;
  case DSRT_F64:
    return ncclFloat64;
  case DSRT_I64:
    return ncclInt64;
  case DSRT_I32:
    return ncclInt32;
  case DSRT_I1:
    return ncclUint8;
  case DSRT_BF16:
    return ncclBfloat16;
  case DSRT_F16:
    return ncclFloat16;
  default:
    fail("nccl", "no NCCL type for dtype %d", dtype);
  }
}

ncclRedOp_t ncclOp(int32_t reduction) {
  switch (reduction) {
  case DSRT_COMM_SUM:
    return ncclSum;
  case DSRT_COMM_MAX:
    return ncclMax;
  case DSRT_COMM_MIN:
    return ncclMin;
  default:
    fail("nccl", "unknown reduction %d", reduction);
  }
}

bool onDevice(const void *p) {
  cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

class Nccl final : public Channel {
public:
  Nccl(std::unique_ptr<Channel> host, CommControl &control, cudaStream_t stream, int gpu)
      : host_(std::move(host)), control_(control), stream_(stream), gpu_(gpu) {}

  /// Joins NCCL's communicator; "" or why not.
  std::string start() {
    if (cudaSetDevice(gpu_) != cudaSuccess)
      return "cudaSetDevice(" + std::to_string(gpu_) + ") failed on the communication thread";
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (host_->rank() == 0 && ncclGetUniqueId(&id) != ncclSuccess)
      return "ncclGetUniqueId failed";
    host_->broadcast(CommOp{"nccl_bootstrap", 0, "the unique id"}, &id, sizeof id, 0);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0; // polled, so that a wait can time out
    ncclResult_t r = ncclCommInitRankConfig(&comm_, host_->size(), id, host_->rank(), &config);
    if (r != ncclSuccess && r != ncclInProgress)
      return std::string("ncclCommInitRankConfig: ") + ncclGetErrorString(r);
    CommOp init{"nccl_init", 0, "the communicator"};
    wait(init, /*stream=*/false);
    return "";
  }
  ~Nccl() override {
    if (comm_)
      ncclCommDestroy(comm_);
  }

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  const char *name() const override { return "nccl"; }

  void orderAfter(void *event) override {
    if (event)
      check(cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(event), 0), "cudaStreamWaitEvent");
  }

  void allReduce(const CommOp &op, void *out, const void *in, int64_t count, int32_t dtype,
                 int32_t reduction) override {
    if (!onDevice(in))
      return host_->allReduce(op, out, in, count, dtype, reduction);
    launched(op, ncclAllReduce(in, out, (size_t)count, ncclType(dtype), ncclOp(reduction), comm_,
                               stream_));
  }
  void allGather(const CommOp &op, void *out, const void *in, int64_t bytes) override {
    if (!onDevice(in))
      return host_->allGather(op, out, in, bytes);
    launched(op, ncclAllGather(in, out, (size_t)bytes, ncclUint8, comm_, stream_));
  }
  void reduceScatter(const CommOp &op, void *out, const void *in, int64_t count, int32_t dtype,
                     int32_t reduction) override {
    if (!onDevice(in))
      return host_->reduceScatter(op, out, in, count, dtype, reduction);
    launched(op, ncclReduceScatter(in, out, (size_t)count, ncclType(dtype), ncclOp(reduction),
                                   comm_, stream_));
  }
  void broadcast(const CommOp &op, void *data, int64_t bytes, int root) override {
    if (!onDevice(data))
      return host_->broadcast(op, data, bytes, root);
    launched(op, ncclBroadcast(data, data, (size_t)bytes, ncclUint8, root, comm_, stream_));
  }
  void gather(const CommOp &op, void *out, const void *in, const std::vector<int64_t> &bytes,
              int root) override {
    if (onDevice(in))
      fail("nccl", "gather of device memory (the driver gathers host buffers)");
    host_->gather(op, out, in, bytes, root);
  }
  void allToAll(const CommOp &op, void *out, const void *in, int64_t bytes) override {
    if (!onDevice(in))
      return host_->allToAll(op, out, in, bytes);
    // NCCL has no all-to-all call: a send and a receive per peer, grouped.
    ncclResult_t r = ncclGroupStart();
    for (int q = 0; q < size() && (r == ncclSuccess || r == ncclInProgress); ++q) {
      r = ncclSend(static_cast<const char *>(in) + q * bytes, (size_t)bytes, ncclUint8, q, comm_,
                   stream_);
      if (r == ncclSuccess || r == ncclInProgress)
        r = ncclRecv(static_cast<char *>(out) + q * bytes, (size_t)bytes, ncclUint8, q, comm_,
                     stream_);
    }
    ncclResult_t end = ncclGroupEnd();
    launched(op, r == ncclSuccess || r == ncclInProgress ? end : r);
  }
  void allToAllV(const CommOp &op, void *out, const std::vector<int64_t> &recvBytes,
                 const void *in, const std::vector<int64_t> &sendBytes) override {
    if (!onDevice(in))
      return host_->allToAllV(op, out, recvBytes, in, sendBytes);
    // A send and a receive per peer with a block, grouped.
    ncclResult_t r = ncclGroupStart();
    int64_t sent = 0, received = 0;
    for (int q = 0; q < size() && (r == ncclSuccess || r == ncclInProgress); ++q) {
      if (sendBytes[q] > 0)
        r = ncclSend(static_cast<const char *>(in) + sent, (size_t)sendBytes[q], ncclUint8, q,
                     comm_, stream_);
      if (recvBytes[q] > 0 && (r == ncclSuccess || r == ncclInProgress))
        r = ncclRecv(static_cast<char *>(out) + received, (size_t)recvBytes[q], ncclUint8, q,
                     comm_, stream_);
      sent += sendBytes[q];
      received += recvBytes[q];
    }
    ncclResult_t end = ncclGroupEnd();
    launched(op, r == ncclSuccess || r == ncclInProgress ? end : r);
  }
  void sendRecv(const CommOp &op, void *out, int64_t recvBytes, int src, const void *in,
                int64_t sendBytes, int dst) override {
    if (!onDevice(dst >= 0 ? in : out))
      return host_->sendRecv(op, out, recvBytes, src, in, sendBytes, dst);
    // One group: the send and the receive progress together.
    ncclResult_t r = ncclGroupStart();
    if (dst >= 0 && (r == ncclSuccess || r == ncclInProgress))
      r = ncclSend(in, (size_t)sendBytes, ncclUint8, dst, comm_, stream_);
    if (src >= 0 && (r == ncclSuccess || r == ncclInProgress))
      r = ncclRecv(out, (size_t)recvBytes, ncclUint8, src, comm_, stream_);
    ncclResult_t end = ncclGroupEnd();
    launched(op, r == ncclSuccess || r == ncclInProgress ? end : r);
  }
  std::unique_ptr<Channel> split(int color, int key, std::string &why) override {
    std::unique_ptr<Channel> host = host_->split(color, key, why);
    if (!host)
      return nullptr;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t sub = nullptr;
    ncclResult_t r = ncclCommSplit(comm_, color, key, &sub, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      why = std::string("ncclCommSplit: ") + ncclGetErrorString(r);
      return nullptr;
    }
    // The group's collectives share this device's collectives stream (they are ordered with
    // the world's on the GPU; their queues on the host stay apart).
    auto n = std::make_unique<Nccl>(std::move(host), control_, stream_, gpu_);
    n->comm_ = sub;
    CommOp init{"nccl_split", 0, "a group's communicator"};
    n->wait(init, /*stream=*/false);
    return n;
  }
  void barrier(const CommOp &op) override { host_->barrier(op); }
  void enterThread() override {
    host_->enterThread();
    check(cudaSetDevice(gpu_), "cudaSetDevice on a group's communication thread");
  }
  void idle() override { host_->idle(); }
  [[noreturn]] void abort(int code) override {
    if (comm_)
      ncclCommAbort(comm_);
    comm_ = nullptr;
    host_->abort(code);
    std::_Exit(code); // not reached: the host channel ends the job
  }

private:
  std::unique_ptr<Channel> host_;
  CommControl &control_;
  cudaStream_t stream_;
  int gpu_;
  ncclComm_t comm_ = nullptr;

  static void check(cudaError_t e, const char *what) {
    if (e != cudaSuccess)
      fail("nccl", "%s: %s", what, cudaGetErrorString(e));
  }
  void launched(const CommOp &op, ncclResult_t r) {
    if (r != ncclSuccess && r != ncclInProgress)
      fail("nccl", "%s #%lld (%s): %s", op.name, (long long)op.seq, op.detail.c_str(),
           ncclGetErrorString(r));
    wait(op, /*stream=*/true);
  }
  /// Polls the communicator (and the stream) to completion; past --comm-timeout, or when
  /// another thread asks to end the job, aborts NCCL and ends every rank.
  void wait(const CommOp &op, bool stream) {
    auto start = std::chrono::steady_clock::now();
    for (;;) {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress) {
        std::fprintf(stderr, "dsrt: rank %d: nccl: %s #%lld (%s) failed: %s; ending the job\n",
                     rank(), op.name, (long long)op.seq, op.detail.c_str(),
                     ncclGetErrorString(state));
        abort(1);
      }
      if (state == ncclSuccess) {
        if (!stream)
          return;
        cudaError_t q = cudaStreamQuery(stream_);
        if (q == cudaSuccess)
          return;
        if (q != cudaErrorNotReady)
          check(q, "cudaStreamQuery");
      }
      if (control_.abortCode.load() >= 0)
        abort(control_.abortCode.load());
      double limit = control_.timeoutSeconds.load();
      double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (limit > 0 && waited > limit) {
        std::fprintf(stderr,
                     "dsrt: rank %d: waited %.0f s (--comm-timeout) in %s #%lld (%s) on NCCL; a "
                     "rank is stopped, hung or dead (NCCL cannot say which); ending the job\n",
                     rank(), waited, op.name, (long long)op.seq, op.detail.c_str());
        abort(1);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
};

} // namespace
} // namespace dsrt

extern "C" dsrt::Channel *dsrt_nccl_channel_create(dsrt::Channel *host,
                                                   dsrt::CommControl *control, void *stream,
                                                   int ordinal, char *why, size_t cap) {
  auto n = std::make_unique<dsrt::Nccl>(std::unique_ptr<dsrt::Channel>(host), *control,
                                        static_cast<cudaStream_t>(stream), ordinal);
  std::string err = n->start();
  if (!err.empty()) {
    std::snprintf(why, cap, "%s", err.c_str());
    return nullptr;
  }
  return n.release();
}

extern "C" size_t dsrt_nccl_report(char *buf, size_t cap) {
  int v = 0;
  ncclGetVersion(&v); // e.g. 22807 for 2.28.7
  std::string line = "nccl: built yes; NCCL " + std::to_string(v / 10000) + "." +
                     std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    line += "; unavailable: no usable GPU (the nccl channel moves the cuda device's memory)\n";
  } else {
    line += "; usable with --device cuda (one rank per GPU; under mpirun, MPI carries its "
            "start-up)\n";
  }
  if (buf && cap)
    std::snprintf(buf, cap, "%s", line.c_str());
  return line.size();
}

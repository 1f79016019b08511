//===- loopback.cpp - the channel of a single rank ----------------------------===//
#include "channel.h"

#include "dsrt/dsrt.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dsrt {
namespace {
class Loopback : public Channel {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char *name() const override { return "loopback"; }
  void allReduce(const CommOp &, void *out, const void *in, int64_t count, int32_t dtype,
                 int32_t) override {
    copy(out, in, count * dsrt_dtype_size(dtype));
  }
  void allGather(const CommOp &, void *out, const void *in, int64_t bytes) override {
    copy(out, in, bytes);
  }
  void reduceScatter(const CommOp &, void *out, const void *in, int64_t count, int32_t dtype,
                     int32_t) override {
    copy(out, in, count * dsrt_dtype_size(dtype));
  }
  void broadcast(const CommOp &, void *, int64_t, int) override {}
  void gather(const CommOp &, void *out, const void *in, const std::vector<int64_t> &bytes,
              int) override {
    copy(out, in, bytes[0]);
  }
  void allToAll(const CommOp &, void *out, const void *in, int64_t bytes) override {
    copy(out, in, bytes);
  }
  void allToAllV(const CommOp &, void *out, const std::vector<int64_t> &recvBytes,
                 const void *in, const std::vector<int64_t> &) override {
    copy(out, in, recvBytes[0]);
  }
  void sendRecv(const CommOp &, void *out, int64_t recvBytes, int src, const void *in,
                int64_t sendBytes, int dst) override {
    // One rank: only a send to itself with its receive (dsrt_send_recv checks the peers).
    if (src == 0 && dst == 0)
      copy(out, in, std::min(recvBytes, sendBytes));
  }
  void barrier(const CommOp &) override {}
  std::unique_ptr<Channel> split(int, int, std::string &) override {
    return std::make_unique<Loopback>();
  }
  [[noreturn]] void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(code);
  }

private:
  static void copy(void *out, const void *in, int64_t bytes) {
    if (out != in)
      std::memmove(out, in, bytes);
  }
};
} // namespace

std::unique_ptr<Channel> makeLoopbackChannel() { return std::make_unique<Loopback>(); }
} // namespace dsrt

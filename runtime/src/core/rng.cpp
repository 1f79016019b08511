//===- rng.cpp - the context's random generator state, for checkpoints ------===//
#include "internal.h"

#include <cstring>
#include <sstream>

extern "C" size_t dsrt_rng_get(dsrt_context *ctx, char *buf, size_t cap) {
  std::ostringstream os;
  os << ctx->rng;
  std::string s = os.str();
  if (buf && cap) {
    size_t n = std::min(cap - 1, s.size());
    std::memcpy(buf, s.data(), n);
    buf[n] = '\0';
  }
  return s.size();
}

extern "C" int32_t dsrt_rng_set(dsrt_context *ctx, const char *state) {
  std::istringstream is(state ? state : "");
  std::mt19937_64 rng;
  is >> rng;
  if (is.fail())
    return -1;
  ctx->rng = rng;
  return 0;
}

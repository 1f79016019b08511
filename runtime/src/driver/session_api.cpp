//===- session_api.cpp - dsrt_session_*: a Session behind the C API ----------===//
#include "session.h"

#include "dsrt/dsrt.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using dsrt::driver::Session;

struct dsrt_session {
  Session s;
  bool borrows = false; ///< the device reads host memory: inputs are wrapped, not copied
  explicit dsrt_session(const dsrt_program *program) : s("ds", program, /*quiet=*/true) {}
};

namespace {
int32_t failed(const std::string &message, char *err, size_t cap) {
  if (err && cap)
    std::snprintf(err, cap, "%s", message.c_str());
  return 1;
}
} // namespace

extern "C" dsrt_session *dsrt_session_open(const dsrt_program *program, int argc, char **argv,
                                           char *err, size_t cap) {
  auto *session = new dsrt_session(program);
  int rc = session->s.open(argc, argv, /*data=*/nullptr);
  if (rc != 0) {
    failed(rc == 2 ? "nothing to train (--help, or a checkpoint at its last step)"
                   : session->s.error(),
           err, cap);
    delete session;
    return nullptr;
  }
  session->borrows = std::strcmp(dsrt_context_device(session->s.context()), "cpu") == 0;
  return session;
}

extern "C" void dsrt_session_close(dsrt_session *s) { delete s; }

extern "C" dsrt_context *dsrt_session_context(dsrt_session *s) { return s->s.context(); }

extern "C" int64_t dsrt_session_next_step(dsrt_session *s) { return s->s.nextStep(); }

extern "C" double dsrt_session_next_lr(dsrt_session *s) { return s->s.nextLr(); }

extern "C" void dsrt_session_set_lr(dsrt_session *s, double lr) { s->s.setLr(lr); }

extern "C" void dsrt_session_begin_step(dsrt_session *s) { s->s.beginStep(); }

extern "C" void dsrt_session_call(dsrt_session *s, const void *const *inputs, float *losses) {
  const dsrt::driver::ProgramSpec &p = s->s.program();
  dsrt_context *ctx = s->s.context();
  const size_t n = p.inputs.size(), perCall = static_cast<size_t>(p.microBatchesPerCall);
  std::vector<dsrt_tensor *> ts(n * perCall);
  for (size_t j = 0; j < ts.size(); ++j) {
    const dsrt::driver::InputSpec &in = p.inputs[j % n];
    const int32_t rank = static_cast<int32_t>(in.dims.size());
    if (s->borrows) {
      ts[j] = dsrt_tensor_host(ctx, in.dtype, rank, in.dims.data(), const_cast<void *>(inputs[j]));
    } else {
      ts[j] = dsrt_tensor_alloc(ctx, in.dtype, rank, in.dims.data());
      dsrt_tensor_from_host(ctx, ts[j], inputs[j]);
    }
  }
  const size_t before = s->s.losses().size();
  s->s.call(ts.data());
  for (dsrt_tensor *t : ts)
    dsrt_tensor_free(ctx, t);
  const std::vector<float> &all = s->s.losses();
  std::copy(all.begin() + before, all.end(), losses);
}

extern "C" int32_t dsrt_session_end_step(dsrt_session *s, float *loss, double *lr,
                                         int32_t *skipped, char *err, size_t cap) {
  dsrt::driver::StepOutcome out;
  if (!s->s.endStep(out))
    return failed(s->s.error(), err, cap);
  *loss = out.loss;
  *lr = out.lr;
  *skipped = out.skipped ? 1 : 0;
  return 0;
}

extern "C" int32_t dsrt_session_agree(dsrt_session *s, const char *error, char *err,
                                      size_t cap) {
  return s->s.agree(error ? error : "") ? 0 : failed(s->s.error(), err, cap);
}

extern "C" void dsrt_session_all_gather(dsrt_session *s, const void *mine, size_t bytes,
                                        void *out) {
  const dsrt::driver::Group &g = s->s.group();
  if (g.size() == 1) {
    std::memcpy(out, mine, bytes);
    return;
  }
  std::vector<char> all = g.gather(mine, static_cast<int64_t>(bytes));
  std::memcpy(out, all.data(), all.size());
}

extern "C" int32_t dsrt_session_save(dsrt_session *s, const char *dir, char *err, size_t cap) {
  return s->s.save(dir) ? 0 : failed(s->s.error(), err, cap);
}

extern "C" int32_t dsrt_session_load(dsrt_session *s, const char *dir, char *err, size_t cap) {
  return s->s.load(dir) ? 0 : failed(s->s.error(), err, cap);
}

extern "C" int32_t dsrt_session_export_weights(dsrt_session *s, const char *path, char *err,
                                               size_t cap) {
  return s->s.exportWeights(path) ? 0 : failed(s->s.error(), err, cap);
}

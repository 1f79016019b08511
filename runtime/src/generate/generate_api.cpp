//===- generate_api.cpp - dsrt/generate.h over the Generator ----------------===//
#include "generator.h"

#include <cstdio>

struct dsrt_generator {
  dsrt::generate::Generator g;
};

namespace {
void copyError(const std::string &why, char *err, size_t cap) {
  if (err && cap)
    std::snprintf(err, cap, "%s", why.c_str());
}
} // namespace

extern "C" {

dsrt_generator *dsrt_generator_open(const dsrt_generation_program *program, const char *weights,
                                    int32_t threads, char *err, size_t cap) {
  auto *g = new dsrt_generator;
  std::string why;
  if (!program || !weights) {
    why = "dsrt_generator_open needs a program and a weights path";
  } else if (g->g.open(*program, weights, threads, why)) {
    return g;
  }
  copyError(why, err, cap);
  delete g;
  return nullptr;
}

void dsrt_generator_close(dsrt_generator *g) { delete g; }

int64_t dsrt_generator_rows(const dsrt_generator *g) { return g->g.rows(); }
int64_t dsrt_generator_vocab(const dsrt_generator *g) { return g->g.vocab(); }
int64_t dsrt_generator_max_sequence_tokens(const dsrt_generator *g) {
  return g->g.maxSequenceTokens();
}
int64_t dsrt_generator_free_tokens(const dsrt_generator *g) { return g->g.freeTokens(); }

int64_t dsrt_generator_add(dsrt_generator *g, const int64_t *prompt, int64_t n,
                           int64_t max_new_tokens, const dsrt_sampling *sampling,
                           int32_t *retry, char *err, size_t cap) {
  bool again = false;
  std::string why;
  dsrt_sampling greedy{0.f, 0, 1.f, 0};
  int64_t id = g->g.add(prompt, n, max_new_tokens, sampling ? *sampling : greedy, again, why);
  if (retry)
    *retry = again;
  if (id < 0)
    copyError(why, err, cap);
  return id;
}

int64_t dsrt_generator_step(dsrt_generator *g, int64_t *ids, int64_t *tokens, int32_t *last,
                            float *logits) {
  return g->g.step(ids, tokens, last, logits);
}

void dsrt_generator_cancel(dsrt_generator *g, int64_t id) { g->g.cancel(id); }

} // extern "C"

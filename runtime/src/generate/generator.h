// Continuous batching over ds-opt --inference's @prefill and @decode: sequences hold a row of
// the programs' batch and pages of the key/value cache from admission to their last token;
// each call runs either a prefill chunk of every sequence with prompt tokens left or one
// decoding step of every sequence.
#ifndef DSRT_GENERATE_GENERATOR_H
#define DSRT_GENERATE_GENERATOR_H

#include "../driver/group.h"
#include "../driver/program.h"
#include "dsrt/generate.h"

#include <optional>
#include <string>
#include <vector>

namespace dsrt::generate {

/// One program's inputs (names, dims and dtypes in the entry point's order).
struct CallSpec {
  dsrt_generation_call fn = nullptr;
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> dims;
  std::vector<int32_t> dtypes;
  int32_t indexOf(const std::string &name) const;
};

class Generator {
public:
  ~Generator();
  /// Reads the descriptor, creates the context, defines the slots and loads the weights.
  bool open(const dsrt_generation_program &program, const std::string &weights,
            int32_t threads, std::string &err);

  int64_t rows() const { return rows_; }
  int64_t vocab() const { return vocab_; }
  int64_t maxSequenceTokens() const { return maxPages_ * pageSize_; }
  int64_t freeTokens() const {
    return static_cast<int64_t>(freePages_.size()) * pageSize_;
  }

  /// dsrt_generator_add: the sequence's id, or -1 with `retry` and `err` set.
  int64_t add(const int64_t *prompt, int64_t n, int64_t maxNew, const dsrt_sampling &s,
              bool &retry, std::string &err);
  /// dsrt_generator_step.
  int64_t step(int64_t *ids, int64_t *tokens, int32_t *last, float *logits);
  void cancel(int64_t id);

private:
  struct Sequence {
    int64_t id = 0;
    std::vector<int64_t> tokens; ///< the prompt, then each new token
    int64_t prompt = 0, maxNew = 0, produced = 0;
    int64_t cached = 0; ///< tokens whose keys and values are in the cache
    std::vector<int64_t> pages;
    dsrt_sampling sampling{};
  };
  /// The cache slot of position `pos` of `s`.
  int64_t slotOf(const Sequence &s, int64_t pos) const {
    return s.pages[pos / pageSize_] * pageSize_ + pos % pageSize_;
  }
  void release(int64_t row);
  /// Runs `call` on the host arrays `i64` / `f32` (by input index); copies the results.
  void run(const CallSpec &call, std::vector<std::vector<int64_t>> &i64,
           std::vector<std::vector<float>> &f32);
  /// Fresh inputs for `call`: padding rows (slots -1, nothing attended), every row's pages
  /// and sampling.
  void prepare(const CallSpec &call, std::vector<std::vector<int64_t>> &i64,
               std::vector<std::vector<float>> &f32) const;

  driver::ProgramSpec spec_;
  driver::Group group_;
  dsrt_context *ctx_ = nullptr;
  CallSpec prefill_, decode_;
  int64_t rows_ = 0, chunk_ = 0, vocab_ = 0, pageSize_ = 0, maxPages_ = 0;
  std::vector<std::optional<Sequence>> seqs_; ///< by row
  std::vector<int64_t> freePages_;
  int64_t nextId_ = 0;
  std::vector<int64_t> outTokens_;
  std::vector<float> outLogits_;
};

} // namespace dsrt::generate

#endif

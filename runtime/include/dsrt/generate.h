/*===- dsrt/generate.h - generation with ds-opt --inference's programs ------===*\
|*                                                                            *|
|* A generator runs a module's @prefill and @decode for sequences that join  *|
|* and leave at any step (continuous batching): each sequence holds a row of *|
|* the programs' batch and pages of the key/value cache from admission to    *|
|* its last token. ds-generate and ds-serve are its callers.                 *|
\*===----------------------------------------------------------------------===*/
#ifndef DSRT_GENERATE_H
#define DSRT_GENERATE_H

#include "dsrt/dsrt.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** One generation program's entry point: its inputs in the descriptor's order, its results
 *  (tokens i64 [B], logits f32 [B, V]) returned as new tensors the caller frees. */
typedef void (*dsrt_generation_call)(dsrt_context *ctx, dsrt_tensor **inputs,
                                     dsrt_tensor **results);

/** The entry points and descriptor of a module made by ds-opt --inference. */
typedef struct dsrt_generation_program {
  /** JSON: {"slots": [...], "generation": [{name, symbol, inputs, results, ...}], ...}. */
  const char *metadata;
  void (*init_slots)(dsrt_context *ctx);
  dsrt_generation_call prefill, decode;
} dsrt_generation_program;

/** How a sequence's tokens are drawn: temperature 0 is greedy; top_k 0 and top_p 1 keep
 *  every token. A draw depends only on the seed and the token's index in the sequence. */
typedef struct dsrt_sampling {
  float temperature;
  int64_t top_k;
  float top_p;
  int64_t seed;
} dsrt_sampling;

typedef struct dsrt_generator dsrt_generator;

/** Opens a generator: the program's slots defined and its weights read from `weights`
 *  (safetensors, the state_dict's names). `threads`: compute threads (0: default). On failure
 *  returns NULL with the cause and its fix in `err` (`cap` bytes). */
dsrt_generator *dsrt_generator_open(const dsrt_generation_program *program, const char *weights,
                                    int32_t threads, char *err, size_t cap);
void dsrt_generator_close(dsrt_generator *g);

/** The sequences that run at once (ds-opt --inference's max_batch), the vocabulary, the most
 *  tokens one sequence can hold (prompt and new tokens), and the tokens whose pages are free
 *  now. */
int64_t dsrt_generator_rows(const dsrt_generator *g);
int64_t dsrt_generator_vocab(const dsrt_generator *g);
int64_t dsrt_generator_max_sequence_tokens(const dsrt_generator *g);
int64_t dsrt_generator_free_tokens(const dsrt_generator *g);

/** Admits a sequence: `prompt` (n >= 1 token ids) followed by `max_new_tokens` (>= 1) new
 *  tokens. Its row and the cache pages of all its tokens are taken now, so an admitted
 *  sequence always finishes. Returns its id (>= 0), or -1 when it cannot run now: no free row
 *  or too few free pages (`*retry` = 1: admit it when a sequence has finished), or never (a
 *  token id outside the vocabulary, or more tokens than a sequence holds; `*retry` = 0), with
 *  the cause in `err`. */
int64_t dsrt_generator_add(dsrt_generator *g, const int64_t *prompt, int64_t n,
                           int64_t max_new_tokens, const dsrt_sampling *sampling,
                           int32_t *retry, char *err, size_t cap);

/** Runs one call: a chunk of prefill for every sequence with prompt tokens left, otherwise a
 *  decoding step for every sequence. Writes the new tokens it produced (at most rows): their
 *  sequences in `ids`, the tokens in `tokens`, 1 in `last` for a sequence's last token (its
 *  row and pages are free again, its id spent), and when `logits` is not NULL the logits
 *  each token was drawn from ([count, vocab] f32). Returns the count (0 when no sequence is
 *  admitted). */
int64_t dsrt_generator_step(dsrt_generator *g, int64_t *ids, int64_t *tokens, int32_t *last,
                            float *logits);

/** Stops a sequence before its last token (a client gone): its row and pages are free. */
void dsrt_generator_cancel(dsrt_generator *g, int64_t id);

#ifdef __cplusplus
}
#endif

#endif /* DSRT_GENERATE_H */

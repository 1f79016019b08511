//===- OpenAI.h - OpenAI's HTTP API over the scheduler --------------------------===//
//
// /v1/completions and /v1/chat/completions (whole or streamed as server-sent events),
// /v1/models and /health, with OpenAI's request fields, response shapes and error objects
// (400 for a request that cannot run, 503 while the queue is full or the server stops).
//
#ifndef DS_SERVE_OPENAI_H
#define DS_SERVE_OPENAI_H

#include "Http.h"
#include "Scheduler.h"

#include "ds/Tokenizer/ChatTemplate.h"
#include "ds/Tokenizer/Tokenizer.h"

#include <atomic>
#include <string>
#include <vector>

namespace dsserve {

struct Server {
  Scheduler *scheduler = nullptr;
  const dstok::Tokenizer *tokenizer = nullptr; ///< null: prompts as token ids only
  const dstok::ChatTemplate *chat = nullptr;   ///< null: no /v1/chat/completions
  std::string model;                           ///< the name /v1/models lists
  int64_t vocab = 0, maxSequenceTokens = 0;
  std::vector<int64_t> endTokens; ///< the model's end-of-sequence ids
  int64_t created = 0;            ///< the server's start (Unix seconds)
  std::atomic<uint64_t> nextId{0};
};

/// Answers one request.
void handle(Server &s, const HttpRequest &req, HttpResponse &res);

} // namespace dsserve

#endif

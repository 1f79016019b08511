//===- OpenAI.cpp - OpenAI's HTTP API over the scheduler -----------------------===//
#include "OpenAI.h"

#include "llvm/Support/JSON.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace dsserve {

namespace json = llvm::json;

namespace {
/// OpenAI's error object.
void error(HttpResponse &res, int status, const std::string &message,
           const char *param = nullptr) {
  json::Object e{{"message", message},
                 {"type", status == 503 ? "server_error" : "invalid_request_error"},
                 {"param", param ? json::Value(param) : json::Value(nullptr)},
                 {"code", nullptr}};
  res.send(status, "application/json", llvm::formatv("{0}", json::Value(json::Object{
                                                                {"error", std::move(e)}}))
                                           .str());
}

std::string dump(json::Value v) { return llvm::formatv("{0}", v).str(); }

/// What a completion request asks, whichever endpoint it came from.
struct Ask {
  std::vector<std::vector<int64_t>> prompts;
  int64_t maxTokens = 16;
  dsrt_sampling sampling{1.f, 0, 1.f, 0};
  bool stream = false, ignoreEos = false;
  std::vector<std::string> stop;
};

/// Reads the fields both endpoints share; false with the 400 already sent.
bool readSampling(Server &s, const json::Object &o, Ask &ask, HttpResponse &res,
                  const char *maxKey) {
  auto number = [&](const char *key, double lo, double hi, double &out) {
    const json::Value *v = o.get(key);
    if (!v || v->kind() == json::Value::Null)
      return true;
    auto d = v->getAsNumber();
    if (!d || *d < lo || *d > hi) {
      auto text = [](double x) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", x);
        return std::string(buf);
      };
      error(res, 400, std::string("'") + key + "' must be a number from " + text(lo) + " to " +
                          text(hi),
            key);
      return false;
    }
    out = *d;
    return true;
  };
  double temperature = 1, topP = 1, topK = 0, maxTokens = 16, n = 1;
  double seed = static_cast<double>(s.nextId.load());
  for (const char *key : {maxKey, "max_tokens"}) {
    const json::Value *v = o.get(key);
    if (v && v->kind() != json::Value::Null &&
        (!v->getAsInteger() || *v->getAsInteger() < 1)) {
      error(res, 400, std::string("'") + key + "' must be a positive integer", key);
      return false;
    }
    if (v && v->getAsInteger()) {
      maxTokens = static_cast<double>(*v->getAsInteger());
      break;
    }
  }
  if (!number("temperature", 0, 2, temperature) || !number("top_p", 1e-9, 1, topP) ||
      !number("top_k", -1, 1e9, topK) || !number("seed", 0, 9.2e18, seed) ||
      !number("n", 1, 1, n))
    return false;
  for (const char *key : {"logprobs", "top_logprobs", "echo", "suffix", "tools", "best_of"})
    if (const json::Value *v = o.get(key);
        v && v->kind() != json::Value::Null && v->getAsBoolean() != false &&
        !(std::string(key) == "best_of" && v->getAsInteger() == 1)) {
      error(res, 400, std::string("'") + key + "' is not supported by ds-serve", key);
      return false;
    }
  ask.maxTokens = static_cast<int64_t>(maxTokens);
  ask.sampling = {static_cast<float>(temperature), topK < 0 ? 0 : static_cast<int64_t>(topK),
                  static_cast<float>(topP), static_cast<int64_t>(seed)};
  ask.stream = o.getBoolean("stream").value_or(false);
  ask.ignoreEos = o.getBoolean("ignore_eos").value_or(false);
  if (const json::Value *stop = o.get("stop")) {
    if (auto str = stop->getAsString()) {
      ask.stop.push_back(str->str());
    } else if (const json::Array *a = stop->getAsArray()) {
      for (const json::Value &x : *a)
        if (auto t = x.getAsString())
          ask.stop.push_back(t->str());
    }
    ask.stop.erase(std::remove(ask.stop.begin(), ask.stop.end(), ""), ask.stop.end());
  }
  return true;
}

/// Each prompt must fit one sequence of the cache, its ids the vocabulary.
bool checkPrompts(Server &s, const Ask &ask, HttpResponse &res) {
  for (const std::vector<int64_t> &p : ask.prompts) {
    if (p.empty()) {
      error(res, 400, "the prompt is empty", "prompt");
      return false;
    }
    for (int64_t id : p)
      if (id < 0 || id >= s.vocab) {
        error(res, 400, "token id " + std::to_string(id) + " is outside the vocabulary (0 to " +
                            std::to_string(s.vocab - 1) + ")",
              "prompt");
        return false;
      }
    int64_t need = static_cast<int64_t>(p.size()) + ask.maxTokens;
    if (need - 1 > s.maxSequenceTokens) {
      error(res, 400, "This model's maximum context length is " +
                          std::to_string(s.maxSequenceTokens + 1) + " tokens. However, you "
                          "requested " + std::to_string(need) + " tokens (" +
                          std::to_string(p.size()) + " in the prompt, " +
                          std::to_string(ask.maxTokens) + " for the completion). Reduce the "
                          "prompt or max_tokens.",
            "max_tokens");
      return false;
    }
  }
  return true;
}

/// One choice's text as its tokens arrive: decoded, cut at a stop string, and the part that
/// can be sent (a possible start of a stop string held back).
struct Choice {
  explicit Choice(const dstok::Tokenizer *t) : decoder(t ? new dstok::StreamDecoder(*t) : nullptr) {}
  std::unique_ptr<dstok::StreamDecoder> decoder;
  std::string text, finish;
  std::vector<int64_t> tokens;
  size_t sent = 0;
};

/// Runs `ask` and answers: whole, or streamed chunk by chunk. `chunk(choice, delta, finish)`
/// builds one choice's part of a response object.
void complete(Server &s, Ask &ask, HttpResponse &res, bool chat) {
  if (!checkPrompts(s, ask, res))
    return;
  auto job = std::make_shared<Job>();
  std::vector<SequenceRequest> seqs;
  for (size_t c = 0; c < ask.prompts.size(); ++c) {
    SequenceRequest r;
    r.job = job;
    r.choice = c;
    r.prompt = ask.prompts[c];
    r.maxNewTokens = ask.maxTokens;
    r.sampling = ask.sampling;
    if (!ask.ignoreEos)
      r.endTokens = s.endTokens;
    seqs.push_back(std::move(r));
  }
  switch (s.scheduler->submit(std::move(seqs))) {
  case Scheduler::Submitted::QueueFull:
    return error(res, 503, "the server's queue is full; retry later");
  case Scheduler::Submitted::ShuttingDown:
    return error(res, 503, "the server is shutting down");
  case Scheduler::Submitted::Queued:
    break;
  }
  const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(s.nextId++);
  const std::string object = chat ? (ask.stream ? "chat.completion.chunk" : "chat.completion")
                                  : "text_completion";
  const int64_t created = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  auto envelope = [&](json::Array choices) {
    return json::Object{{"id", id},
                        {"object", object},
                        {"created", created},
                        {"model", s.model},
                        {"choices", std::move(choices)}};
  };
  auto part = [&](size_t c, const std::string &delta, const std::string &finish, bool first) {
    json::Value reason = finish.empty() ? json::Value(nullptr) : json::Value(finish);
    if (!chat)
      return json::Object{{"index", static_cast<int64_t>(c)},
                          {"text", delta},
                          {"logprobs", nullptr},
                          {"finish_reason", std::move(reason)}};
    json::Object message{{"content", delta}};
    if (first || !ask.stream)
      message["role"] = "assistant";
    return json::Object{{"index", static_cast<int64_t>(c)},
                        {ask.stream ? "delta" : "message", std::move(message)},
                        {"logprobs", nullptr},
                        {"finish_reason", std::move(reason)}};
  };
  size_t holdback = 0;
  for (const std::string &t : ask.stop)
    holdback = std::max(holdback, t.size() - 1);

  std::vector<Choice> choices;
  for (size_t c = 0; c < ask.prompts.size(); ++c)
    choices.emplace_back(s.tokenizer);
  if (ask.stream) {
    if (!res.startEvents()) {
      std::lock_guard<std::mutex> g(job->lock);
      job->gone = true;
      return;
    }
    if (chat)
      for (size_t c = 0; c < choices.size(); ++c)
        res.event(dump(envelope(json::Array{part(c, "", "", true)})));
  }
  size_t open = choices.size();
  while (open) {
    std::deque<Job::Event> events;
    {
      std::unique_lock<std::mutex> g(job->lock);
      job->ready.wait(g, [&] { return !job->events.empty(); });
      events.swap(job->events);
    }
    for (const Job::Event &e : events) {
      Choice &ch = choices[e.choice];
      if (!ch.finish.empty())
        continue;
      std::string finish = e.finish;
      if (e.token >= 0)
        ch.tokens.push_back(e.token);
      // An end token's own text is not part of the completion.
      if (e.token >= 0 && finish != "stop") {
        ch.text += ch.decoder ? ch.decoder->push(e.token) : " " + std::to_string(e.token);
        if (!finish.empty() && ch.decoder)
          ch.text += ch.decoder->finish();
      }
      for (const std::string &t : ask.stop)
        if (size_t at = ch.text.find(t, ch.sent > holdback ? ch.sent - holdback : 0);
            at != std::string::npos) {
          ch.text.resize(at);
          finish = "stop";
          std::lock_guard<std::mutex> g(job->lock);
          job->stopped.insert(e.choice);
        }
      if (finish.rfind("error", 0) == 0)
        finish = "error";
      ch.finish = finish;
      if (!finish.empty())
        --open;
      if (!ask.stream)
        continue;
      size_t safe = finish.empty() ? (ch.text.size() > holdback ? ch.text.size() - holdback : 0)
                                   : ch.text.size();
      if (safe > ch.sent || !finish.empty()) {
        std::string delta = ch.text.substr(ch.sent, safe > ch.sent ? safe - ch.sent : 0);
        ch.sent = std::max(ch.sent, safe);
        if (!res.event(dump(envelope(json::Array{part(e.choice, delta, finish, false)})))) {
          std::lock_guard<std::mutex> g(job->lock);
          job->gone = true; // the client has gone: its sequences stop
          return;
        }
      }
    }
  }
  int64_t promptTokens = 0, completionTokens = 0;
  for (size_t c = 0; c < choices.size(); ++c) {
    promptTokens += static_cast<int64_t>(ask.prompts[c].size());
    completionTokens += static_cast<int64_t>(choices[c].tokens.size());
  }
  json::Object usage{{"prompt_tokens", promptTokens},
                     {"completion_tokens", completionTokens},
                     {"total_tokens", promptTokens + completionTokens}};
  if (ask.stream) {
    res.event("[DONE]");
    return;
  }
  json::Array parts;
  for (size_t c = 0; c < choices.size(); ++c)
    parts.push_back(part(c, choices[c].text, choices[c].finish, false));
  json::Object body = envelope(std::move(parts));
  body["usage"] = std::move(usage);
  res.send(200, "application/json", dump(std::move(body)));
}

/// A prompt field: text (read with the tokenizer) or token ids, one or a list.
bool readPrompts(Server &s, const json::Value *p, Ask &ask, HttpResponse &res) {
  auto ids = [](const json::Array &a, std::vector<int64_t> &out) {
    for (const json::Value &x : a) {
      auto i = x.getAsInteger();
      if (!i)
        return false;
      out.push_back(*i);
    }
    return true;
  };
  auto text = [&](llvm::StringRef t) {
    if (!s.tokenizer) {
      error(res, 400, "this server reads prompts as token ids only (start ds-serve with "
                      "--tokenizer tokenizer.json for text)",
            "prompt");
      return false;
    }
    ask.prompts.push_back(s.tokenizer->encode(t.str()));
    return true;
  };
  if (!p) {
    error(res, 400, "'prompt' is required", "prompt");
    return false;
  }
  if (auto t = p->getAsString())
    return text(*t);
  const json::Array *a = p->getAsArray();
  if (a && !a->empty() && (*a)[0].getAsInteger()) {
    ask.prompts.emplace_back();
    if (ids(*a, ask.prompts.back()))
      return true;
  } else if (a && !a->empty()) {
    for (const json::Value &x : *a) {
      if (auto t = x.getAsString()) {
        if (!text(*t))
          return false;
        continue;
      }
      ask.prompts.emplace_back();
      if (!x.getAsArray() || !ids(*x.getAsArray(), ask.prompts.back()))
        break;
    }
    if (ask.prompts.size() == a->size())
      return true;
  }
  error(res, 400, "'prompt' must be a string, an array of token ids, or an array of either",
        "prompt");
  return false;
}

void completions(Server &s, const json::Object &o, HttpResponse &res) {
  Ask ask;
  if (!readSampling(s, o, ask, res, "max_tokens") || !readPrompts(s, o.get("prompt"), ask, res))
    return;
  complete(s, ask, res, false);
}

void chatCompletions(Server &s, const json::Object &o, HttpResponse &res) {
  if (!s.chat || !s.tokenizer)
    return error(res, 400, "this server has no chat template (start ds-serve with --tokenizer "
                           "tokenizer.json, with the model's tokenizer_config.json beside it)");
  const json::Array *msgs = o.getArray("messages");
  if (!msgs || msgs->empty())
    return error(res, 400, "'messages' must be a non-empty array", "messages");
  std::vector<dstok::ChatMessage> messages;
  for (const json::Value &m : *msgs) {
    const json::Object *mo = m.getAsObject();
    dstok::ChatMessage cm;
    if (mo && mo->getString("role"))
      cm.role = mo->getString("role")->str();
    const json::Value *content = mo ? mo->get("content") : nullptr;
    if (content && content->getAsString()) {
      cm.content = content->getAsString()->str();
    } else if (const json::Array *parts = content ? content->getAsArray() : nullptr) {
      for (const json::Value &p : *parts) // [{"type": "text", "text": ...}]
        if (const json::Object *po = p.getAsObject(); po && po->getString("text"))
          cm.content += po->getString("text")->str();
    } else if (!content || content->kind() != json::Value::Null || cm.role.empty()) {
      return error(res, 400, "each message needs a 'role' and a text 'content'", "messages");
    }
    messages.push_back(std::move(cm));
  }
  Ask ask;
  if (!readSampling(s, o, ask, res, "max_completion_tokens"))
    return;
  std::string prompt, why;
  if (!s.chat->render(messages, true, prompt, why))
    return error(res, 400, "the model's chat template refused the messages: " + why,
                 "messages");
  ask.prompts.push_back(s.tokenizer->encode(prompt, /*addSpecial=*/false));
  complete(s, ask, res, true);
}
} // namespace

void handle(Server &s, const HttpRequest &req, HttpResponse &res) {
  if (req.path == "/health") {
    json::Object h{{"status", "ok"},
                   {"waiting", static_cast<int64_t>(s.scheduler->waiting())},
                   {"running", static_cast<int64_t>(s.scheduler->running())}};
    res.send(200, "application/json", dump(std::move(h)));
    return;
  }
  if (req.path == "/v1/models") {
    json::Object m{{"id", s.model},
                   {"object", "model"},
                   {"created", s.created},
                   {"owned_by", "ds"},
                   {"max_model_len", s.maxSequenceTokens + 1}};
    res.send(200, "application/json",
             dump(json::Object{{"object", "list"}, {"data", json::Array{std::move(m)}}}));
    return;
  }
  bool isCompletion = req.path == "/v1/completions", isChat = req.path == "/v1/chat/completions";
  if (!isCompletion && !isChat)
    return error(res, 404, "no route " + req.path + " (ds-serve answers /v1/completions, "
                           "/v1/chat/completions, /v1/models and /health)");
  if (req.method != "POST")
    return error(res, 405, req.path + " takes POST");
  auto body = json::parse(req.body);
  if (!body || !body->getAsObject()) {
    if (!body)
      llvm::consumeError(body.takeError());
    return error(res, 400, "the request body is not a JSON object");
  }
  if (isCompletion)
    completions(s, *body->getAsObject(), res);
  else
    chatCompletions(s, *body->getAsObject(), res);
}

} // namespace dsserve

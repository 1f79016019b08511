//===- ds-tokenize.cpp - text to token ids and back with a tokenizer.json ----------===//
//
// ds-tokenize tokenizer.json TEXT...          the ids of each TEXT, one line each (as
//                                             --decode and ds-generate --prompt-ids take them)
// ds-tokenize tokenizer.json --decode 1,2,3   the text of the ids
// ds-tokenize tokenizer.json --jsonl < IN     each line of IN a JSON string (encoded) or a
//                                             JSON array of ids (decoded), one JSON line out
//
// ds-tokenize tokenizer.json --chat tokenizer_config.json --jsonl < IN
//                                             each line {"messages": [...],
//                                             "add_generation_prompt": B}: the chat
//                                             template's prompt, as a JSON string
//
// The tokenizer ds-serve and ds-generate --prompt use, on its own: to see what a prompt
// becomes, or to check it against HF's.
//
#include "ds/Tokenizer/ChatTemplate.h"
#include "ds/Tokenizer/Tokenizer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <iostream>

namespace cl = llvm::cl;

static cl::opt<std::string> tokenizerPath(cl::Positional, cl::desc("tokenizer.json"),
                                          cl::Required);
static cl::list<std::string> texts(cl::Positional, cl::desc("TEXT..."));
static cl::opt<std::string> decodeIds("decode", cl::desc("Comma-separated ids to decode"));
static cl::opt<bool> jsonl("jsonl", cl::desc("Read JSON lines from stdin (a string: encode; "
                                             "an array of ids: decode)"));
static cl::opt<bool> noSpecial("no-special", cl::desc("Encode without the post-processor's "
                                                      "special tokens (BOS)"));
static cl::opt<std::string> chatConfig(
    "chat", cl::desc("With --jsonl: render messages with this tokenizer_config.json's chat "
                     "template"));
static cl::opt<bool> skipSpecial("skip-special", cl::desc("Decode without special tokens"));

static int fail(const llvm::Twine &msg) {
  llvm::errs() << "ds-tokenize: " << msg << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "ds-tokenize: token ids of text and text of ids\n");
  std::string err;
  std::unique_ptr<dstok::Tokenizer> tok = dstok::Tokenizer::load(tokenizerPath, err);
  if (!tok)
    return fail(err);
  auto printIds = [](const std::vector<int64_t> &ids) {
    for (size_t k = 0; k < ids.size(); ++k)
      llvm::outs() << (k ? "," : "") << ids[k];
    llvm::outs() << "\n";
  };
  if (!decodeIds.empty()) {
    std::vector<int64_t> ids;
    for (llvm::StringRef s : llvm::split(llvm::StringRef(decodeIds), ',')) {
      int64_t id;
      if (s.trim().getAsInteger(10, id))
        return fail("--decode '" + decodeIds + "': not comma-separated token ids");
      ids.push_back(id);
    }
    llvm::outs() << tok->decode(ids, skipSpecial) << "\n";
    return 0;
  }
  std::unique_ptr<dstok::ChatTemplate> chat;
  if (!chatConfig.empty()) {
    chat = dstok::ChatTemplate::load(chatConfig, err);
    if (!chat)
      return fail(err);
  }
  if (jsonl) {
    std::string line;
    for (size_t n = 1; std::getline(std::cin, line); ++n) {
      auto v = llvm::json::parse(line);
      if (!v)
        return fail("line " + llvm::Twine(n) + " is not JSON: " + llvm::toString(v.takeError()));
      if (const llvm::json::Object *o = chat ? v->getAsObject() : nullptr) {
        std::vector<dstok::ChatMessage> messages;
        if (const llvm::json::Array *ms = o->getArray("messages"))
          for (const llvm::json::Value &m : *ms)
            if (const llvm::json::Object *mo = m.getAsObject())
              messages.push_back({mo->getString("role").value_or("").str(),
                                  mo->getString("content").value_or("").str()});
        std::string prompt;
        if (!chat->render(messages, o->getBoolean("add_generation_prompt").value_or(false),
                          prompt, err))
          prompt = "error: " + err;
        llvm::outs() << llvm::json::Value(prompt) << "\n";
      } else if (auto text = v->getAsString()) {
        llvm::outs() << llvm::json::Value(llvm::json::Array(tok->encode(text->str(),
                                                                         !noSpecial)))
                     << "\n";
      } else if (const llvm::json::Array *a = v->getAsArray()) {
        std::vector<int64_t> ids;
        for (const llvm::json::Value &x : *a)
          ids.push_back(x.getAsInteger().value_or(-1));
        llvm::outs() << llvm::json::Value(tok->decode(ids, skipSpecial)) << "\n";
      } else {
        return fail("line " + llvm::Twine(n) + " is neither a string nor an array of ids");
      }
    }
    return 0;
  }
  if (texts.empty())
    return fail("give TEXT to encode, --decode IDS or --jsonl");
  for (const std::string &t : texts)
    printIds(tok->encode(t, !noSpecial));
  return 0;
}

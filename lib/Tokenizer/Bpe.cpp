//===- Bpe.cpp - tokenizer.json's BPE model ------------------------------------===//
#include "Bpe.h"

#include "Unicode.h"

#include <cstdio>

namespace dstok {

bool Bpe::read(const llvm::json::Object &model, std::string &err) {
  auto type = model.getString("type");
  if (!type || *type != "BPE") {
    err = "the model is " + (type ? type->str() : std::string("untyped")) +
          "; only BPE models are supported";
    return false;
  }
  for (const char *key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (auto s = model.getString(key); s && !s->empty()) {
      err = std::string("the BPE model's ") + key + " is not supported";
      return false;
    }
  if (auto d = model.get("dropout"); d && d->kind() != llvm::json::Value::Null) {
    err = "the BPE model's dropout is not supported (it draws at random)";
    return false;
  }
  const llvm::json::Object *vocab = model.getObject("vocab");
  const llvm::json::Array *merges = model.getArray("merges");
  if (!vocab || !merges) {
    err = "the BPE model lacks its vocab or merges";
    return false;
  }
  for (const auto &[token, v] : *vocab) {
    auto id = v.getAsInteger();
    if (!id || *id < 0 || *id > (1 << 30)) {
      err = "vocabulary entry '" + token.str() + "' has no valid id";
      return false;
    }
    vocab_[token.str()] = *id;
    if (*id >= static_cast<int64_t>(tokens_.size()))
      tokens_.resize(*id + 1);
    tokens_[*id] = token.str();
  }
  int64_t rank = 0;
  for (const llvm::json::Value &m : *merges) {
    std::string a, b;
    if (auto s = m.getAsString()) { // "a b"
      size_t space = s->find(' ', 1);
      if (space == llvm::StringRef::npos) {
        err = "merge '" + s->str() + "' is not two tokens";
        return false;
      }
      a = s->substr(0, space).str();
      b = s->substr(space + 1).str();
    } else if (auto *pair = m.getAsArray(); pair && pair->size() == 2 &&
                                             (*pair)[0].getAsString() &&
                                             (*pair)[1].getAsString()) {
      a = (*pair)[0].getAsString()->str();
      b = (*pair)[1].getAsString()->str();
    } else {
      err = "merge " + std::to_string(rank) + " is not two tokens";
      return false;
    }
    int64_t ia = id(a), ib = id(b), merged = id(a + b);
    if (ia < 0 || ib < 0 || merged < 0) {
      err = "merge '" + a + " " + b + "' names a token the vocabulary lacks";
      return false;
    }
    merges_.emplace((static_cast<uint64_t>(ia) << 32) | static_cast<uint64_t>(ib),
                    std::make_pair(rank++, merged));
  }
  if (auto u = model.getString("unk_token"))
    unk_ = id(u->str());
  byteFallback_ = model.getBoolean("byte_fallback").value_or(false);
  fuseUnk_ = model.getBoolean("fuse_unk").value_or(false);
  ignoreMerges_ = model.getBoolean("ignore_merges").value_or(false);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    byteIds_[b] = id(name);
  }
  return true;
}

void Bpe::encode(const std::string &word, std::vector<int64_t> &out) const {
  {
    std::lock_guard<std::mutex> lock(cacheLock_);
    if (auto it = cache_.find(word); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int64_t> symbols;
  if (int64_t whole = ignoreMerges_ ? id(word) : -1; whole >= 0) {
    symbols.push_back(whole);
  } else {
    bool lastUnk = false;
    for (size_t i = 0; i < word.size();) {
      size_t n = std::min(utf8Length(static_cast<unsigned char>(word[i])), word.size() - i);
      std::string ch = word.substr(i, n);
      i += n;
      if (int64_t c = id(ch); c >= 0) {
        symbols.push_back(c);
        lastUnk = false;
        continue;
      }
      bool bytes = byteFallback_;
      for (unsigned char b : ch)
        bytes = bytes && byteIds_[b] >= 0;
      if (bytes) {
        for (unsigned char b : ch)
          symbols.push_back(byteIds_[b]);
        lastUnk = false;
      } else if (unk_ >= 0 && !(fuseUnk_ && lastUnk)) {
        symbols.push_back(unk_);
        lastUnk = true;
      }
    }
    // Lowest rank first, leftmost among equals, until no pair merges.
    while (symbols.size() > 1) {
      int64_t best = -1, bestRank = INT64_MAX, merged = -1;
      for (size_t k = 0; k + 1 < symbols.size(); ++k) {
        auto it = merges_.find((static_cast<uint64_t>(symbols[k]) << 32) |
                               static_cast<uint64_t>(symbols[k + 1]));
        if (it != merges_.end() && it->second.first < bestRank) {
          bestRank = it->second.first;
          best = static_cast<int64_t>(k);
          merged = it->second.second;
        }
      }
      if (best < 0)
        break;
      symbols[best] = merged;
      symbols.erase(symbols.begin() + best + 1);
    }
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
  std::lock_guard<std::mutex> lock(cacheLock_);
  if (cache_.size() < 100000)
    cache_.emplace(word, std::move(symbols));
}

} // namespace dstok

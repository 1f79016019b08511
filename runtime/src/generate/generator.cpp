//===- generator.cpp - continuous batching over @prefill and @decode ------------===//
#include "generator.h"

#include "../driver/weights.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace dsrt::generate {

using io::Json;

int32_t CallSpec::indexOf(const std::string &name) const {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name)
      return static_cast<int32_t>(i);
  return -1;
}

namespace {
const char *const kWeightsFix =
    " (ds-opt --inference writes GEN.mlir and its weights GEN.safetensors together)";

/// The inputs every derived program takes (ds-derive-generation's), by name.
const char *const kInputs[] = {"input_ids", "position_ids", "slots",  "pages",
                               "context_lens", "q_lens",   "temperature", "top_k",
                               "top_p",     "seeds",        "steps"};

bool readCall(const Json &c, CallSpec &out, std::string &err) {
  const Json *ins = c.get("inputs");
  if (!ins || !ins->isArray()) {
    err = "a generation program lacks its \"inputs\"";
    return false;
  }
  for (const Json &in : ins->items) {
    const Json *n = in.get("name"), *dt = in.get("dtype"), *d = in.get("dims");
    if (!n || !n->isString() || !dt || !dt->isString() || !d || !d->isArray()) {
      err = "a generation program's input lacks name, dtype or dims";
      return false;
    }
    std::vector<int64_t> dims;
    for (const Json &x : d->items) {
      int64_t v = 0;
      if (!x.asInt(1, INT64_MAX, v)) {
        err = "input '" + n->text + "' has a bad dimension";
        return false;
      }
      dims.push_back(v);
    }
    out.names.push_back(n->text);
    out.dims.push_back(std::move(dims));
    out.dtypes.push_back(io::dtypeFromName(dt->text));
  }
  for (const char *name : kInputs)
    if (out.indexOf(name) < 0) {
      err = "a generation program lacks the input '" + std::string(name) + "'";
      return false;
    }
  return true;
}

int64_t numel(const std::vector<int64_t> &dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}
} // namespace

Generator::~Generator() {
  if (ctx_)
    dsrt_context_destroy(ctx_);
}

bool Generator::open(const dsrt_generation_program &program, const std::string &weights,
                     int32_t threads, std::string &err) {
  if (!driver::readProgram(program.metadata, spec_, err))
    return false;
  const Json *gen = spec_.meta.get("generation");
  if (!gen || !gen->isArray()) {
    err = "the program is not a generation program (make one with ds-opt MODEL --inference "
          "--config F -o GEN.mlir)";
    return false;
  }
  for (const Json &c : gen->items) {
    const Json *name = c.get("name");
    CallSpec *into = !name || !name->isString() ? nullptr
                     : name->text == "prefill"  ? &prefill_
                     : name->text == "decode"   ? &decode_
                                                : nullptr;
    if (into && !readCall(c, *into, err)) {
      err = "the program's metadata is malformed: " + err + "; recompile it";
      return false;
    }
    const Json *res = c.get("results");
    if (res && res->isArray() && res->items.size() == 2)
      if (const Json *d = res->items[1].get("dims"); d && d->isArray() && d->items.size() == 2)
        d->items[1].asInt(1, INT64_MAX, vocab_);
  }
  prefill_.fn = program.prefill;
  decode_.fn = program.decode;
  if (prefill_.names.empty() || decode_.names.empty() || !prefill_.fn || !decode_.fn) {
    err = "the module lacks @prefill or @decode (ds-opt MODEL --inference --config F -o "
          "GEN.mlir makes both)";
    return false;
  }
  const std::vector<int64_t> &ids = prefill_.dims[prefill_.indexOf("input_ids")];
  const std::vector<int64_t> &pages = prefill_.dims[prefill_.indexOf("pages")];
  rows_ = ids[0];
  chunk_ = ids.size() == 2 ? ids[1] : 0;
  maxPages_ = pages.size() == 2 ? pages[1] : 0;
  int64_t cachePages = 0;
  for (const driver::SlotSpec &s : spec_.slots)
    if (s.role == DSRT_ROLE_KV_CACHE && s.dims.size() == 4) {
      cachePages = s.dims[0];
      pageSize_ = s.dims[2];
    }
  if (!rows_ || !chunk_ || !maxPages_ || !cachePages || !pageSize_ || !vocab_ ||
      decode_.dims[decode_.indexOf("input_ids")][0] != rows_) {
    err = "the program's metadata is malformed: the generation programs' batch, chunk, pages "
          "or vocabulary is missing; recompile it";
    return false;
  }
  char why[512] = {0};
  ctx_ = dsrt_context_create_on("", 0, threads, 0, why, sizeof why);
  if (!ctx_) {
    err = why;
    return false;
  }
  if (FILE *f = std::fopen(weights.c_str(), "rb")) {
    std::fclose(f);
  } else {
    err = "cannot open the weights '" + weights + "': " + std::strerror(errno) + kWeightsFix;
    return false;
  }
  group_.join(ctx_, spec_.meshAxes, spec_.meshShape, 600.0);
  program.init_slots(ctx_);
  if (!driver::loadWeights(spec_, group_, weights, err)) {
    err += kWeightsFix;
    return false;
  }
  seqs_.resize(rows_);
  for (int64_t p = cachePages; p-- > 0;)
    freePages_.push_back(p); // handed out from page 0 up
  return true;
}

int64_t Generator::add(const int64_t *prompt, int64_t n, int64_t maxNew,
                       const dsrt_sampling &s, bool &retry, std::string &err) {
  retry = false;
  if (n < 1 || maxNew < 1) {
    err = "a sequence needs at least one prompt token and one new token";
    return -1;
  }
  for (int64_t i = 0; i < n; ++i)
    if (prompt[i] < 0 || prompt[i] >= vocab_) {
      err = "token id " + std::to_string(prompt[i]) + " is outside the vocabulary (0 to " +
            std::to_string(vocab_ - 1) + ")";
      return -1;
    }
  // The last new token is returned, never cached.
  const int64_t cached = n + maxNew - 1;
  if (cached > maxSequenceTokens()) {
    err = std::to_string(n) + " prompt tokens and " + std::to_string(maxNew) +
          " new tokens need " + std::to_string(cached) + " cache positions but a sequence "
          "holds at most " + std::to_string(maxSequenceTokens()) +
          " (ds-opt --inference's max_tokens)";
    return -1;
  }
  retry = true;
  auto row = std::find_if(seqs_.begin(), seqs_.end(), [](auto &q) { return !q.has_value(); });
  if (row == seqs_.end()) {
    err = "every one of the " + std::to_string(rows_) + " rows is running a sequence "
          "(ds-opt --inference's max_batch)";
    return -1;
  }
  const int64_t need = (cached + pageSize_ - 1) / pageSize_;
  if (need > static_cast<int64_t>(freePages_.size())) {
    err = "the cache is full: " + std::to_string(need * pageSize_) + " positions needed, " +
          std::to_string(freeTokens()) + " free (ds-opt --inference's max_tokens)";
    return -1;
  }
  Sequence q;
  q.id = nextId_++;
  q.tokens.assign(prompt, prompt + n);
  q.prompt = n;
  q.maxNew = maxNew;
  q.sampling = s;
  for (int64_t k = 0; k < need; ++k) {
    q.pages.push_back(freePages_.back());
    freePages_.pop_back();
  }
  *row = std::move(q);
  return (*row)->id;
}

void Generator::release(int64_t row) {
  for (auto p = seqs_[row]->pages.rbegin(); p != seqs_[row]->pages.rend(); ++p)
    freePages_.push_back(*p);
  seqs_[row].reset();
}

void Generator::cancel(int64_t id) {
  for (int64_t b = 0; b < rows_; ++b)
    if (seqs_[b] && seqs_[b]->id == id)
      release(b);
}

void Generator::prepare(const CallSpec &call, std::vector<std::vector<int64_t>> &i64,
                        std::vector<std::vector<float>> &f32) const {
  i64.assign(call.names.size(), {});
  f32.assign(call.names.size(), {});
  for (size_t k = 0; k < call.names.size(); ++k) {
    if (call.dtypes[k] == DSRT_F32) // an empty row is greedy over every token
      f32[k].assign(numel(call.dims[k]), call.names[k] == "top_p" ? 1.f : 0.f);
    else
      i64[k].assign(numel(call.dims[k]), call.names[k] == "slots" ? -1 : 0);
  }
  auto &pages = i64[call.indexOf("pages")];
  for (int64_t b = 0; b < rows_; ++b) {
    if (!seqs_[b])
      continue;
    const Sequence &q = *seqs_[b];
    std::copy(q.pages.begin(), q.pages.end(), pages.begin() + b * maxPages_);
    f32[call.indexOf("temperature")][b] = q.sampling.temperature;
    f32[call.indexOf("top_p")][b] = q.sampling.top_p;
    i64[call.indexOf("top_k")][b] = q.sampling.top_k;
    i64[call.indexOf("seeds")][b] = q.sampling.seed;
    i64[call.indexOf("steps")][b] = q.produced;
  }
}

void Generator::run(const CallSpec &call, std::vector<std::vector<int64_t>> &i64,
                    std::vector<std::vector<float>> &f32) {
  std::vector<dsrt_tensor *> args;
  for (size_t k = 0; k < call.names.size(); ++k) {
    const std::vector<int64_t> &d = call.dims[k];
    bool isF32 = call.dtypes[k] == DSRT_F32;
    void *data = isF32 ? static_cast<void *>(f32[k].data()) : static_cast<void *>(i64[k].data());
    args.push_back(dsrt_tensor_host(ctx_, isF32 ? DSRT_F32 : DSRT_I64,
                                    static_cast<int32_t>(d.size()), d.data(), data));
  }
  dsrt_tensor *results[2] = {nullptr, nullptr};
  call.fn(ctx_, args.data(), results);
  outTokens_.resize(rows_);
  outLogits_.resize(rows_ * vocab_);
  dsrt_tensor_to_host(ctx_, outTokens_.data(), results[0]);
  dsrt_tensor_to_host(ctx_, outLogits_.data(), results[1]);
  for (dsrt_tensor *t : results)
    dsrt_tensor_free(ctx_, t);
  for (dsrt_tensor *t : args)
    dsrt_tensor_free(ctx_, t);
}

int64_t Generator::step(int64_t *ids, int64_t *tokens, int32_t *last, float *logits) {
  bool prefilling = false, any = false;
  for (const auto &q : seqs_) {
    any |= q.has_value();
    prefilling |= q && q->cached < q->prompt;
  }
  if (!any)
    return 0;
  const CallSpec &call = prefilling ? prefill_ : decode_;
  const int64_t T = prefilling ? chunk_ : 1;
  std::vector<std::vector<int64_t>> i64;
  std::vector<std::vector<float>> f32;
  prepare(call, i64, f32);
  auto &inputIds = i64[call.indexOf("input_ids")], &positions = i64[call.indexOf("position_ids")];
  auto &slots = i64[call.indexOf("slots")], &contextLens = i64[call.indexOf("context_lens")];
  auto &qLens = i64[call.indexOf("q_lens")];
  std::vector<int64_t> emits; // the rows whose token this call draws
  for (int64_t b = 0; b < rows_; ++b) {
    if (!seqs_[b])
      continue;
    Sequence &q = *seqs_[b];
    // A prefill call runs the sequences with prompt tokens left; a decoding step the rest.
    int64_t left = static_cast<int64_t>(q.tokens.size()) - q.cached;
    if (prefilling != (q.cached < q.prompt))
      continue;
    const int64_t count = std::min(T, left);
    for (int64_t t = 0; t < count; ++t) {
      const int64_t pos = q.cached + t;
      inputIds[b * T + t] = q.tokens[pos];
      positions[b * T + t] = pos;
      slots[b * T + t] = slotOf(q, pos);
    }
    q.cached += count;
    contextLens[b] = q.cached;
    qLens[b] = count;
    if (q.cached == static_cast<int64_t>(q.tokens.size()))
      emits.push_back(b);
  }
  run(call, i64, f32);
  int64_t n = 0;
  for (int64_t b : emits) {
    Sequence &q = *seqs_[b];
    ids[n] = q.id;
    tokens[n] = outTokens_[b];
    if (logits)
      std::memcpy(logits + n * vocab_, outLogits_.data() + b * vocab_, vocab_ * sizeof(float));
    q.tokens.push_back(outTokens_[b]);
    last[n] = ++q.produced == q.maxNew;
    if (last[n])
      release(b);
    ++n;
  }
  return n;
}

} // namespace dsrt::generate

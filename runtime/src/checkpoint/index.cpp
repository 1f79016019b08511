//===- index.cpp - the index of a sharded checkpoint ---------------------------===//
#include "index.h"

#include <algorithm>
#include <cstdio>

namespace dsrt::ckpt {

using io::Json;
using io::jsonQuote;

std::string rankFileName(int64_t rank, int64_t world) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "rank-%05lld-of-%05lld.safetensors", static_cast<long long>(rank),
                static_cast<long long>(world));
  return buf;
}

void partOf(int64_t total, int64_t world, int64_t rank, int64_t &begin, int64_t &end) {
  int64_t part = world > 0 ? (total + world - 1) / world : total;
  begin = std::min(total, part * rank);
  end = std::min(total, begin + part);
}

bool validSplit(const Split &s, int64_t n, std::string &why) {
  int64_t sum = 0;
  for (int64_t z : s.sizes) {
    if (z <= 0 || z % s.parts != 0) {
      why = "a segment of " + std::to_string(z) + " rows is not a multiple of the parts";
      return false;
    }
    sum += z;
  }
  if (!s.sizes.empty() &&
      (static_cast<int64_t>(s.sizes.size()) != s.segments || sum != n)) {
    why = "its segment sizes do not add up to the dimension's " + std::to_string(n) + " rows";
    return false;
  }
  if (s.sizes.empty() && (n % s.segments != 0 || (n / s.segments) % s.parts != 0)) {
    why = "its dimension must be segments x parts x a block";
    return false;
  }
  return true;
}

detail::SplitShape::SplitShape(const std::vector<int64_t> &dims, const Split &s) {
  for (int64_t d = 0; d < s.dim; ++d)
    outer *= dims[d];
  for (size_t d = s.dim + 1; d < dims.size(); ++d)
    inner *= dims[d];
  n = dims[s.dim];
  parts = s.parts;
  local = n / s.parts;
  for (int64_t k = 0, at = 0; k < s.segments; ++k) {
    int64_t rows = s.sizes.empty() ? n / s.segments : s.sizes[k];
    start.push_back(at);
    size.push_back(rows);
    at += rows;
  }
}

void locate(const std::vector<int64_t> &dims, const Split &s, int64_t global, int64_t &part,
            int64_t &local, int64_t &following) {
  if (s.whole()) {
    int64_t numel = 1;
    for (int64_t d : dims)
      numel *= d;
    part = 0;
    local = global;
    following = numel - global;
    return;
  }
  detail::SplitShape g(dims, s);
  int64_t o = global / (g.n * g.inner), r = global % (g.n * g.inner);
  int64_t d = r / g.inner, i = r % g.inner;
  size_t k = 0;
  while (k + 1 < g.start.size() && g.start[k + 1] <= d)
    ++k;
  int64_t block = g.size[k] / g.parts, within = d - g.start[k];
  part = within / block;
  int64_t b = within % block;
  local = (o * g.local + g.start[k] / g.parts + b) * g.inner + i;
  following = (block - b) * g.inner - i;
}

/// `,"segment_sizes":[...]` for unequal segments, else nothing.
static std::string sizesJson(const std::vector<int64_t> &sizes) {
  if (sizes.empty())
    return "";
  std::string s = ",\"segment_sizes\":[";
  for (size_t k = 0; k < sizes.size(); ++k)
    s += (k ? "," : "") + std::to_string(sizes[k]);
  return s + "]";
}

std::string formatIndex(const Index &x) {
  auto list = [](const std::vector<std::string> &v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i)
      s += (i ? "," : "") + jsonQuote(v[i]);
    return s + "]";
  };
  std::string s = "{\"format\":" + jsonQuote(kFormat) + ",\n\"tag\":" + jsonQuote(x.tag) +
                  ",\"step\":" + std::to_string(x.step) +
                  ",\"samples_consumed\":" + std::to_string(x.samplesConsumed) +
                  ",\"run\":" + jsonQuote(x.run) +
                  ",\"previous\":" + (x.previous.empty() ? "null" : jsonQuote(x.previous)) +
                  ",\n\"world_size\":" + std::to_string(x.worldSize) +
                  (x.mesh.empty() ? std::string() : ",\"mesh\":" + jsonQuote(x.mesh)) +
                  ",\"zero_stage\":" + std::to_string(x.zeroStage) +
                  ",\"precision\":" + jsonQuote(x.precision) + ",\"rng\":" + jsonQuote(x.rng) +
                  ",\n\"config\":" + (x.numericConfig.empty() ? "{}" : x.numericConfig) +
                  ",\n\"files\":" + list(x.files) + ",\n\"tensors\":[";
  for (size_t i = 0; i < x.tensors.size(); ++i) {
    const TensorEntry &t = x.tensors[i];
    s += std::string(i ? ",\n" : "\n") + "{\"name\":" + jsonQuote(t.name) +
         ",\"kind\":" + jsonQuote(t.kind);
    if (!t.of.empty())
      s += ",\"of\":" + jsonQuote(t.of) + ",\"role\":" + jsonQuote(t.role);
    s += ",\"dtype\":" + jsonQuote(io::dtypeName(t.dtype)) + ",\"dims\":[";
    for (size_t k = 0; k < t.dims.size(); ++k)
      s += (k ? "," : "") + std::to_string(t.dims[k]);
    s += "]";
    if (!t.aliases.empty())
      s += ",\"aliases\":" + list(t.aliases);
    if (!t.split.whole())
      s += ",\"split\":{\"dim\":" + std::to_string(t.split.dim) +
           ",\"segments\":" + std::to_string(t.split.segments) +
           ",\"parts\":" + std::to_string(t.split.parts) + sizesJson(t.split.sizes) + "}";
    s += ",\"pieces\":[";
    for (size_t k = 0; k < t.pieces.size(); ++k) {
      const Piece &p = t.pieces[k];
      s += std::string(k ? "," : "") + "[" + std::to_string(p.file) + "," +
           std::to_string(p.start) + "," + std::to_string(p.count);
      if (!t.split.whole())
        s += "," + std::to_string(p.part);
      s += "]";
    }
    s += "]}";
  }
  return s + "\n]}\n";
}

bool parseIndex(const std::string &text, const std::string &what, Index &out, std::string &err) {
  auto bad = [&](const std::string &cause) {
    err = "'" + what + "' is not a usable checkpoint index: " + cause;
    return false;
  };
  Json j;
  std::string e;
  if (!io::parseJson(text, j, e))
    return bad(e);
  if (!j.isObject())
    return bad("not a JSON object");
  const Json *format = j.get("format");
  if (!format || !format->isString())
    return bad("no \"format\"");
  // Format 3 is format 4 without splits.
  if (format->text != kFormat && format->text != "ds-checkpoint-3") {
    err = "'" + what + "' has format " + format->text + "; this ds reads " + kFormat +
          " and ds-checkpoint-3";
    return false;
  }
  auto str = [&](const char *key, std::string &v, bool nullable) {
    const Json *x = j.get(key);
    if (nullable && x && x->kind == Json::Null) {
      v.clear();
      return true;
    }
    if (!x || !x->isString())
      return false;
    v = x->text;
    return true;
  };
  auto integer = [&](const char *key, int64_t lo, int64_t &v) {
    const Json *x = j.get(key);
    return x && x->asInt(lo, INT64_MAX, v);
  };
  Index x;
  if (!str("tag", x.tag, false) || !str("run", x.run, false) ||
      !str("previous", x.previous, true) || !str("precision", x.precision, false) ||
      !str("rng", x.rng, false))
    return bad("tag, run, previous, precision or rng is missing");
  if (!integer("step", 0, x.step) || !integer("samples_consumed", 0, x.samplesConsumed) ||
      !integer("world_size", 1, x.worldSize) || !integer("zero_stage", 0, x.zeroStage))
    return bad("step, samples_consumed, world_size or zero_stage is not a valid integer");
  if (const Json *mesh = j.get("mesh"); mesh && mesh->isString())
    x.mesh = mesh->text;
  const Json *config = j.get("config");
  if (!config || !config->isObject())
    return bad("no \"config\" object");
  x.numericConfig = config->dump();
  const Json *files = j.get("files");
  if (!files || !files->isArray() || files->items.empty())
    return bad("no \"files\" list");
  for (const Json &f : files->items) {
    // A plain file name: never a path out of the checkpoint's directory.
    if (!f.isString() || f.text.empty() || f.text.find('/') != std::string::npos ||
        f.text == "." || f.text == "..")
      return bad("\"files\" holds something that is not a file name");
    x.files.push_back(f.text);
  }
  const Json *tensors = j.get("tensors");
  if (!tensors || !tensors->isArray())
    return bad("no \"tensors\" list");
  for (const Json &tj : tensors->items) {
    TensorEntry t;
    const Json *name = tj.get("name"), *kind = tj.get("kind"), *dtype = tj.get("dtype"),
               *dims = tj.get("dims"), *pieces = tj.get("pieces");
    if (!name || !name->isString() || !kind || !kind->isString() || !dtype ||
        !dtype->isString() || !dims || !dims->isArray() || !pieces || !pieces->isArray())
      return bad("a tensor lacks name, kind, dtype, dims or pieces");
    t.name = name->text;
    t.kind = kind->text;
    if (t.kind != parameterKind() && t.kind != bufferKind() && t.kind != kOptimizerStateKind &&
        t.kind != kLossScalerKind)
      return bad("tensor '" + t.name + "' has unknown kind '" + t.kind + "'");
    if (const Json *of = tj.get("of"); of && of->isString())
      t.of = of->text;
    if (const Json *role = tj.get("role"); role && role->isString())
      t.role = role->text;
    t.dtype = io::dtypeFromName(dtype->text);
    if (t.dtype < 0 || t.dtype == io::kU8)
      return bad("tensor '" + t.name + "' has unknown dtype '" + dtype->text + "'");
    for (const Json &d : dims->items) {
      int64_t v;
      if (!d.asInt(0, INT64_MAX, v))
        return bad("tensor '" + t.name + "' has a dimension that is not a size");
      t.dims.push_back(v);
    }
    int64_t bytes = 0;
    if (t.dims.size() > 8 || !io::checkedNumel(t.dims, t.numel) ||
        !io::checkedBytes(t.numel, t.dtype, bytes))
      return bad("tensor '" + t.name + "' is too large");
    if (const Json *al = tj.get("aliases"); al && al->isArray())
      for (const Json &a : al->items)
        if (a.isString())
          t.aliases.push_back(a.text);
    if (const Json *sp = tj.get("split")) {
      const Json *d = sp->get("dim"), *sg = sp->get("segments"), *pa = sp->get("parts");
      Split &s = t.split;
      if (!d || !d->asInt(0, static_cast<int64_t>(t.dims.size()) - 1, s.dim) || !sg ||
          !sg->asInt(1, 1 << 20, s.segments) || !pa || !pa->asInt(2, 1 << 20, s.parts))
        return bad("tensor '" + t.name + "' has a malformed \"split\"");
      if (const Json *sz = sp->get("segment_sizes")) {
        for (const Json &z : sz->isArray() ? sz->items : std::vector<Json>{}) {
          int64_t v = 0;
          if (!z.asInt(1, INT64_MAX, v))
            return bad("tensor '" + t.name + "' has a segment size that is not a size");
          s.sizes.push_back(v);
        }
        if (s.sizes.empty())
          return bad("tensor '" + t.name + "' has a malformed \"segment_sizes\"");
      }
      std::string why;
      if (!validSplit(s, t.dims[s.dim], why))
        return bad("tensor '" + t.name + "' has a malformed \"split\" (" + why + ")");
    }
    const int64_t partNumel = t.partNumel(), arity = t.split.whole() ? 3 : 4;
    for (const Json &p : pieces->items) {
      Piece piece;
      int64_t file = 0;
      if (!p.isArray() || static_cast<int64_t>(p.items.size()) != arity ||
          !p.items[0].asInt(0, static_cast<int64_t>(x.files.size()) - 1, file) ||
          !p.items[1].asInt(0, partNumel, piece.start) ||
          !p.items[2].asInt(0, partNumel - piece.start, piece.count) ||
          (arity == 4 && !p.items[3].asInt(0, t.split.parts - 1, piece.part)))
        return bad("tensor '" + t.name + "' has a piece outside it or in no listed file");
      piece.file = static_cast<int32_t>(file);
      if (piece.count)
        t.pieces.push_back(piece);
    }
    // Exactly once: sorted by part and start, each piece begins where the previous ended.
    std::vector<Piece> sorted = t.pieces;
    std::sort(sorted.begin(), sorted.end(), [](const Piece &a, const Piece &b) {
      return a.part != b.part ? a.part < b.part : a.start < b.start;
    });
    int64_t part = 0, at = 0;
    std::string where;
    auto partName = [&](int64_t q) {
      return t.split.whole() ? std::string() : " (part " + std::to_string(q) + ")";
    };
    for (const Piece &p : sorted) {
      if (p.part != part) {
        if (at != partNumel)
          return bad("the pieces of tensor '" + t.name + "'" + partName(part) +
                     " end at element " + std::to_string(at) + " of " +
                     std::to_string(partNumel));
        if (p.part != part + 1)
          return bad("tensor '" + t.name + "' has no pieces of part " +
                     std::to_string(part + 1));
        part = p.part;
        at = 0;
      }
      if (p.start != at)
        return bad("the pieces of tensor '" + t.name + "'" + partName(part) +
                   " overlap or leave a gap at element " + std::to_string(std::min(at, p.start)));
      at += p.count;
    }
    if (at != partNumel || part != t.split.parts - 1)
      return bad("the pieces of tensor '" + t.name + "'" + partName(part) + " end at element " +
                 std::to_string(at) + " of " + std::to_string(partNumel) +
                 (part != t.split.parts - 1 ? " and later parts have none" : ""));
    x.tensors.push_back(std::move(t));
  }
  out = std::move(x);
  return true;
}

} // namespace dsrt::ckpt

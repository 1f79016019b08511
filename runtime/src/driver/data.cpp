//===- data.cpp - the training data and each rank's micro-batches ---------------===//
#include "data.h"

#include "../core/internal.h"

#include <algorithm>
#include <cstring>

namespace dsrt::driver {

using io::Array;

bool DataFeed::load(const Options &opt, const ProgramSpec &p, std::string &err) {
  p_ = &p;
  seqLen_ = opt.seqLen;
  const std::vector<InputSpec> &inputs = p.inputs;
  const int64_t G = p.G, mb = p.mb;
  std::vector<io::Array> &data = arrays_;
  io::TokenFile &tokens = tokens_;
  for (const auto &d : opt.data)
    if (std::none_of(inputs.begin(), inputs.end(),
                     [&](const InputSpec &in) { return in.name == d.first; })) {
      std::string names;
      for (const InputSpec &in : inputs)
        names += (names.empty() ? "" : ", ") + in.name;
      err = "--data " + d.first + ": the step has no input named '" + d.first +
            "' (its inputs: " + names + ")";
      return false;
    }
  data.resize(inputs.size());
  int64_t fit = INT64_MAX;
  std::string fitName;
  size_t tokenInputs = 0;
  if (!opt.tokens.empty()) {
    if (opt.seqLen <= 0) {
      err = "--tokens needs --seq-len T (the length of each sample)";
      return false;
    }
    if (inputs.size() < 2) {
      err = "--tokens feeds a step's first two inputs (tokens and targets); this step has " +
            std::to_string(inputs.size());
      return false;
    }
    for (size_t i = 0; i < 2; ++i) {
      const InputSpec &in = inputs[i];
      if ((in.dtype != DSRT_I64 && in.dtype != DSRT_I32) || in.dims.size() != 2 ||
          in.dims[1] != opt.seqLen) {
        err = "--tokens with --seq-len " + std::to_string(opt.seqLen) + ": input '" + in.name +
              "' must be [" + std::to_string(mb) + ", " + std::to_string(opt.seqLen) +
              "] i64 or i32, but the step has " + io::formatDims(in.dims) + " " +
              io::dtypeName(in.dtype) + " (match --seq-len to the --input types)";
        return false;
      }
      for (const auto &d : opt.data)
        if (d.first == in.name) {
          err = "--data " + in.name + ": input '" + in.name + "' is fed by --tokens";
          return false;
        }
    }
    std::string e;
    if (!tokens.open(opt.tokens, opt.tokenBytes, e)) {
      err = "--tokens: " + e;
      return false;
    }
    int64_t samples = tokens.samples(opt.seqLen);
    fit = io::stepsThatFit(samples, G);
    fitName = "--tokens " + opt.tokens + " has " + std::to_string(tokens.tokens()) +
              " tokens, " + std::to_string(samples) + " samples of " +
              std::to_string(opt.seqLen) + " + 1";
    tokenInputs = 2;
  } else if (opt.seqLen > 0) {
    err = "--seq-len applies to --tokens";
    return false;
  }
  for (size_t i = tokenInputs; i < inputs.size(); ++i) {
    const InputSpec &in = inputs[i];
    std::vector<std::pair<std::string, std::string>> given;
    for (const auto &d : opt.data)
      if (d.first == in.name)
        given.push_back(d);
    std::vector<int64_t> sample(in.dims.begin() + 1, in.dims.end());
    std::string want = "samples of shape " + io::formatDims(sample) + " " +
                       io::dtypeName(in.dtype);
    if (given.empty()) {
      err = "no data for input '" + in.name + "': pass --data " + in.name +
            "=FILE.npy with " + want;
      return false;
    }
    if (given.size() > 1) {
      err = "--data " + in.name + " is given twice";
      return false;
    }
    const std::string &path = given[0].second;
    Array &a = data[i];
    std::string e;
    if (!io::readNpy(path, a, e)) {
      err = "--data " + in.name + ": " + e;
      return false;
    }
    bool dtypeOk = a.dtype == in.dtype || (a.dtype == io::kU8 && in.dtype == DSRT_I1);
    bool shapeOk = a.dims.size() == in.dims.size() &&
                   std::equal(a.dims.begin() + 1, a.dims.end(), in.dims.begin() + 1);
    if (!dtypeOk || !shapeOk) {
      err = "--data " + in.name + "=" + path + ": input '" + in.name + "' expects " + want +
            " (array [N" + (sample.empty() ? "" : ", ") +
            io::formatDims(sample).substr(1) + " " + io::dtypeName(in.dtype) +
            "), found " + a.describe();
      return false;
    }
    if (a.dtype == io::kU8) {
      for (uint8_t &b : a.data)
        b = b != 0;
      a.dtype = DSRT_I1;
    }
    int64_t f = io::stepsThatFit(a.dims[0], G);
    if (f < fit) {
      fit = f;
      fitName = "--data " + in.name + "=" + path + " has " + std::to_string(a.dims[0]) +
                " samples";
    }
  }
  rowBytes_.assign(inputs.size(), 0);
  for (size_t i = 0; i < inputs.size(); ++i) {
    int64_t n = 1;
    for (size_t d = 1; d < inputs[i].dims.size(); ++d)
      n *= inputs[i].dims[d];
    rowBytes_[i] = static_cast<size_t>(n) * io::elementSize(inputs[i].dtype);
  }
  samples_ = INT64_MAX;
  for (size_t i = tokenInputs; i < inputs.size(); ++i)
    samples_ = std::min(samples_, data[i].dims[0]);
  if (tokens.isOpen())
    samples_ = std::min(samples_, tokens.samples(opt.seqLen));
  if (!inputs.empty() && opt.steps > fit) {
    int64_t need = 0;
    err = "not enough data: " + fitName + ", but " + std::to_string(opt.steps) +
          " steps of train_batch_size " + std::to_string(G) + " need " +
          (io::checkedMul(opt.steps, G, need) ? std::to_string(need) : "more than 2^63") +
          "; it fits " + std::to_string(fit) +
          " steps (lower --steps or add samples)";
    return false;
  }
  return true;
}

void DataFeed::fill(dsrt_context *ctx, int64_t step, int32_t rank, int64_t k,
                    const std::vector<dsrt_tensor *> &ts) const {
  const ProgramSpec &p = *p_;
  int64_t first = io::sampleOffset(step, rank, k, p.G, p.mb, p.gas);
  if (first < 0 || first + p.mb > samples_) // load() checked the steps against the data
    fail("data", "step %lld rank %d micro-batch %lld reads samples [%lld, %lld) of %lld (a bug "
         "in the data order)", (long long)step, rank, (long long)k, (long long)first,
         (long long)(first + p.mb), (long long)samples_);
  // Each input is assembled on the host, then copied to the device in one explicit copy.
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    if (tokens_.isOpen() && i < 2) {
      staging_.resize(p.mb * rowBytes_[i]);
      for (int64_t r = 0; r < p.mb; ++r)
        tokens_.window(first + r, seqLen_, /*shift=*/static_cast<int64_t>(i), p.inputs[i].dtype,
                       staging_.data() + r * rowBytes_[i]);
      dsrt_tensor_from_host(ctx, ts[i], staging_.data());
      continue;
    }
    dsrt_tensor_from_host(ctx, ts[i], arrays_[i].data.data() + first * rowBytes_[i]);
  }
}

} // namespace dsrt::driver

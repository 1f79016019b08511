//===- group.cpp - the driver's rank group and its agreement points -----------===//
#include "group.h"

#include <cstdio>
#include <cstring>

namespace dsrt::driver {

void Group::join(dsrt_context *ctx, const std::vector<dsrt_mesh_axis> &axes,
                 const std::vector<int64_t> &shape, double timeoutSeconds) {
  ctx_ = ctx;
  axes_ = axes;
  shape_ = shape;
  std::vector<const char *> names;
  for (dsrt_mesh_axis a : axes)
    names.push_back(dsrt_mesh_axis_name(a));
  dsrt_comm_init_mesh(ctx, static_cast<int32_t>(shape.size()), shape.data(), names.data());
  dsrt_comm_set_timeout(ctx, timeoutSeconds);
  rank_ = dsrt_comm_rank(ctx);
  size_ = dsrt_comm_size(ctx);
  dpSize_ = sizeOn(DSRT_AXIS_DP) * sizeOn(DSRT_AXIS_EP);
}

int32_t Group::coordinate(int32_t q, size_t axis) const {
  int64_t r = q;
  for (size_t i = shape_.size(); i-- > axis + 1;)
    r /= shape_[i];
  return static_cast<int32_t>(r % shape_[axis]);
}

int32_t Group::dpIndexOf(int32_t q) const {
  return indexOf(q, DSRT_AXIS_DP) * sizeOn(DSRT_AXIS_EP) + indexOf(q, DSRT_AXIS_EP);
}

int32_t Group::indexOf(int32_t q, dsrt_mesh_axis axis) const {
  for (size_t i = 0; i < axes_.size(); ++i)
    if (axes_[i] == axis)
      return coordinate(q, i);
  return 0;
}

int32_t Group::sizeOn(dsrt_mesh_axis axis) const {
  for (size_t i = 0; i < axes_.size(); ++i)
    if (axes_[i] == axis)
      return static_cast<int32_t>(shape_[i]);
  return 1;
}

int32_t Group::groupOf(dsrt_mesh_axis axis) const {
  for (size_t i = 0; i < axes_.size(); ++i)
    if (axes_[i] == axis)
      return 1 << i;
  return 0;
}

int32_t Group::indexWithin(int32_t q, int32_t mask) const {
  int32_t index = 0;
  for (size_t i = 0; i < axes_.size(); ++i)
    if ((mask >> i) & 1)
      index = index * static_cast<int32_t>(shape_[i]) + coordinate(q, i);
  return index;
}

std::string Group::meshString() const {
  std::string s;
  for (size_t i = 0; i < axes_.size(); ++i)
    s += (i ? " x " : "") + std::string(dsrt_mesh_axis_name(axes_[i])) + "=" +
         std::to_string(shape_[i]);
  return s;
}

int32_t Group::sizeWithin(int32_t mask) const {
  int32_t n = 1;
  for (size_t i = 0; i < axes_.size(); ++i)
    if ((mask >> i) & 1)
      n *= static_cast<int32_t>(shape_[i]);
  return n;
}

bool Group::leadsItsSamples(int32_t q) const {
  for (size_t i = 0; i < axes_.size(); ++i) {
    int32_t c = coordinate(q, i);
    switch (axes_[i]) {
    case DSRT_AXIS_PP: // the last pipeline stage computes the loss
      if (c != shape_[i] - 1)
        return false;
      break;
    case DSRT_AXIS_DP: // the ranks that read other samples
    case DSRT_AXIS_EP:
      break;
    case DSRT_AXIS_TP:
    case DSRT_AXIS_SP:
      if (c != 0)
        return false;
      break;
    }
  }
  return true;
}

bool Group::leadsStage(int32_t q) const {
  for (size_t i = 0; i < axes_.size(); ++i)
    switch (axes_[i]) {
    case DSRT_AXIS_PP:
      break;
    case DSRT_AXIS_DP:
    case DSRT_AXIS_EP:
    case DSRT_AXIS_TP:
    case DSRT_AXIS_SP:
      if (coordinate(q, i) != 0)
        return false;
      break;
    }
  return true;
}

std::vector<char> Group::gather(const void *mine, int64_t n) const {
  std::vector<char> in(static_cast<const char *>(mine), static_cast<const char *>(mine) + n);
  std::vector<char> out(static_cast<size_t>(n) * size_);
  int64_t inDims = n, outDims = n * size_;
  dsrt_tensor *a = dsrt_tensor_host(ctx_, DSRT_I1, 1, &inDims, in.data());
  dsrt_tensor *b = dsrt_tensor_host(ctx_, DSRT_I1, 1, &outDims, out.data());
  dsrt_event_release(dsrt_all_gather(ctx_, DSRT_GROUP_WORLD, b, a));
  dsrt_tensor_free(ctx_, a);
  dsrt_tensor_free(ctx_, b);
  return out;
}

std::string Group::broadcast(const std::string &text) const {
  if (size_ == 1)
    return text;
  int64_t n = static_cast<int64_t>(text.size()), one = 1;
  dsrt_tensor *len = dsrt_tensor_host(ctx_, DSRT_I64, 1, &one, &n);
  dsrt_event_release(dsrt_comm_broadcast(ctx_, DSRT_GROUP_WORLD, len, 0));
  dsrt_tensor_free(ctx_, len);
  std::string out = rank_ == 0 ? text : std::string(static_cast<size_t>(n), '\0');
  dsrt_tensor *t = dsrt_tensor_host(ctx_, DSRT_I1, 1, &n, out.data());
  dsrt_event_release(dsrt_comm_broadcast(ctx_, DSRT_GROUP_WORLD, t, 0));
  dsrt_tensor_free(ctx_, t);
  return out;
}

int32_t Group::agreeOn(const std::string &error, std::string &message) const {
  message = error;
  if (size_ == 1)
    return error.empty() ? -1 : 0;
  std::vector<char> buf(4096, '\0');
  int32_t who =
      dsrt_comm_agree(ctx_, error.empty() ? nullptr : error.c_str(), buf.data(), buf.size());
  message = buf.data();
  return who;
}

bool Group::agree(const std::string &tool, const std::string &error) const {
  std::string message;
  int32_t who = agreeOn(error, message);
  if (who < 0)
    return true;
  report(tool, who, message);
  return false;
}

void Group::report(const std::string &tool, int32_t who, const std::string &message) const {
  lastError_ = who == rank_ ? message : "rank " + std::to_string(who) + " failed: " + message;
  if (quiet_)
    return;
  if (who == rank_)
    std::fprintf(stderr, "%s: error: %s\n", tool.c_str(), message.c_str());
  else
    std::fprintf(stderr, "%s: rank %d: stopping because rank %d failed: %s\n", tool.c_str(),
                 rank_, who, message.c_str());
  std::fflush(stderr);
}

} // namespace dsrt::driver

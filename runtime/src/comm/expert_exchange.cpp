//===- expert_exchange.cpp - expert parallelism's token dispatch and combine ---===//
//
// The rows that a mixture of experts routes (a token once per chosen expert) travel to the
// rank that holds their expert and back. The counts are known only at run time: the route
// exchanges them first (one all-to-all of 64-bit counts), then the experts' ids, and writes
// the plan that dispatch and combine follow (dsrt.h). Everything runs on the group's
// communication thread, in the order issued, so a route's plan is complete before the
// dispatch or combine queued after it reads it.
//
#include "queue.h"

#include "../core/internal.h"

#include <cstring>
#include <vector>

using namespace dsrt;

namespace {

/// The plan's three parts, read on the communication thread.
struct Plan {
  const int64_t *place; ///< [N]: each row's place in the send order, -1: not sent
  const int64_t *sent;  ///< [size]: rows sent to each rank
  const int64_t *recv;  ///< [size]: rows received from each rank
  Plan(const int64_t *plan, int64_t rows, int size) {
    place = plan;
    sent = place + rows;
    recv = sent + size;
  }
  static int64_t total(const int64_t *counts, int size) {
    int64_t n = 0;
    for (int q = 0; q < size; ++q)
      n += counts[q];
    return n;
  }
  static std::vector<int64_t> bytes(const int64_t *counts, int size, int64_t rowBytes) {
    std::vector<int64_t> b(counts, counts + size);
    for (int64_t &x : b)
      x *= rowBytes;
    return b;
  }
};

/// The rows a plan routes (its length less the two counts), checked against the group.
int64_t planRows(const char *what, const dsrt_tensor *plan, int size) {
  checkDtype(what, plan, DSRT_I64, "plan");
  if (plan->rank != 1 || plan->numel < 2 * size)
    fail(what, "the plan %s is not [rows + 2 x %d] for a group of %d ranks",
         shapeString(plan).c_str(), size, size);
  return plan->numel - 2 * int64_t(size);
}

void checkHostMemory(dsrt_context *ctx, const char *what) {
  if (!ctx->device->hostAddressable())
    fail(what, "expert parallelism's exchange is not built for device %s yet (its counts and "
         "permutations run on the host); run with --device cpu", ctx->device->name());
}

/// Bytes of one row of `t` ([rows, ...]).
int64_t rowBytes(const char *what, const dsrt_tensor *t, int64_t rows, const char *name) {
  if (t->rank < 1 || t->dims[0] != rows)
    fail(what, "%s %s does not have %lld rows", name, shapeString(t).c_str(), (long long)rows);
  return rows ? t->numel / rows * (int64_t)dsrt_dtype_size(t->dtype) : 0;
}

template <class Id> void route(Channel &ch, const CommOp &op, int64_t *plan, Id *localIds,
                               int64_t capacity, const Id *ids, int64_t rows, int64_t experts) {
  const int size = ch.size();
  const int64_t perRank = experts / size;
  std::vector<int64_t> sent(size, 0), recv(size, 0), next(experts + 1, 0);
  auto routed = [&](Id id) { return id >= 0 && id < experts; };
  for (int64_t n = 0; n < rows; ++n)
    if (routed(ids[n]))
      ++next[ids[n] + 1];
  for (int64_t e = 0; e < experts; ++e)
    sent[e / perRank] += next[e + 1];
  ch.allToAll(op, recv.data(), sent.data(), sizeof(int64_t));
  // A stable counting sort by expert (so by owner too): each row's place, and its id as its
  // owner numbers it. A rank receives each sender's rows grouped by expert, which the experts'
  // products take where they lie.
  for (int64_t e = 0; e < experts; ++e)
    next[e + 1] += next[e];
  std::vector<Id> outgoing(next[experts]);
  for (int64_t n = 0; n < rows; ++n) {
    const Id id = ids[n];
    plan[n] = routed(id) ? next[id]++ : -1;
    if (routed(id))
      outgoing[plan[n]] = static_cast<Id>(id % perRank);
  }
  std::memcpy(plan + rows, sent.data(), size * sizeof(int64_t));
  std::memcpy(plan + rows + size, recv.data(), size * sizeof(int64_t));
  const int64_t received = Plan::total(recv.data(), size);
  if (received > capacity)
    fail("expert_route", "this rank received %lld rows, more than its capacity of %lld",
         (long long)received, (long long)capacity);
  ch.allToAllV(op, localIds, Plan::bytes(recv.data(), size, sizeof(Id)), outgoing.data(),
               Plan::bytes(sent.data(), size, sizeof(Id)));
  for (int64_t i = received; i < capacity; ++i)
    localIds[i] = -1;
}

} // namespace

extern "C" dsrt_event *dsrt_expert_route(dsrt_context *ctx, int32_t group, dsrt_tensor *plan,
                                         dsrt_tensor *local_ids, const dsrt_tensor *ids,
                                         int64_t experts) {
  const char *what = "expert_route";
  checkHostMemory(ctx, what);
  const int size = dsrt_group_size(ctx, group);
  if (ids->dtype != DSRT_I64 && ids->dtype != DSRT_I32)
    fail(what, "the ids are %s, not i64 or i32", dtypeName(ids->dtype));
  checkDtype(what, local_ids, ids->dtype, "local ids");
  if (experts <= 0 || experts % size != 0)
    fail(what, "%lld experts do not split evenly over the group's %d ranks",
         (long long)experts, size);
  const int64_t rows = ids->numel;
  if (planRows(what, plan, size) != rows)
    fail(what, "the plan %s does not route the %lld ids", shapeString(plan).c_str(),
         (long long)rows);
  int64_t *p = static_cast<int64_t *>(plan->data);
  void *out = local_ids->data;
  const void *in = ids->data;
  const int64_t capacity = local_ids->numel;
  const bool wide = ids->dtype == DSRT_I64;
  return enqueueOnGroup(
      ctx, group, what, {plan, local_ids, ids},
      std::to_string(rows) + " rows to " + std::to_string(experts) + " experts",
      [=](Channel &ch, const CommOp &op) {
        if (wide)
          route(ch, op, p, static_cast<int64_t *>(out), capacity,
                static_cast<const int64_t *>(in), rows, experts);
        else
          route(ch, op, p, static_cast<int32_t *>(out), capacity,
                static_cast<const int32_t *>(in), rows, experts);
      });
}

extern "C" dsrt_event *dsrt_expert_dispatch(dsrt_context *ctx, int32_t group, dsrt_tensor *recv,
                                            const dsrt_tensor *x, const dsrt_tensor *plan) {
  const char *what = "expert_dispatch";
  checkHostMemory(ctx, what);
  const int size = dsrt_group_size(ctx, group);
  const int64_t rows = planRows(what, plan, size);
  checkDtype(what, recv, x->dtype, "output");
  const int64_t row = rowBytes(what, x, rows, "the input");
  const int64_t capacity = recv->rank >= 1 ? recv->dims[0] : 0;
  if (rowBytes(what, recv, capacity, "the output") != row)
    fail(what, "the output's rows %s are not the input's %s", shapeString(recv).c_str(),
         shapeString(x).c_str());
  char *out = static_cast<char *>(recv->data);
  const char *in = static_cast<const char *>(x->data);
  const int64_t *planData = static_cast<const int64_t *>(plan->data);
  return enqueueOnGroup(
      ctx, group, what, {recv, x, plan}, std::to_string(rows) + " rows of " +
                                             std::to_string(row) + " bytes",
      [=](Channel &ch, const CommOp &op) {
        Plan p(planData, rows, size);
        const int64_t received = Plan::total(p.recv, size);
        if (received > capacity)
          fail(what, "the plan receives %lld rows, more than the output's %lld",
               (long long)received, (long long)capacity);
        std::vector<char> outgoing(Plan::total(p.sent, size) * row);
        for (int64_t n = 0; n < rows; ++n)
          if (p.place[n] >= 0)
            std::memcpy(outgoing.data() + p.place[n] * row, in + n * row, row);
        ch.allToAllV(op, out, Plan::bytes(p.recv, size, row), outgoing.data(),
                     Plan::bytes(p.sent, size, row));
        std::memset(out + received * row, 0, (capacity - received) * row);
      });
}

extern "C" dsrt_event *dsrt_expert_combine(dsrt_context *ctx, int32_t group, dsrt_tensor *out,
                                           const dsrt_tensor *y, const dsrt_tensor *plan) {
  const char *what = "expert_combine";
  checkHostMemory(ctx, what);
  const int size = dsrt_group_size(ctx, group);
  const int64_t rows = planRows(what, plan, size);
  checkDtype(what, out, y->dtype, "output");
  const int64_t row = rowBytes(what, out, rows, "the output");
  const int64_t capacity = y->rank >= 1 ? y->dims[0] : 0;
  if (rowBytes(what, y, capacity, "the input") != row)
    fail(what, "the input's rows %s are not the output's %s", shapeString(y).c_str(),
         shapeString(out).c_str());
  char *o = static_cast<char *>(out->data);
  const char *in = static_cast<const char *>(y->data);
  const int64_t *planData = static_cast<const int64_t *>(plan->data);
  return enqueueOnGroup(
      ctx, group, what, {out, y, plan}, std::to_string(rows) + " rows of " +
                                            std::to_string(row) + " bytes",
      [=](Channel &ch, const CommOp &op) {
        Plan p(planData, rows, size);
        if (Plan::total(p.recv, size) > capacity)
          fail(what, "the plan returns %lld rows, more than the input's %lld",
               (long long)Plan::total(p.recv, size), (long long)capacity);
        std::vector<char> back(Plan::total(p.sent, size) * row);
        ch.allToAllV(op, back.data(), Plan::bytes(p.sent, size, row), in,
                     Plan::bytes(p.recv, size, row));
        for (int64_t n = 0; n < rows; ++n) {
          if (p.place[n] >= 0)
            std::memcpy(o + n * row, back.data() + p.place[n] * row, row);
          else
            std::memset(o + n * row, 0, row);
        }
      });
}

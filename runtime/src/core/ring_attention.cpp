//===- ring_attention.cpp - attention over a sequence split along a ring of ranks --===//
//
// dsrt_ring_attention and its gradient (ds.ring_attention): each rank of the group holds one
// block of the sequence; the key/value blocks go round the ring by dsrt_send_recv, and the
// attention kernels run on one block at a time. Built from the device's own kernels (attention,
// elementwise, copy) on views of the compiler's workspace, so every device runs it.
//
#include "internal.h"

#include <initializer_list>

using namespace dsrt;

namespace {
/// A view of `dims` f32 elements at `data`, on the stack (no handle, no storage: the caller's
/// workspace outlives every use).
dsrt_tensor view(float *data, const int64_t *dims, int32_t rank) {
  dsrt_tensor v{};
  v.data = data;
  v.dtype = DSRT_F32;
  v.rank = rank;
  v.numel = 1;
  for (int32_t i = 0; i < rank; ++i) {
    v.dims[i] = dims[i];
    v.numel *= dims[i];
  }
  return v;
}
dsrt_tensor like(float *data, const dsrt_tensor *t) { return view(data, t->dims, t->rank); }
dsrt_tensor flat(float *data, int64_t n) { return view(data, &n, 1); }
/// `t` [B, H, L] as [B, H, L, 1], to broadcast over the width of a result.
dsrt_tensor column(float *data, const dsrt_tensor *t) {
  int64_t d[4] = {t->dims[0], t->dims[1], t->dims[2], 1};
  return view(data, d, 4);
}

struct Ring {
  int32_t size, rank;
  /// The block of the sequence this rank holds at step j (it started at rank - j).
  int32_t source(int32_t j) const { return (rank - j + size) % size; }
};

Ring ringOf(dsrt_context *ctx, int32_t group, const char *k) {
  Ring r{dsrt_group_size(ctx, group), dsrt_group_rank(ctx, group)};
  if (r.size < 2)
    fail(k, "needs a group of two or more ranks, got %d", r.size);
  return r;
}

void checkOperands(const char *k, std::initializer_list<const dsrt_tensor *> ts) {
  for (const dsrt_tensor *t : ts)
    checkDtype(k, t, DSRT_F32, "operand");
}

/// Passes `cur` ([n] floats) to the next rank and receives the previous rank's into `next`.
dsrt_event *pass(dsrt_context *ctx, int32_t group, const Ring &r, float *cur, float *next,
                 int64_t n) {
  dsrt_tensor in = flat(cur, n), out = flat(next, n);
  return dsrt_send_recv(ctx, group, &out, (r.rank - 1 + r.size) % r.size, &in,
                        (r.rank + 1) % r.size);
}

/// The mask of rank `r`'s queries against the block of rank `src` (dsrt_causal): in sequence
/// order, earlier blocks whole, its own causal, later ones skipped (-1); striped (rank r holds
/// positions r, r + size, ...), the blocks of ranks up to r causal, the later ones strictly.
int32_t blockMask(const char *k, int32_t causal, int32_t src, int32_t rank) {
  switch (causal) {
  case DSRT_CAUSAL_NONE:
    return DSRT_CAUSAL_NONE;
  case DSRT_CAUSAL:
    return src < rank ? DSRT_CAUSAL_NONE : src == rank ? DSRT_CAUSAL : -1;
  case DSRT_CAUSAL_STRIPED:
    return src <= rank ? DSRT_CAUSAL : DSRT_CAUSAL_STRICT;
  default:
    fail(k, "causal is %d, not DSRT_CAUSAL_NONE, DSRT_CAUSAL or DSRT_CAUSAL_STRIPED", causal);
  }
  return -1;
}

void finish(dsrt_context *ctx, dsrt_event *e) {
  dsrt_event_wait(ctx, e);
  dsrt_event_release(e);
}
} // namespace

extern "C" void dsrt_ring_attention(dsrt_context *ctx, int32_t group, dsrt_tensor *out,
                                    dsrt_tensor *lse, dsrt_tensor *ws, const dsrt_tensor *q,
                                    const dsrt_tensor *k, const dsrt_tensor *v, double scale,
                                    int32_t causal) {
  const char *kn = "ring_attention";
  checkOperands(kn, {q, k, v, out, lse, ws});
  const int64_t nk = k->numel, nv = v->numel, no = out->numel, nl = lse->numel;
  if (ws->numel != 2 * (nk + nv) + no + 3 * nl)
    fail(kn, "workspace %s is not [%lld]", shapeString(ws).c_str(),
         (long long)(2 * (nk + nv) + no + 3 * nl));
  Ring r = ringOf(ctx, group, kn);
  blockMask(kn, causal, r.rank, r.rank);
  float *w = static_cast<float *>(ws->data);
  float *packet[2] = {w, w + nk + nv};
  float *oj = w + 2 * (nk + nv), *lj = oj + no, *top = lj + nl, *share = top + nl;
  dsrt_tensor K = like(packet[0], k), V = like(packet[0] + nk, v);
  dsrt_copy(ctx, &K, k);
  dsrt_copy(ctx, &V, v);
  dsrt_tensor O = like(oj, out), L = like(lj, lse), T = like(top, lse), S = like(share, lse);
  dsrt_tensor L1 = column(lj, lse), S1 = column(share, lse);
  for (int32_t j = 0; j < r.size; ++j) {
    float *cur = packet[j % 2];
    // The next block travels while this one is computed.
    dsrt_event *e = j + 1 < r.size ? pass(ctx, group, r, cur, packet[(j + 1) % 2], nk + nv)
                                   : nullptr;
    K = like(cur, k);
    V = like(cur + nk, v);
    const int32_t mask = blockMask(kn, causal, r.source(j), r.rank);
    if (j == 0) {
      // The rank's own block: causal as the whole sequence is.
      dsrt_attention(ctx, out, lse, q, &K, &V, nullptr, scale, mask);
    } else if (mask >= 0) {
      // Striped rows with no key here (the strict blocks' first) come back with lse -inf
      // and add nothing: the own block gave every row a key.
      dsrt_attention(ctx, &O, &L, q, &K, &V, nullptr, scale, mask);
      // lse' = m + log(e^(lse-m) + e^(l-m)); out' = out e^(lse-lse') + o e^(l-lse').
      dsrt_binary(ctx, DSRT_MAX, &T, lse, &L);
      dsrt_binary(ctx, DSRT_SUB, &S, lse, &T);
      dsrt_unary(ctx, DSRT_EXP, &S, &S);
      dsrt_binary(ctx, DSRT_SUB, &L, &L, &T);
      dsrt_unary(ctx, DSRT_EXP, &L, &L);
      dsrt_binary(ctx, DSRT_ADD, lse, &S, &L);
      dsrt_binary(ctx, DSRT_DIV, &S, &S, lse);
      dsrt_binary(ctx, DSRT_DIV, &L, &L, lse);
      dsrt_unary(ctx, DSRT_LOG, lse, lse);
      dsrt_binary(ctx, DSRT_ADD, lse, lse, &T);
      dsrt_binary(ctx, DSRT_MUL, out, out, &S1);
      dsrt_binary(ctx, DSRT_MUL, &O, &O, &L1);
      dsrt_binary(ctx, DSRT_ADD, out, out, &O);
    }
    if (e)
      finish(ctx, e);
  }
}

extern "C" void dsrt_ring_attention_grad(dsrt_context *ctx, int32_t group, dsrt_tensor *dq,
                                         dsrt_tensor *dk, dsrt_tensor *dv, dsrt_tensor *ws,
                                         const dsrt_tensor *q, const dsrt_tensor *k,
                                         const dsrt_tensor *v, const dsrt_tensor *out,
                                         const dsrt_tensor *lse, const dsrt_tensor *dout,
                                         double scale, int32_t causal) {
  const char *kn = "ring_attention_grad";
  checkOperands(kn, {q, k, v, out, lse, dout, dq, dk, dv, ws});
  const int64_t nq = q->numel, nk = k->numel, nv = v->numel, block = 2 * (nk + nv);
  if (ws->numel != 5 * (nk + nv) + nq)
    fail(kn, "workspace %s is not [%lld]", shapeString(ws).c_str(),
         (long long)(5 * (nk + nv) + nq));
  Ring r = ringOf(ctx, group, kn);
  blockMask(kn, causal, r.rank, r.rank);
  float *w = static_cast<float *>(ws->data);
  // A travelling block: keys, values, and their gradients summed so far.
  float *packet[2] = {w, w + block};
  float *dqj = w + 2 * block, *dkj = dqj + nq, *dvj = dkj + nk;
  dsrt_tensor K = like(packet[0], k), V = like(packet[0] + nk, v);
  dsrt_copy(ctx, &K, k);
  dsrt_copy(ctx, &V, v);
  dsrt_tensor grads = flat(packet[0] + nk + nv, nk + nv);
  dsrt_fill(ctx, &grads, 0.0);
  dsrt_fill(ctx, dq, 0.0);
  dsrt_tensor DQ = like(dqj, q), DK = like(dkj, k), DV = like(dvj, v);
  for (int32_t j = 0; j < r.size; ++j) {
    float *cur = packet[j % 2];
    const int32_t mask = blockMask(kn, causal, r.source(j), r.rank);
    if (mask >= 0) {
      K = like(cur, k);
      V = like(cur + nk, v);
      dsrt_tensor GK = like(cur + nk + nv, k), GV = like(cur + 2 * nk + nv, v);
      dsrt_attention_grad(ctx, &DQ, &DK, &DV, q, &K, &V, nullptr, out, lse, dout, scale,
                          mask);
      dsrt_binary(ctx, DSRT_ADD, dq, dq, &DQ);
      dsrt_binary(ctx, DSRT_ADD, &GK, &GK, &DK);
      dsrt_binary(ctx, DSRT_ADD, &GV, &GV, &DV);
    }
    // Every block moves on, its gradients with it; after size passes each is home.
    finish(ctx, pass(ctx, group, r, cur, packet[(j + 1) % 2], block));
  }
  float *home = packet[r.size % 2];
  dsrt_tensor GK = like(home + nk + nv, k), GV = like(home + 2 * nk + nv, v);
  dsrt_copy(ctx, dk, &GK);
  dsrt_copy(ctx, dv, &GV);
}

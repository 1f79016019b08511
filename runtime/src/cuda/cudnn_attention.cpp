//===- cudnn_attention.cpp - ds.attention on cuDNN's fused SDPA ---------------===//
//
// One cuDNN graph per case (direction, dtype, shape, mask layout, causal, scale), built on first
// use (the frontend's heuristics, mode A) and kept by the device; a case cuDNN refuses is kept
// too, with its reason, so that it is asked once. Operands are ds's dense row-major tensors:
// q [B, Hq, L, E], k [B, Hk, S, E], v [B, Hk, S, Ev], out [B, Hq, L, Ev], lse [B, Hq, L] (f32,
// the natural-log log-sum-exp of the scaled, masked scores: cuDNN's Stats), so that cuDNN's
// forward and ds's backward (or the reverse) can meet. A float mask is cuDNN's additive bias,
// passed with its dimensions of 1 (a layout cuDNN does not take is refused, and ds's kernels
// run it); dropout is not an operand of ds.attention.
//
#include "cudnn_attention.h"
#include "cuda_device.h"

#ifdef DSRT_CUDNN_FRONTEND
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING 1
#include <cudnn_frontend.h>

#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>

namespace cudnn_frontend {
void *cudnn_dlhandle = nullptr; // the frontend's calls into cuDNN go through it
}

namespace fe = cudnn_frontend;

namespace dsrt {
namespace {

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kBias, kDO, kDQ, kDK, kDV };

/// A built graph, or why cuDNN refused the case.
struct Plan {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace = 0;
  std::string refused;
};
using Key = std::array<int64_t, 15>;

std::vector<int64_t> dense(const std::vector<int64_t> &dims) {
  std::vector<int64_t> st(dims.size(), 1);
  for (int d = (int)dims.size() - 2; d >= 0; --d)
    st[d] = st[d + 1] * dims[d + 1];
  return st;
}

std::string message(fe::error_t e) { return e.get_message(); }

} // namespace

struct CudnnAttention {
  cudnnHandle_t handle = nullptr;
  std::string unavailable; ///< why there is no handle
  std::map<Key, Plan> plans;
};

namespace {

/// The device's cuDNN state, its handle on the compute stream; null with `why` without cuDNN.
CudnnAttention *state(dsrt_context *ctx, std::string &why) {
  CudaDevice &d = cuda::device(ctx);
  if (!d.cudnn) {
    d.cudnn = new CudnnAttention();
    if (void *lib = cuda::cudnnLibrary(d.cudnn->unavailable)) {
      fe::cudnn_dlhandle = lib;
      cudnnHandle_t h = nullptr;
      cudnnStatus_t st = fe::detail::create_handle(&h);
      if (st == CUDNN_STATUS_SUCCESS)
        st = fe::detail::set_stream(h, d.compute);
      if (st == CUDNN_STATUS_SUCCESS) {
        d.cudnn->handle = h;
      } else {
        if (h)
          fe::detail::destroy_handle(h);
        d.cudnn->unavailable =
            "cuDNN could not start (cudnnCreate or cudnnSetStream: status " +
            std::to_string((int)st) + ")";
      }
    }
  }
  why = d.cudnn->unavailable;
  return d.cudnn->handle ? d.cudnn : nullptr;
}

fe::graph::Tensor_attributes described(const char *name, int64_t uid,
                                       const std::vector<int64_t> &dims) {
  return fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dims).set_stride(
      dense(dims));
}

/// Builds the graph of one case: the forward (out and Stats) or the backward (dq, dk, dv).
Plan build(cudnnHandle_t handle, bool forward, const checks::AttentionShape &s,
           const dsrt_tensor *mask, float scale, int32_t causal) {
  Plan p;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(s.dtype == DSRT_BF16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const std::vector<int64_t> qDims{s.B, s.Hq, s.L, s.E}, kDims{s.B, s.Hk, s.S, s.E},
      vDims{s.B, s.Hk, s.S, s.Ev}, oDims{s.B, s.Hq, s.L, s.Ev}, statsDims{s.B, s.Hq, s.L, 1};
  auto Q = g->tensor(described("Q", kQ, qDims));
  auto K = g->tensor(described("K", kK, kDims));
  auto V = g->tensor(described("V", kV, vDims));
  std::shared_ptr<fe::graph::Tensor_attributes> bias;
  if (mask)
    bias = g->tensor(described("bias", kBias, {mask->dims[0], mask->dims[1], mask->dims[2],
                                               mask->dims[3]}));
  if (forward) {
    auto o = fe::graph::SDPA_attributes().set_name("ds.attention").set_generate_stats(true)
                 .set_attn_scale(scale);
    if (causal == DSRT_CAUSAL)
      o.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
    if (bias)
      o.set_bias(bias);
    auto [O, Stats] = g->sdpa(Q, K, V, o);
    O->set_output(true).set_uid(kO).set_dim(oDims).set_stride(dense(oDims));
    Stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT)
        .set_dim(statsDims).set_stride(dense(statsDims));
  } else {
    auto O = g->tensor(described("O", kO, oDims));
    auto dO = g->tensor(described("dO", kDO, oDims));
    auto Stats = g->tensor(described("Stats", kStats, statsDims)
                               .set_data_type(fe::DataType_t::FLOAT));
    auto o = fe::graph::SDPA_backward_attributes().set_name("ds.attention_grad")
                 .set_attn_scale(scale);
    if (causal == DSRT_CAUSAL)
      o.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
    if (bias)
      o.set_bias(bias);
    auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, Stats, o);
    dQ->set_output(true).set_uid(kDQ).set_dim(qDims).set_stride(dense(qDims));
    dK->set_output(true).set_uid(kDK).set_dim(kDims).set_stride(dense(kDims));
    dV->set_output(true).set_uid(kDV).set_dim(vDims).set_stride(dense(vDims));
  }
  fe::error_t e = g->validate();
  if (e.is_good())
    e = g->build_operation_graph(handle);
  if (e.is_good())
    e = g->create_execution_plans({fe::HeurMode_t::A});
  if (e.is_good())
    e = g->check_support(handle);
  if (e.is_good())
    e = g->build_plans(handle);
  if (e.is_good())
    e = g->get_workspace_size(p.workspace);
  if (e.is_bad()) {
    p.refused = "cuDNN: " + message(e);
    return p;
  }
  p.graph = std::move(g);
  return p;
}

/// Why cuDNN's fused attention cannot take the case before asking it, or "".
std::string unfit(const checks::AttentionShape &s, int32_t causal) {
  if (s.dtype != DSRT_BF16 && s.dtype != DSRT_F16)
    return "cuDNN's fused attention takes bf16 and f16, not f32";
  if (causal == DSRT_CAUSAL_STRICT)
    return "strictly causal blocks (a ring's) have rows with no key";
  if (s.maskKind == 1)
    return "a bool mask (cuDNN takes an additive one)";
  return "";
}

/// The case's plan, built on first use.
const Plan &planFor(CudnnAttention &st, bool forward, const checks::AttentionShape &s,
                    const dsrt_tensor *mask, double scale, int32_t causal) {
  float sc = (float)scale;
  int32_t scaleBits;
  std::memcpy(&scaleBits, &sc, sizeof sc);
  Key key{forward, s.dtype, s.B, s.Hq, s.Hk, s.L, s.S, s.E, s.Ev, causal,
          mask ? mask->dims[0] : -1, mask ? mask->dims[1] : -1, mask ? mask->dims[2] : -1,
          mask ? mask->dims[3] : -1, scaleBits};
  auto it = st.plans.find(key);
  if (it == st.plans.end())
    it = st.plans.emplace(key, build(st.handle, forward, s, mask, sc, causal)).first;
  return it->second;
}

bool run(dsrt_context *ctx, const char *kn, bool forward, const checks::AttentionShape &s,
         const dsrt_tensor *mask, double scale, int32_t causal,
         std::unordered_map<int64_t, void *> pack, std::string &why) {
  why = unfit(s, causal);
  if (!why.empty())
    return false;
  CudnnAttention *st = state(ctx, why);
  if (!st)
    return false;
  const Plan &p = planFor(*st, forward, s, mask, scale, causal);
  if (!p.graph) {
    why = p.refused;
    return false;
  }
  if (mask)
    pack[kBias] = mask->data;
  void *ws = p.workspace ? cuda::device(ctx).scratch((size_t)p.workspace) : nullptr;
  fe::error_t e = p.graph->execute(st->handle, pack, ws);
  if (e.is_bad())
    fail(kn, "cuDNN's fused attention failed to run: %s", message(e).c_str());
  return true;
}

} // namespace

bool cuda::cudnnAttention(dsrt_context *ctx, const checks::AttentionShape &s, dsrt_tensor *out,
                          dsrt_tensor *lse, const dsrt_tensor *q, const dsrt_tensor *k,
                          const dsrt_tensor *v, const dsrt_tensor *mask, double scale,
                          int32_t causal, std::string &why) {
  return run(ctx, "attention", true, s, mask, scale, causal,
             {{kQ, q->data}, {kK, k->data}, {kV, v->data}, {kO, out->data}, {kStats, lse->data}},
             why);
}

bool cuda::cudnnAttentionGrad(dsrt_context *ctx, const checks::AttentionShape &s,
                              dsrt_tensor *dq, dsrt_tensor *dk, dsrt_tensor *dv,
                              const dsrt_tensor *q, const dsrt_tensor *k, const dsrt_tensor *v,
                              const dsrt_tensor *mask, const dsrt_tensor *out,
                              const dsrt_tensor *lse, const dsrt_tensor *dout, double scale,
                              int32_t causal, std::string &why) {
  return run(ctx, "attention_grad", false, s, mask, scale, causal,
             {{kQ, q->data},
              {kK, k->data},
              {kV, v->data},
              {kO, out->data},
              {kDO, dout->data},
              {kStats, lse->data},
              {kDQ, dq->data},
              {kDK, dk->data},
              {kDV, dv->data}},
             why);
}

void cuda::release(CudnnAttention *st) {
  if (!st)
    return;
  st->plans.clear();
  if (st->handle)
    fe::detail::destroy_handle(st->handle);
  delete st;
}

std::string cuda::cudnnAttentionBuild() {
  return "cuDNN's fused SDPA where it takes the case (frontend " +
         std::to_string(CUDNN_FRONTEND_MAJOR_VERSION) + "." +
         std::to_string(CUDNN_FRONTEND_MINOR_VERSION) + "." +
         std::to_string(CUDNN_FRONTEND_PATCH_VERSION) + "), else ds's kernels";
}

} // namespace dsrt

#else // built without the cuDNN frontend (-DDSRT_CUDNN_ATTENTION=OFF)

namespace dsrt {
struct CudnnAttention {};
namespace {
constexpr const char *kNotBuilt = "this runtime was built without the cuDNN frontend "
                                  "(-DDSRT_CUDNN_ATTENTION=OFF)";
}
bool cuda::cudnnAttention(dsrt_context *, const checks::AttentionShape &, dsrt_tensor *,
                          dsrt_tensor *, const dsrt_tensor *, const dsrt_tensor *,
                          const dsrt_tensor *, const dsrt_tensor *, double, int32_t,
                          std::string &why) {
  why = kNotBuilt;
  return false;
}
bool cuda::cudnnAttentionGrad(dsrt_context *, const checks::AttentionShape &, dsrt_tensor *,
                              dsrt_tensor *, dsrt_tensor *, const dsrt_tensor *,
                              const dsrt_tensor *, const dsrt_tensor *, const dsrt_tensor *,
                              const dsrt_tensor *, const dsrt_tensor *, const dsrt_tensor *,
                              double, int32_t, std::string &why) {
  why = kNotBuilt;
  return false;
}
void cuda::release(CudnnAttention *st) { delete st; }
std::string cuda::cudnnAttentionBuild() { return std::string("ds's kernels; ") + kNotBuilt; }
} // namespace dsrt

#endif

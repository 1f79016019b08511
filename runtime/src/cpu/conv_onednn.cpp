// CPU kernels: 2-D convolution through oneDNN primitives, cached per shape (built with oneDNN;
// conv_direct.cpp otherwise).
#include "cpu_device.h"
#include "../kernels/checks.h"
#include "../kernels/windows.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>

#include "dnnl_state.h"

using namespace dsrt;

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

struct ConvParams {
  memory::dims src, wei, bias, dst, strides, dilates, padL, padR;
  tag weiTag;
  std::string key;
};

/// x [N, C, H, W] (or [C, H, W]), w [O, C/g, KH, KW], y [N, O, OH, OW].
ConvParams convParams(const char *k, const dsrt_tensor *x, const dsrt_tensor *w,
                      const dsrt_tensor *y, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                      int64_t dh, int64_t dw, int64_t g) {
  const ops::ConvShape c = ops::convShape(k, x, w, y, sh, sw, ph, pw, dh, dw, g);
  const int64_t N = c.N, C = c.C, H = c.H, W = c.W, O = c.O, KH = c.KH, KW = c.KW, OH = c.OH,
                OW = c.OW;
  ConvParams p;
  p.src = {N, C, H, W};
  p.dst = {N, O, OH, OW};
  if (g == 1) {
    p.wei = {O, C, KH, KW};
    p.weiTag = tag::oihw;
  } else {
    p.wei = {g, O / g, C / g, KH, KW};
    p.weiTag = tag::goihw;
  }
  p.bias = {O};
  p.strides = {sh, sw};
  p.dilates = {dh - 1, dw - 1};
  p.padL = {ph, pw};
  p.padR = {ph, pw};
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%lld,%lld,%lld,%lld/%lld,%lld,%lld/%lld,%lld,%lld,%lld,%lld,%lld/g%lld",
                (long long)N, (long long)C, (long long)H, (long long)W, (long long)O, (long long)KH,
                (long long)KW, (long long)sh, (long long)sw, (long long)ph, (long long)pw,
                (long long)dh, (long long)dw, (long long)g);
  p.key = buf;
  return p;
}

/// The forward convolution. Layouts `any`: oneDNN picks its blocked ones (nChw16c under
/// AVX-512), where its JIT convolutions run (about 2x the im2col GEMM of the plain layouts);
/// they are the primitives PyTorch 2.15 runs (its bundled oneDNN 3.13), and gave its results
/// bit for bit on ResNet-18's shapes, forward and both gradients, at 1 and 2 threads.
dnnl::convolution_forward::primitive_desc fwdDesc(DnnlState &st, const ConvParams &p, bool bias) {
  memory::desc src(p.src, dt::f32, tag::any), wei(p.wei, dt::f32, tag::any),
      dst(p.dst, dt::f32, tag::any);
  memory::desc b = bias ? memory::desc(p.bias, dt::f32, tag::x) : memory::desc();
  return dnnl::convolution_forward::primitive_desc(
      st.engine, dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src, wei,
      b, dst, p.strides, p.dilates, p.padL, p.padR);
}

/// A cached convolution primitive and the layouts it wants for its three tensor operands.
struct BlockedConv {
  dnnl::primitive prim;
  memory::desc src, wei, dst;
};

template <class F>
BlockedConv &cached(dsrt_context *ctx, const std::string &key, const F &make) {
  auto it = cpuDevice(ctx).primitives.find(key);
  if (it == cpuDevice(ctx).primitives.end())
    it = cpuDevice(ctx).primitives.emplace(key, std::make_shared<BlockedConv>(make())).first;
  return *static_cast<BlockedConv *>(it->second.get());
}

/// An operand in the layout the primitive wants: the caller's plain buffer itself where they
/// agree, else scratch slot `slot` (the context's, reused by every call: kernels run one at a
/// time), filled by a reorder for an input. finish() copies an output back.
struct Operand {
  memory user, used;
  Operand(DnnlState &st, const memory::desc &plain, const memory::desc &want, void *data,
          int slot, bool input)
      : user(plain, st.engine, data) {
    if (want == plain) {
      used = user;
      return;
    }
    used = memory(want, st.engine, st.scratch(slot, want.get_size()));
    if (input)
      dnnl::reorder(user, used).execute(st.stream, user, used);
  }
  void finish(DnnlState &st) {
    if (used.get_data_handle() != user.get_data_handle())
      dnnl::reorder(used, user).execute(st.stream, used, user);
  }
};

template <class F> void guarded(const char *k, F &&f) {
  try {
    f();
  } catch (const dnnl::error &e) {
    fail(k, "oneDNN: %s (status %d)", e.what(), (int)e.status);
  }
}

} // namespace

void dsrt::cpu::conv2d(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *x,
                            const dsrt_tensor *w, const dsrt_tensor *bias, int64_t stride_h,
                            int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h,
                            int64_t dil_w, int64_t groups) {
  DSRT_PROFILE("conv2d");
  const char *k = "conv2d";
  ConvParams p = convParams(k, x, w, out, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups);
  checks::optF32(k, bias, p.dst[1], "bias");
  guarded(k, [&] {
    DnnlState &st = dnnlState(ctx);
    BlockedConv &c = cached(ctx, std::string("conv_fwd/") + (bias ? "b/" : "") + p.key, [&] {
      auto pd = fwdDesc(st, p, bias != nullptr);
      return BlockedConv{dnnl::convolution_forward(pd), pd.src_desc(), pd.weights_desc(),
                         pd.dst_desc()};
    });
    Operand src(st, {p.src, dt::f32, tag::nchw}, c.src, x->data, 0, true);
    Operand wei(st, {p.wei, dt::f32, p.weiTag}, c.wei, w->data, 1, true);
    Operand dst(st, {p.dst, dt::f32, tag::nchw}, c.dst, out->data, 2, false);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src.used}, {DNNL_ARG_WEIGHTS, wei.used}, {DNNL_ARG_DST, dst.used}};
    if (bias)
      args.emplace(DNNL_ARG_BIAS, memory({p.bias, dt::f32, tag::x}, st.engine, bias->data));
    c.prim.execute(st.stream, args);
    dst.finish(st);
    st.stream.wait();
  });
}

void dsrt::cpu::conv2d_grad_input(dsrt_context *ctx, dsrt_tensor *dx, const dsrt_tensor *dy,
                                       const dsrt_tensor *w, int64_t stride_h, int64_t stride_w,
                                       int64_t pad_h, int64_t pad_w, int64_t dil_h, int64_t dil_w,
                                       int64_t groups) {
  DSRT_PROFILE("conv2d_grad_input");
  const char *k = "conv2d_grad_input";
  ConvParams p = convParams(k, dx, w, dy, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups);
  guarded(k, [&] {
    DnnlState &st = dnnlState(ctx);
    using P = dnnl::convolution_backward_data;
    BlockedConv &c = cached(ctx, "conv_bwd_data/" + p.key, [&] {
      // Layouts `any`, as the forward's.
      memory::desc src(p.src, dt::f32, tag::any), wei(p.wei, dt::f32, tag::any),
          dst(p.dst, dt::f32, tag::any);
      P::primitive_desc pd(st.engine, dnnl::algorithm::convolution_direct, src, wei, dst,
                           p.strides, p.dilates, p.padL, p.padR, fwdDesc(st, p, false));
      return BlockedConv{P(pd), pd.diff_src_desc(), pd.weights_desc(), pd.diff_dst_desc()};
    });
    Operand dsrc(st, {p.src, dt::f32, tag::nchw}, c.src, dx->data, 0, false);
    Operand wei(st, {p.wei, dt::f32, p.weiTag}, c.wei, w->data, 1, true);
    Operand ddst(st, {p.dst, dt::f32, tag::nchw}, c.dst, dy->data, 2, true);
    c.prim.execute(st.stream, {{DNNL_ARG_DIFF_SRC, dsrc.used},
                               {DNNL_ARG_WEIGHTS, wei.used},
                               {DNNL_ARG_DIFF_DST, ddst.used}});
    dsrc.finish(st);
    st.stream.wait();
  });
}

void dsrt::cpu::conv2d_grad_weight(dsrt_context *ctx, dsrt_tensor *dw, dsrt_tensor *dbias,
                                        const dsrt_tensor *x, const dsrt_tensor *dy,
                                        int64_t stride_h, int64_t stride_w, int64_t pad_h,
                                        int64_t pad_w, int64_t dil_h, int64_t dil_w,
                                        int64_t groups) {
  DSRT_PROFILE("conv2d_grad_weight");
  const char *k = "conv2d_grad_weight";
  ConvParams p = convParams(k, x, dw, dy, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups);
  checks::optF32(k, dbias, p.dst[1], "dbias");
  guarded(k, [&] {
    DnnlState &st = dnnlState(ctx);
    using P = dnnl::convolution_backward_weights;
    BlockedConv &c = cached(ctx, std::string("conv_bwd_weights/") + (dbias ? "b/" : "") + p.key, [&] {
      memory::desc src(p.src, dt::f32, tag::any), wei(p.wei, dt::f32, tag::any),
          dst(p.dst, dt::f32, tag::any);
      memory::desc b = dbias ? memory::desc(p.bias, dt::f32, tag::x) : memory::desc();
      P::primitive_desc pd(st.engine, dnnl::algorithm::convolution_direct, src, wei, b, dst,
                           p.strides, p.dilates, p.padL, p.padR,
                           fwdDesc(st, p, dbias != nullptr));
      return BlockedConv{P(pd), pd.src_desc(), pd.diff_weights_desc(), pd.diff_dst_desc()};
    });
    Operand src(st, {p.src, dt::f32, tag::nchw}, c.src, x->data, 0, true);
    Operand dwei(st, {p.wei, dt::f32, p.weiTag}, c.wei, dw->data, 1, false);
    Operand ddst(st, {p.dst, dt::f32, tag::nchw}, c.dst, dy->data, 2, true);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src.used},
                                         {DNNL_ARG_DIFF_WEIGHTS, dwei.used},
                                         {DNNL_ARG_DIFF_DST, ddst.used}};
    if (dbias)
      args.emplace(DNNL_ARG_DIFF_BIAS, memory({p.bias, dt::f32, tag::x}, st.engine, dbias->data));
    c.prim.execute(st.stream, args);
    dwei.finish(st);
    st.stream.wait();
  });
}

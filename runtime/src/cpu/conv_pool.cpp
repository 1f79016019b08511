// CPU kernels: 2-D convolution (oneDNN primitives, cached per shape) and pooling.
#include "../core/internal.h"

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
  checkDtype(k, x, DSRT_F32, "input");
  checkDtype(k, w, DSRT_F32, "weight");
  checkDtype(k, y, DSRT_F32, "output");
  bool batched = x->rank == 4;
  if (!(x->rank == 4 || x->rank == 3) || y->rank != x->rank || w->rank != 4 || g <= 0 || sh <= 0 ||
      sw <= 0 || dh <= 0 || dw <= 0 || ph < 0 || pw < 0)
    fail(k, "bad shapes x %s, w %s, y %s", shapeString(x).c_str(), shapeString(w).c_str(),
         shapeString(y).c_str());
  int o = batched ? 1 : 0;
  int64_t N = batched ? x->dims[0] : 1, C = x->dims[o], H = x->dims[o + 1], W = x->dims[o + 2];
  int64_t O = w->dims[0], KH = w->dims[2], KW = w->dims[3];
  int64_t OH = y->dims[o + 1], OW = y->dims[o + 2];
  int64_t eOH = (H + 2 * ph - (dh * (KH - 1) + 1)) / sh + 1;
  int64_t eOW = (W + 2 * pw - (dw * (KW - 1) + 1)) / sw + 1;
  if (C % g || O % g || w->dims[1] != C / g || y->dims[o] != O || OH != eOH || OW != eOW ||
      (batched && y->dims[0] != N))
    fail(k, "x %s, w %s (groups %lld) do not give y %s", shapeString(x).c_str(),
         shapeString(w).c_str(), (long long)g, shapeString(y).c_str());
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

dnnl::convolution_forward::primitive_desc fwdDesc(DnnlState &st, const ConvParams &p, bool bias) {
  memory::desc src(p.src, dt::f32, tag::nchw), wei(p.wei, dt::f32, p.weiTag),
      dst(p.dst, dt::f32, tag::nchw);
  memory::desc b = bias ? memory::desc(p.bias, dt::f32, tag::x) : memory::desc();
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training,
                                    dnnl::algorithm::convolution_direct, src, wei, b, dst,
                                    p.strides, p.dilates, p.padL, p.padR);
  return dnnl::convolution_forward::primitive_desc(d, st.engine);
}

template <class Prim>
Prim &cached(dsrt_context *ctx, const std::string &key, const std::function<Prim()> &make) {
  auto it = ctx->primitives.find(key);
  if (it == ctx->primitives.end())
    it = ctx->primitives.emplace(key, std::make_shared<Prim>(make())).first;
  return *static_cast<Prim *>(it->second.get());
}

template <class F> void guarded(const char *k, F &&f) {
  try {
    f();
  } catch (const dnnl::error &e) {
    fail(k, "oneDNN: %s (status %d)", e.what(), (int)e.status);
  }
}

} // namespace

extern "C" void dsrt_conv2d(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *x,
                            const dsrt_tensor *w, const dsrt_tensor *bias, int64_t stride_h,
                            int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h,
                            int64_t dil_w, int64_t groups) {
  DSRT_PROFILE("conv2d");
  const char *k = "conv2d";
  ConvParams p = convParams(k, x, w, out, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups);
  if (bias) {
    checkDtype(k, bias, DSRT_F32, "bias");
    if (bias->numel != p.dst[1])
      fail(k, "bias %s for %lld channels", shapeString(bias).c_str(), (long long)p.dst[1]);
  }
  guarded(k, [&] {
    DnnlState &st = dnnlState(ctx);
    using P = dnnl::convolution_forward;
    P &prim = cached<P>(ctx, std::string("conv_fwd/") + (bias ? "b/" : "") + p.key,
                        [&] { return P(fwdDesc(st, p, bias != nullptr)); });
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, memory({p.src, dt::f32, tag::nchw}, st.engine, x->data)},
        {DNNL_ARG_WEIGHTS, memory({p.wei, dt::f32, p.weiTag}, st.engine, w->data)},
        {DNNL_ARG_DST, memory({p.dst, dt::f32, tag::nchw}, st.engine, out->data)}};
    if (bias)
      args.emplace(DNNL_ARG_BIAS, memory({p.bias, dt::f32, tag::x}, st.engine, bias->data));
    prim.execute(st.stream, args);
    st.stream.wait();
  });
}

extern "C" void dsrt_conv2d_grad_input(dsrt_context *ctx, dsrt_tensor *dx, const dsrt_tensor *dy,
                                       const dsrt_tensor *w, int64_t stride_h, int64_t stride_w,
                                       int64_t pad_h, int64_t pad_w, int64_t dil_h, int64_t dil_w,
                                       int64_t groups) {
  DSRT_PROFILE("conv2d_grad_input");
  const char *k = "conv2d_grad_input";
  ConvParams p = convParams(k, dx, w, dy, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups);
  guarded(k, [&] {
    DnnlState &st = dnnlState(ctx);
    using P = dnnl::convolution_backward_data;
    P &prim = cached<P>(ctx, "conv_bwd_data/" + p.key, [&] {
      memory::desc src(p.src, dt::f32, tag::nchw), wei(p.wei, dt::f32, p.weiTag),
          dst(p.dst, dt::f32, tag::nchw);
      P::desc d(dnnl::algorithm::convolution_direct, src, wei, dst, p.strides, p.dilates, p.padL,
                p.padR);
      return P(P::primitive_desc(d, st.engine, fwdDesc(st, p, false)));
    });
    prim.execute(st.stream,
                 {{DNNL_ARG_DIFF_SRC, memory({p.src, dt::f32, tag::nchw}, st.engine, dx->data)},
                  {DNNL_ARG_WEIGHTS, memory({p.wei, dt::f32, p.weiTag}, st.engine, w->data)},
                  {DNNL_ARG_DIFF_DST, memory({p.dst, dt::f32, tag::nchw}, st.engine, dy->data)}});
    st.stream.wait();
  });
}

extern "C" void dsrt_conv2d_grad_weight(dsrt_context *ctx, dsrt_tensor *dw, dsrt_tensor *dbias,
                                        const dsrt_tensor *x, const dsrt_tensor *dy,
                                        int64_t stride_h, int64_t stride_w, int64_t pad_h,
                                        int64_t pad_w, int64_t dil_h, int64_t dil_w,
                                        int64_t groups) {
  DSRT_PROFILE("conv2d_grad_weight");
  const char *k = "conv2d_grad_weight";
  ConvParams p = convParams(k, x, dw, dy, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups);
  if (dbias) {
    checkDtype(k, dbias, DSRT_F32, "dbias");
    if (dbias->numel != p.dst[1])
      fail(k, "dbias %s for %lld channels", shapeString(dbias).c_str(), (long long)p.dst[1]);
  }
  guarded(k, [&] {
    DnnlState &st = dnnlState(ctx);
    using P = dnnl::convolution_backward_weights;
    P &prim = cached<P>(ctx, std::string("conv_bwd_weights/") + (dbias ? "b/" : "") + p.key, [&] {
      memory::desc src(p.src, dt::f32, tag::nchw), wei(p.wei, dt::f32, p.weiTag),
          dst(p.dst, dt::f32, tag::nchw);
      memory::desc b = dbias ? memory::desc(p.bias, dt::f32, tag::x) : memory::desc();
      P::desc d(dnnl::algorithm::convolution_direct, src, wei, b, dst, p.strides, p.dilates, p.padL,
                p.padR);
      return P(P::primitive_desc(d, st.engine, fwdDesc(st, p, dbias != nullptr)));
    });
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, memory({p.src, dt::f32, tag::nchw}, st.engine, x->data)},
        {DNNL_ARG_DIFF_WEIGHTS, memory({p.wei, dt::f32, p.weiTag}, st.engine, dw->data)},
        {DNNL_ARG_DIFF_DST, memory({p.dst, dt::f32, tag::nchw}, st.engine, dy->data)}};
    if (dbias)
      args.emplace(DNNL_ARG_DIFF_BIAS, memory({p.bias, dt::f32, tag::x}, st.engine, dbias->data));
    prim.execute(st.stream, args);
    st.stream.wait();
  });
}

//===----------------------------------------------------------------------===//
// Pooling (hand-written to follow ATen's window rules exactly)
//===----------------------------------------------------------------------===//

namespace {

struct PoolShape {
  int64_t planes, H, W, OH, OW;
};

PoolShape poolShape(const char *k, const dsrt_tensor *x, const dsrt_tensor *y) {
  checkDtype(k, x, DSRT_F32, "input");
  checkDtype(k, y, DSRT_F32, "output");
  if (!(x->rank == 3 || x->rank == 4) || y->rank != x->rank)
    fail(k, "bad shapes x %s, y %s", shapeString(x).c_str(), shapeString(y).c_str());
  for (int d = 0; d < x->rank - 2; ++d)
    if (x->dims[d] != y->dims[d])
      fail(k, "x %s and y %s differ in leading dims", shapeString(x).c_str(),
           shapeString(y).c_str());
  int r = x->rank;
  PoolShape s{1, x->dims[r - 2], x->dims[r - 1], y->dims[r - 2], y->dims[r - 1]};
  for (int d = 0; d < r - 2; ++d)
    s.planes *= x->dims[d];
  return s;
}

/// Index (into the plane) of the first maximum of the window of output (oh, ow), as ATen's
/// max_pool2d: NaN wins, ties keep the first.
inline int64_t maxIndex(const float *x, const PoolShape &s, int64_t oh, int64_t ow, int64_t kh,
                        int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh,
                        int64_t dw, float &val) {
  int64_t hs = oh * sh - ph, ws = ow * sw - pw;
  int64_t he = std::min(hs + (kh - 1) * dh + 1, s.H), we = std::min(ws + (kw - 1) * dw + 1, s.W);
  while (hs < 0)
    hs += dh;
  while (ws < 0)
    ws += dw;
  int64_t best = hs * s.W + ws;
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t h = hs; h < he; h += dh)
    for (int64_t w = ws; w < we; w += dw) {
      float v = x[h * s.W + w];
      if (v > mx || std::isnan(v)) {
        mx = v;
        best = h * s.W + w;
      }
    }
  val = mx;
  return best;
}

} // namespace

extern "C" void dsrt_max_pool2d(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *x, int64_t kh,
                                int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                                int64_t dh, int64_t dw) {
  DSRT_PROFILE("max_pool2d");
  PoolShape s = poolShape("max_pool2d", x, out);
  const float *X = (const float *)x->data;
  float *Y = (float *)out->data;
#pragma omp parallel for schedule(static) if (x->numel > kParallelGrain)
  for (int64_t p = 0; p < s.planes; ++p)
    for (int64_t oh = 0; oh < s.OH; ++oh)
      for (int64_t ow = 0; ow < s.OW; ++ow) {
        float v;
        maxIndex(X + p * s.H * s.W, s, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, v);
        Y[(p * s.OH + oh) * s.OW + ow] = v;
      }
}

extern "C" void dsrt_max_pool2d_grad(dsrt_context *, dsrt_tensor *dx, const dsrt_tensor *x,
                                     const dsrt_tensor *dy, int64_t kh, int64_t kw, int64_t sh,
                                     int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw) {
  DSRT_PROFILE("max_pool2d_grad");
  const char *k = "max_pool2d_grad";
  PoolShape s = poolShape(k, x, dy);
  checkSameShape(k, dx, x);
  const float *X = (const float *)x->data, *G = (const float *)dy->data;
  float *DX = (float *)dx->data;
#pragma omp parallel for schedule(static) if (x->numel > kParallelGrain)
  for (int64_t p = 0; p < s.planes; ++p) {
    float *d = DX + p * s.H * s.W;
    std::memset(d, 0, s.H * s.W * sizeof(float));
    for (int64_t oh = 0; oh < s.OH; ++oh)
      for (int64_t ow = 0; ow < s.OW; ++ow) {
        float v;
        int64_t i = maxIndex(X + p * s.H * s.W, s, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, v);
        d[i] += G[(p * s.OH + oh) * s.OW + ow];
      }
  }
}

namespace {

/// ATen's avg_pool2d window and divisor for output (oh, ow).
inline void avgWindow(const PoolShape &s, int64_t oh, int64_t ow, int64_t kh, int64_t kw,
                      int64_t sh, int64_t sw, int64_t ph, int64_t pw, bool includePad, int64_t &hs,
                      int64_t &he, int64_t &ws, int64_t &we, int64_t &div) {
  hs = oh * sh - ph;
  ws = ow * sw - pw;
  he = std::min(hs + kh, s.H + ph);
  we = std::min(ws + kw, s.W + pw);
  int64_t poolSize = (he - hs) * (we - ws);
  hs = std::max<int64_t>(hs, 0);
  ws = std::max<int64_t>(ws, 0);
  he = std::min(he, s.H);
  we = std::min(we, s.W);
  div = includePad ? poolSize : (he - hs) * (we - ws);
}

} // namespace

extern "C" void dsrt_avg_pool2d(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *x, int64_t kh,
                                int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                                int32_t count_include_pad) {
  DSRT_PROFILE("avg_pool2d");
  PoolShape s = poolShape("avg_pool2d", x, out);
  const float *X = (const float *)x->data;
  float *Y = (float *)out->data;
#pragma omp parallel for schedule(static) if (x->numel > kParallelGrain)
  for (int64_t p = 0; p < s.planes; ++p)
    for (int64_t oh = 0; oh < s.OH; ++oh)
      for (int64_t ow = 0; ow < s.OW; ++ow) {
        int64_t hs, he, ws, we, div;
        avgWindow(s, oh, ow, kh, kw, sh, sw, ph, pw, count_include_pad, hs, he, ws, we, div);
        const float *xp = X + p * s.H * s.W;
        float sum = 0;
        for (int64_t h = hs; h < he; ++h)
          for (int64_t w = ws; w < we; ++w)
            sum += xp[h * s.W + w];
        Y[(p * s.OH + oh) * s.OW + ow] = div ? sum / (float)div : 0.f;
      }
}

extern "C" void dsrt_avg_pool2d_grad(dsrt_context *, dsrt_tensor *dx, const dsrt_tensor *dy,
                                     int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                                     int64_t pw, int32_t count_include_pad) {
  DSRT_PROFILE("avg_pool2d_grad");
  PoolShape s = poolShape("avg_pool2d_grad", dx, dy);
  const float *G = (const float *)dy->data;
  float *DX = (float *)dx->data;
#pragma omp parallel for schedule(static) if (dx->numel > kParallelGrain)
  for (int64_t p = 0; p < s.planes; ++p) {
    float *d = DX + p * s.H * s.W;
    std::memset(d, 0, s.H * s.W * sizeof(float));
    for (int64_t oh = 0; oh < s.OH; ++oh)
      for (int64_t ow = 0; ow < s.OW; ++ow) {
        int64_t hs, he, ws, we, div;
        avgWindow(s, oh, ow, kh, kw, sh, sw, ph, pw, count_include_pad, hs, he, ws, we, div);
        if (!div)
          continue;
        float g = G[(p * s.OH + oh) * s.OW + ow] / (float)div;
        for (int64_t h = hs; h < he; ++h)
          for (int64_t w = ws; w < we; ++w)
            d[h * s.W + w] += g;
      }
  }
}

extern "C" void dsrt_adaptive_avg_pool2d(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *x) {
  DSRT_PROFILE("adaptive_avg_pool2d");
  PoolShape s = poolShape("adaptive_avg_pool2d", x, out);
  const float *X = (const float *)x->data;
  float *Y = (float *)out->data;
#pragma omp parallel for schedule(static) if (x->numel > kParallelGrain)
  for (int64_t p = 0; p < s.planes; ++p)
    for (int64_t oh = 0; oh < s.OH; ++oh) {
      int64_t hs = oh * s.H / s.OH, he = ((oh + 1) * s.H + s.OH - 1) / s.OH;
      for (int64_t ow = 0; ow < s.OW; ++ow) {
        int64_t ws = ow * s.W / s.OW, we = ((ow + 1) * s.W + s.OW - 1) / s.OW;
        const float *xp = X + p * s.H * s.W;
        float sum = 0;
        for (int64_t h = hs; h < he; ++h)
          for (int64_t w = ws; w < we; ++w)
            sum += xp[h * s.W + w];
        Y[(p * s.OH + oh) * s.OW + ow] = sum / (float)((he - hs) * (we - ws));
      }
    }
}

extern "C" void dsrt_adaptive_avg_pool2d_grad(dsrt_context *, dsrt_tensor *dx,
                                              const dsrt_tensor *dy) {
  DSRT_PROFILE("adaptive_avg_pool2d_grad");
  PoolShape s = poolShape("adaptive_avg_pool2d_grad", dx, dy);
  const float *G = (const float *)dy->data;
  float *DX = (float *)dx->data;
#pragma omp parallel for schedule(static) if (dx->numel > kParallelGrain)
  for (int64_t p = 0; p < s.planes; ++p) {
    float *d = DX + p * s.H * s.W;
    std::memset(d, 0, s.H * s.W * sizeof(float));
    for (int64_t oh = 0; oh < s.OH; ++oh) {
      int64_t hs = oh * s.H / s.OH, he = ((oh + 1) * s.H + s.OH - 1) / s.OH;
      for (int64_t ow = 0; ow < s.OW; ++ow) {
        int64_t ws = ow * s.W / s.OW, we = ((ow + 1) * s.W + s.OW - 1) / s.OW;
        float g = G[(p * s.OH + oh) * s.OW + ow] / (float)((he - hs) * (we - ws));
        for (int64_t h = hs; h < he; ++h)
          for (int64_t w = ws; w < we; ++w)
            d[h * s.W + w] += g;
      }
    }
  }
}

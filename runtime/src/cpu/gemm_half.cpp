//===- gemm_half.cpp - 16-bit GEMMs of the CPU device ----------------------===//
#include "gemm_half.h"
#include "../core/half.h"
#ifdef DSRT_HAVE_DNNL
#include "dnnl_state.h"
#endif

#include <omp.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

using namespace dsrt;
using namespace dsrt::cpu;

namespace {

#ifdef DSRT_HAVE_DNNL
using dnnl::memory;

/// A cached product: the primitive (none where oneDNN has no bf16 kernel for this CPU), its
/// memory descriptors and its implementation's name.
struct Bf16Matmul {
  std::unique_ptr<dnnl::primitive> prim;
  memory::desc a, b, c, bias;
  std::string impl;
};

Bf16Matmul &bf16Matmul(dsrt_context *ctx, const HalfGemm &g) {
  const int64_t bA = g.strideA ? g.batch : 1, bB = g.strideB ? g.batch : 1;
  std::string key = "matmul_bf16/" + std::to_string(g.ta) + std::to_string(g.tb) + "/" +
                    std::to_string(g.batch) + "x" + std::to_string(g.M) + "x" +
                    std::to_string(g.N) + "x" + std::to_string(g.K) + "/" +
                    std::to_string(g.lda) + "," + std::to_string(g.ldb) + "," +
                    std::to_string(g.ldc) + "/" + std::to_string(g.strideA) + "," +
                    std::to_string(g.strideB) + "," + std::to_string(g.strideC) +
                    (g.bias ? "/bias" : "");
  auto &slot = cpuDevice(ctx).primitives[key];
  if (!slot) {
    auto m = std::make_shared<Bf16Matmul>();
    DnnlState &st = dnnlState(ctx);
    const auto bf16 = memory::data_type::bf16;
    m->a = memory::desc({bA, g.M, g.K}, bf16,
                        memory::dims{bA > 1 ? g.strideA : g.M * g.K, g.ta ? 1 : g.lda,
                                     g.ta ? g.lda : 1});
    m->b = memory::desc({bB, g.K, g.N}, bf16,
                        memory::dims{bB > 1 ? g.strideB : g.K * g.N, g.tb ? 1 : g.ldb,
                                     g.tb ? g.ldb : 1});
    m->c = memory::desc({g.batch, g.M, g.N}, bf16,
                        memory::dims{g.batch > 1 ? g.strideC : g.M * g.N, g.ldc, 1});
    if (g.bias)
      m->bias = memory::desc({1, 1, g.N}, bf16, memory::dims{g.N, g.N, 1});
    try {
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(m->a, m->b, m->bias, m->c),
                                      st.engine);
      m->impl = pd.impl_info_str();
      m->prim = std::make_unique<dnnl::primitive>(dnnl::matmul(pd));
    } catch (const dnnl::error &) {
      m->impl = "unimplemented";
    }
    slot = m;
  }
  return *static_cast<Bf16Matmul *>(slot.get());
}

bool runBf16(dsrt_context *ctx, const HalfGemm &g) {
  Bf16Matmul &m = bf16Matmul(ctx, g);
  if (!m.prim)
    return false;
  DnnlState &st = dnnlState(ctx);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, memory(m.a, st.engine, const_cast<void *>(g.A))},
      {DNNL_ARG_WEIGHTS, memory(m.b, st.engine, const_cast<void *>(g.B))},
      {DNNL_ARG_DST, memory(m.c, st.engine, g.C)}};
  if (g.bias)
    args.insert({DNNL_ARG_BIAS, memory(m.bias, st.engine, const_cast<void *>(g.bias))});
  m.prim->execute(st.stream, args);
  st.stream.wait();
  return true;
}
#endif

/// `rows` x `cols` 16-bit values with leading dimension `ld`, as dense f32.
void widen(int32_t dtype, const uint16_t *src, int64_t rows, int64_t cols, int64_t ld,
           std::vector<float> &dst) {
  dst.resize(static_cast<size_t>(rows * cols));
  float *out = dst.data();
#pragma omp parallel for schedule(static) if (rows * cols > kParallelGrain && !omp_in_parallel())
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = halfToFloat(dtype, src[r * ld + c]);
}

/// The widening path: one product at a time in f32.
void runWidened(const char *kernel, const HalfGemm &g) {
  thread_local std::vector<float> a, b, c;
  const uint16_t *A = (const uint16_t *)g.A, *B = (const uint16_t *)g.B;
  const uint16_t *bias = (const uint16_t *)g.bias;
  uint16_t *C = (uint16_t *)g.C;
  for (int64_t bi = 0; bi < g.batch; ++bi) {
    // The stored matrices: op(A) is A^T when ta.
    widen(g.dtype, A + bi * g.strideA, g.ta ? g.K : g.M, g.ta ? g.M : g.K, g.lda, a);
    widen(g.dtype, B + bi * g.strideB, g.tb ? g.N : g.K, g.tb ? g.K : g.N, g.ldb, b);
    c.resize(static_cast<size_t>(g.M * g.N));
    sgemm(kernel, g.ta, g.tb, g.M, g.N, g.K, a.data(), g.ta ? g.M : g.K, b.data(),
          g.tb ? g.K : g.N, 0.f, c.data(), g.N);
    uint16_t *Cb = C + bi * g.strideC;
    const float *c32 = c.data(); // not `c` below: thread_local names another thread's copy
#pragma omp parallel for schedule(static) if (g.M * g.N > kParallelGrain && !omp_in_parallel())
    for (int64_t i = 0; i < g.M; ++i)
      for (int64_t j = 0; j < g.N; ++j) {
        float v = c32[i * g.N + j];
        if (bias)
          v += halfToFloat(g.dtype, bias[j]);
        Cb[i * g.ldc + j] = floatToHalf(g.dtype, v);
      }
  }
}

} // namespace

void dsrt::cpu::gemmHalf(dsrt_context *ctx, const char *kernel, const HalfGemm &g) {
  if (g.batch == 0 || g.M == 0 || g.N == 0)
    return;
#ifdef DSRT_HAVE_DNNL
  if (g.dtype == DSRT_BF16 && g.K > 0 && runBf16(ctx, g))
    return;
#else
  (void)ctx;
#endif
  runWidened(kernel, g);
}

std::string dsrt::cpu::halfProductsReport() {
#ifdef DSRT_HAVE_DNNL
  try {
    dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    memory::desc m({1, 64, 64}, memory::data_type::bf16, memory::format_tag::abc);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(m, m, m), engine);
    return "bf16 products on " + std::string(pd.impl_info_str());
  } catch (const dnnl::error &) {
    return "bf16 products widened to f32 (oneDNN has no bf16 kernel for this CPU)";
  }
#else
  return "16-bit products widened to f32";
#endif
}

void dsrt::cpu::matmulHalf(dsrt_context *ctx, const char *kernel, int32_t dtype,
                           const MatmulShape &s, dsrt_tensor *out, const dsrt_tensor *a,
                           const dsrt_tensor *b, bool ta, bool tb) {
  const uint16_t *A = (const uint16_t *)a->data, *B = (const uint16_t *)b->data;
  uint16_t *C = (uint16_t *)out->data;
  if (s.batch == 0)
    return;
  if (s.bShared && s.aContig && !ta) // one rhs for every batch: fold the batch into M
    return gemmHalf(ctx, kernel, HalfGemm{dtype, false, tb, 1, s.batch * s.M, s.N, s.K, s.lda,
                                          s.ldb, s.N, 0, 0, 0, A, B, nullptr, C});
  // Uniform batch strides: one batched product.
  int64_t oa1, ob1;
  s.offsets(s.batch > 1 ? 1 : 0, oa1, ob1);
  bool uniform = true;
  for (int64_t bi = 0; bi < s.batch && uniform; ++bi) {
    int64_t oa, ob;
    s.offsets(bi, oa, ob);
    uniform = oa == oa1 * bi && ob == ob1 * bi;
  }
  if (uniform)
    return gemmHalf(ctx, kernel, HalfGemm{dtype, ta, tb, s.batch, s.M, s.N, s.K, s.lda, s.ldb,
                                          s.N, oa1, ob1, s.M * s.N, A, B, nullptr, C});
  for (int64_t bi = 0; bi < s.batch; ++bi) {
    int64_t oa, ob;
    s.offsets(bi, oa, ob);
    gemmHalf(ctx, kernel, HalfGemm{dtype, ta, tb, 1, s.M, s.N, s.K, s.lda, s.ldb, s.N, 0, 0, 0,
                                   A + oa, B + ob, nullptr, C + bi * s.M * s.N});
  }
}

void dsrt::cpu::sumRowsHalf(int32_t dtype, const uint16_t *in, int64_t M, int64_t O,
                            uint16_t *out) {
  std::vector<float> acc(static_cast<size_t>(O), 0.f);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t o = 0; o < O; ++o)
      acc[o] += halfToFloat(dtype, in[i * O + o]);
  for (int64_t o = 0; o < O; ++o)
    out[o] = floatToHalf(dtype, acc[o]);
}

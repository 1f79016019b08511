//===- gemm_half.cpp - 16-bit GEMMs of the CPU device ----------------------===//
#include "gemm_half.h"
#include "half_rows.h"
#include "../core/half.h"
#ifdef DSRT_HAVE_DNNL
#include "dnnl_state.h"
#endif

#include <cpuid.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
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
  const int64_t oA = g.strideA0 ? g.batch0 : 1, oB = g.strideB0 ? g.batch0 : 1;
  std::string key = "matmul_bf16/" + std::to_string(g.ta) + std::to_string(g.tb) + "/" +
                    std::to_string(g.batch0) + "x" + std::to_string(g.batch) + "x" +
                    std::to_string(g.M) + "x" + std::to_string(g.N) + "x" +
                    std::to_string(g.K) + "/" + std::to_string(g.lda) + "," +
                    std::to_string(g.ldb) + "," + std::to_string(g.ldc) + "/" +
                    std::to_string(g.strideA) + "," + std::to_string(g.strideB) + "," +
                    std::to_string(g.strideC) + "/" + std::to_string(g.strideA0) + "," +
                    std::to_string(g.strideB0) + "," + std::to_string(g.strideC0) +
                    (g.bias ? "/bias" : "") +
                    (g.alpha != 1.f ? "/alpha" + std::to_string(g.alpha) : "");
  auto &slot = cpuDevice(ctx).primitives[key];
  if (!slot) {
    auto m = std::make_shared<Bf16Matmul>();
    DnnlState &st = dnnlState(ctx);
    const auto bf16 = memory::data_type::bf16;
    // [batch, rows, cols] with the given strides, led by [batch0] when there are two levels
    // (the strides of a broadcast level are never read).
    auto desc = [&](int64_t b0, int64_t s0, int64_t b, int64_t s, int64_t rows, int64_t cols,
                    int64_t rs, int64_t cs) {
      if (g.batch0 == 1)
        return memory::desc({b, rows, cols}, bf16, memory::dims{s, rs, cs});
      return memory::desc({b0, b, rows, cols}, bf16, memory::dims{s0, s, rs, cs});
    };
    m->a = desc(oA, g.strideA0, bA, bA > 1 ? g.strideA : g.M * g.K, g.M, g.K,
                g.ta ? 1 : g.lda, g.ta ? g.lda : 1);
    m->b = desc(oB, g.strideB0, bB, bB > 1 ? g.strideB : g.K * g.N, g.K, g.N,
                g.tb ? 1 : g.ldb, g.tb ? g.ldb : 1);
    m->c = desc(g.batch0, g.strideC0, g.batch, g.batch > 1 ? g.strideC : g.M * g.N, g.M, g.N,
                g.ldc, 1);
    if (g.bias)
      m->bias = desc(1, g.N, 1, g.N, 1, g.N, g.N, 1);
    dnnl::primitive_attr attr;
    if (g.alpha != 1.f) { // on the f32 sums, before the rounding to bf16
      dnnl::post_ops ops;
      ops.append_eltwise(dnnl::algorithm::eltwise_linear, g.alpha, 0.f);
      attr.set_post_ops(ops);
    }
    try {
      dnnl::matmul::primitive_desc pd(st.engine, m->a, m->b, m->bias, m->c, attr);
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

DSRT_CPU_CLONES void addRow(float *__restrict acc, const float *__restrict x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    acc[i] += x[i];
}

/// `rows` x `cols` 16-bit values with leading dimension `ld`, as dense f32; threaded when
/// `threaded` and large.
void widen(int32_t dtype, const uint16_t *src, int64_t rows, int64_t cols, int64_t ld,
           std::vector<float> &dst, bool threaded) {
  dst.resize(static_cast<size_t>(rows * cols));
  float *out = dst.data();
#pragma omp parallel for schedule(static) if (threaded && rows * cols > kParallelGrain)
  for (int64_t r = 0; r < rows; ++r)
    widenRow(dtype, out + r * cols, src + r * ld, cols);
}

/// One product of a batch in f32: both operands widened, sgemm, the bias added in f32 and the
/// result rounded once. `threaded`: this product may use every thread (else it runs on the
/// calling one, inside a region over the batch).
void widenedProduct(const char *kernel, const HalfGemm &g, int64_t bi, const float *bias,
                    bool threaded) {
  // Scratch per thread, kept between calls: the products of a batch run one per thread.
  thread_local std::vector<float> a, b, c;
  const int64_t i0 = bi / g.batch, i1 = bi % g.batch;
  const uint16_t *A = (const uint16_t *)g.A + i0 * g.strideA0 + i1 * g.strideA;
  const uint16_t *B = (const uint16_t *)g.B + i0 * g.strideB0 + i1 * g.strideB;
  uint16_t *C = (uint16_t *)g.C + i0 * g.strideC0 + i1 * g.strideC;
  // The stored matrices: op(A) is A^T when ta.
  widen(g.dtype, A, g.ta ? g.K : g.M, g.ta ? g.M : g.K, g.lda, a, threaded);
  widen(g.dtype, B, g.tb ? g.N : g.K, g.tb ? g.K : g.N, g.ldb, b, threaded);
  c.resize(static_cast<size_t>(g.M * g.N));
  sgemm(kernel, g.ta, g.tb, g.M, g.N, g.K, a.data(), g.ta ? g.M : g.K, b.data(),
        g.tb ? g.K : g.N, 0.f, c.data(), g.N, g.alpha);
  const float *c32 = c.data(); // not `c` below: thread_local names another thread's copy
  const int64_t M = g.M, N = g.N, ldc = g.ldc;
  const int32_t dtype = g.dtype;
#pragma omp parallel for schedule(static) if (threaded && M * N > kParallelGrain)
  for (int64_t i = 0; i < M; ++i)
    narrowRow(dtype, C + i * ldc, c32 + i * N, bias, N);
}

/// The widening path: each product in f32 (oneDNN's sgemm), the same numbers as a 16-bit
/// kernel that accumulates in f32, up to the order of the sums. Many small products (attention's
/// heads) run one per thread.
void runWidened(const char *kernel, const HalfGemm &g) {
  std::vector<float> bias;
  if (g.bias) {
    bias.resize(static_cast<size_t>(g.N));
    widen(g.dtype, (const uint16_t *)g.bias, 1, g.N, g.N, bias, false);
  }
  const float *bv = g.bias ? bias.data() : nullptr;
  const bool inRegion = omp_in_parallel();
  const int64_t products = g.batch0 * g.batch;
  if (!inRegion && products > 1 && productPerThread(products, g.M, g.N, g.K)) {
#pragma omp parallel for schedule(static)
    for (int64_t bi = 0; bi < products; ++bi)
      widenedProduct(kernel, g, bi, bv, false);
    return;
  }
  for (int64_t bi = 0; bi < products; ++bi)
    widenedProduct(kernel, g, bi, bv, !inRegion);
}

} // namespace

#ifdef DSRT_HAVE_DNNL
namespace {
/// Whether this process runs bf16 products on oneDNN's bf16 kernels, and why: fixed once per
/// process (the CPU's features, or DSRT_BF16_PRODUCTS), so that every step, and a resumed run
/// on the same machine, sums in the same order.
struct Bf16Route {
  bool onednn = false;
  std::string why;
};

bool intelCpu() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx))
    return false;
  return ebx == 0x756e6547 && edx == 0x49656e69 && ecx == 0x6c65746e; // "GenuineIntel"
}

bool onednnHasBf16() {
  try {
    dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    memory::desc m({1, 64, 64}, memory::data_type::bf16, memory::format_tag::abc);
    dnnl::matmul::primitive_desc pd(engine, m, m, m);
    return true;
  } catch (const dnnl::error &) {
    return false;
  }
}

Bf16Route chooseBf16Route() {
  if (const char *v = std::getenv("DSRT_BF16_PRODUCTS")) {
    const std::string s = v;
    if (s == "f32")
      return {false, "widened to f32 (DSRT_BF16_PRODUCTS=f32)"};
    if (s == "onednn") {
      if (!onednnHasBf16())
        return {false, "widened to f32 (DSRT_BF16_PRODUCTS=onednn, but oneDNN has no bf16 "
                       "kernel for this CPU)"};
      return {true, "on oneDNN's bf16 kernels (DSRT_BF16_PRODUCTS=onednn)"};
    }
    std::fprintf(stderr,
                 "dsrt: error: DSRT_BF16_PRODUCTS=%s is not a choice: set it to onednn "
                 "(oneDNN's bf16 kernels) or f32 (widened to f32), or unset it to choose by "
                 "the CPU\n",
                 v);
    endJob(2);
  }
  if (!onednnHasBf16())
    return {false, "widened to f32 (oneDNN has no bf16 kernel for this CPU)"};
  const unsigned isa = dnnl_get_effective_cpu_isa();
  if ((isa & dnnl_cpu_isa_avx512_core_amx) == dnnl_cpu_isa_avx512_core_amx)
    return {true, "on oneDNN's bf16 kernels (AMX)"};
  // Intel cores without AMX issue AVX512_BF16's dot products at half the rate of f32 FMAs
  // (a Xeon here: 82 against 163 GFLOP/s per core), so oneDNN's bf16 GEMMs ran at 0.65x the
  // f32 ones; AMD's Zen 4 runs them at least at the FMA rate.
  if (intelCpu())
    return {false, "widened to f32 (AVX512_BF16 without AMX on Intel: bf16 dot products at "
                   "half the f32 FMA rate)"};
  return {true, "on oneDNN's bf16 kernels (AVX512_BF16)"};
}

const Bf16Route &bf16Route() {
  static const Bf16Route route = chooseBf16Route();
  return route;
}
} // namespace
#endif

void dsrt::cpu::gemmHalf(dsrt_context *ctx, const char *kernel, const HalfGemm &g) {
  if (g.batch0 == 0 || g.batch == 0 || g.M == 0 || g.N == 0)
    return;
#ifdef DSRT_HAVE_DNNL
  if (g.dtype == DSRT_BF16 && g.K > 0 && bf16Route().onednn && runBf16(ctx, g))
    return;
#else
  (void)ctx;
#endif
  runWidened(kernel, g);
}

std::string dsrt::cpu::halfProductsReport() {
#ifdef DSRT_HAVE_DNNL
  const Bf16Route &r = bf16Route();
  if (!r.onednn)
    return "bf16 products " + r.why;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  memory::desc m({1, 64, 64}, memory::data_type::bf16, memory::format_tag::abc);
  dnnl::matmul::primitive_desc pd(engine, m, m, m);
  return "bf16 products " + r.why + ": " + pd.impl_info_str();
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
  // Each thread sums its own columns over every row, in row order: the same sums at any
  // thread count.
  constexpr int64_t kCols = 256;
  const int64_t blocks = (O + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (M * O > kParallelGrain && !omp_in_parallel())
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t o0 = blk * kCols, n = std::min(kCols, O - o0);
    float acc[kCols] = {}, row[kCols];
    for (int64_t i = 0; i < M; ++i) {
      widenRow(dtype, row, in + i * O + o0, n);
      addRow(acc, row, n);
    }
    narrowRow(dtype, out + o0, acc, nullptr, n);
  }
}

// The GEMM routes of the CPU device side by side, per core and per layout (built and run by
// bench/gemm_routes.sh): what chose cpu/matmul.cpp's brgemm for weight gradients and
// cpu/gemm_half.cpp's route for bf16 products.
//   1. The peak of one core: 12 independent chains of f32 FMAs, and of VDPBF16PS (AVX512_BF16).
//   2. The GPT d512 step's product shapes: oneDNN's dnnl_sgemm, its f32 matmul primitive, and
//      its bf16 matmul primitive (where the CPU has one), GFLOP/s of the best of 5 calls; and
//      MKL's cblas_sgemm (what PyTorch's wheels run) when GEMM_ROUTES_MKL names a libmkl_rt.
#include <oneapi/dnnl/dnnl.hpp>

#include <dlfcn.h>
#include <immintrin.h>
#include <omp.h>

#include <cstdlib>
#include <string>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

using namespace dnnl;

/// MKL's cblas_sgemm, from the library GEMM_ROUTES_MKL names (null without one).
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float *, int,
                            const float *, int, float, float *, int);
static CblasSgemm mklSgemm() {
  const char *path = std::getenv("GEMM_ROUTES_MKL");
  void *lib = path ? dlopen(path, RTLD_NOW | RTLD_GLOBAL) : nullptr;
  if (path && !lib)
    std::fprintf(stderr, "GEMM_ROUTES_MKL: %s\n", dlerror());
  return lib ? (CblasSgemm)dlsym(lib, "cblas_sgemm") : nullptr;
}

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Keeps every chain live (else the compiler drops the ones nothing reads).
__attribute__((target("avx512f"))) static void sink(const __m512 *acc) {
  static volatile float out;
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i)
    s = _mm512_add_ps(s, acc[i]);
  out = _mm512_reduce_add_ps(s);
}

__attribute__((target("avx512f"))) static double fmaPeak() {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i)
    acc[i] = _mm512_set1_ps(float(i));
  const __m512 x = _mm512_set1_ps(1.0001f), y = _mm512_set1_ps(0.9999f);
  const long n = 20000000;
  double t = now();
  for (long k = 0; k < n; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i)
      acc[i] = _mm512_fmadd_ps(acc[i], x, y);
    __asm__ volatile("" ::"v"(acc[0]), "v"(acc[5]), "v"(acc[11]));
  }
  const double rate = n * 12.0 * 32 / (now() - t) / 1e9;
  sink(acc);
  return rate;
}

__attribute__((target("avx512f,avx512bf16"))) static double dpbf16Peak() {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i)
    acc[i] = _mm512_set1_ps(float(i));
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80);
  const long n = 20000000;
  double t = now();
  for (long k = 0; k < n; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i)
      acc[i] = _mm512_dpbf16_ps(acc[i], a, a);
    __asm__ volatile("" ::"v"(acc[0]), "v"(acc[5]), "v"(acc[11]));
  }
  const double rate = n * 12.0 * 64 / (now() - t) / 1e9;
  sink(acc);
  return rate;
}

template <class F> static double best(F f) {
  double b = 1e30;
  for (int r = 0; r < 5; ++r) {
    double t = now();
    f();
    b = std::min(b, now() - t);
  }
  return b;
}

int main() {
  if (__builtin_cpu_supports("avx512f"))
    std::printf("one core: f32 FMA %.0f GFLOP/s", fmaPeak());
  if (__builtin_cpu_supports("avx512bf16"))
    std::printf(", VDPBF16PS %.0f GFLOP/s", dpbf16Peak());
  std::printf("\n");
  struct Shape {
    char ta, tb;
    long M, N, K;
    const char *what;
  } shapes[] = {{'N', 'T', 2048, 1536, 512, "c_attn forward"},
                {'N', 'T', 2048, 2048, 512, "c_fc forward"},
                {'N', 'T', 2048, 512, 2048, "mlp c_proj forward"},
                {'N', 'N', 2048, 512, 2048, "c_fc dx"},
                {'T', 'N', 2048, 512, 2048, "c_fc dW"},
                {'T', 'N', 1536, 512, 2048, "c_attn dW"},
                {'T', 'N', 512, 512, 2048, "attn c_proj dW"},
                {'T', 'N', 512, 2048, 2048, "mlp c_proj dW"}};
  engine eng(engine::kind::cpu, 0);
  stream st(eng);
  const CblasSgemm mkl = mklSgemm();
  std::printf("%-6s %-22s %-18s %8s %8s %8s %8s   GFLOP/s at %d thread(s)\n", "layout",
              "M N K", "product", "sgemm", "f32 mm", "bf16 mm", mkl ? "MKL" : "",
              omp_get_max_threads());
  for (const Shape &s : shapes) {
    std::vector<float> A(s.M * s.K, 0.5f), B(s.K * s.N, 0.25f), C(s.M * s.N);
    std::vector<uint16_t> Ah(A.size(), 0x3f00), Bh(B.size(), 0x3e80), Ch(C.size());
    const long lda = s.ta == 'T' ? s.M : s.K, ldb = s.tb == 'T' ? s.K : s.N;
    const double flop = 2.0 * s.M * s.N * s.K;
    double sg = best([&] {
      dnnl_sgemm(s.ta, s.tb, s.M, s.N, s.K, 1.f, A.data(), lda, B.data(), ldb, 0.f, C.data(),
                 s.N);
    });
    auto rate = [&](memory::data_type dt, void *a, void *b, void *c) {
      memory::desc ad({s.M, s.K}, dt, s.ta == 'T' ? memory::dims{1, lda} : memory::dims{lda, 1});
      memory::desc bd({s.K, s.N}, dt, s.tb == 'T' ? memory::dims{1, ldb} : memory::dims{ldb, 1});
      memory::desc cd({s.M, s.N}, dt, memory::dims{s.N, 1});
      try {
        matmul mm(matmul::primitive_desc(eng, ad, bd, cd));
        memory ma(ad, eng, a), mb(bd, eng, b), mc(cd, eng, c);
        return flop / best([&] {
                 mm.execute(st, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
                 st.wait();
               }) / 1e9;
      } catch (const dnnl::error &) {
        return 0.0;
      }
    };
    // MKL's row-major cblas_sgemm (101), transposes 112, plain 111.
    const double mk = mkl ? flop / best([&] {
      mkl(101, s.ta == 'T' ? 112 : 111, s.tb == 'T' ? 112 : 111, s.M, s.N, s.K, 1.f, A.data(),
          lda, B.data(), ldb, 0.f, C.data(), s.N);
    }) / 1e9 : 0.0;
    double f32 = rate(memory::data_type::f32, A.data(), B.data(), C.data());
    double bf16 = rate(memory::data_type::bf16, Ah.data(), Bh.data(), Ch.data());
    char mnk[32];
    std::snprintf(mnk, sizeof mnk, "%ld %ld %ld", s.M, s.N, s.K);
    std::printf("%c%c     %-22s %-18s %8.0f %8.0f %8s %8s\n", s.ta, s.tb, mnk, s.what,
                flop / sg / 1e9, f32, bf16 > 0 ? std::to_string((int)bf16).c_str() : "-",
                mkl ? std::to_string((int)mk).c_str() : "");
  }
}

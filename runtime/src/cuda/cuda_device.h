//===- cuda_device.h - the CUDA device and its kernels' declarations ---------===//
//
// The device behind --device cuda: a cudaMalloc'd arena (the core's budget and exact count
// over it), three streams (compute; collectives; host and NVMe copies) ordered by events,
// cuBLAS for GEMM (fp32 without TF32), and CUDA kernels whose element arithmetic is
// kernels/scalar_ops.h, shared with the CPU backend. Built into libdsrt_cuda.so, which
// libdsrt.so opens only when this device is asked for.
//
#ifndef DSRT_CUDA_CUDA_DEVICE_H
#define DSRT_CUDA_CUDA_DEVICE_H

#include "../core/internal.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <mutex>

namespace dsrt {

struct CudnnAttention;

struct CudaDevice final : Device {
  const char *name() const override { return "cuda"; }
  bool hostAddressable() const override { return false; }
  void *allocate(size_t bytes) override;
  void deallocate(void *block) override;
  const void *constant(const void *host, size_t bytes) override;
  void toHost(void *host, const void *src, size_t bytes) override;
  void fromHost(void *dst, const void *host, size_t bytes) override;
  void copy(void *dst, const void *src, size_t bytes) override;
  void zero(void *dst, size_t bytes) override;
  void record(dsrt_event *event) override;
  bool query(dsrt_event *event) override;
  void synchronize(dsrt_event *event) override;
  void streamWait(dsrt_event *event) override;
  void destroy(dsrt_event *event) override;
  void synchronize() override;
  void *collectivesStream() override { return collectives; }
  int ordinal() const override { return gpu; }
  ~CudaDevice() override;

  int gpu = 0; ///< this rank's GPU: the local rank modulo the GPUs visible
  cudaStream_t compute = nullptr;     ///< kernels, in program order
  cudaStream_t collectives = nullptr; ///< the nccl channel's stream
  cudaStream_t transfers = nullptr;   ///< host (pinned) and NVMe copies for offload
  cublasHandle_t blas = nullptr;      ///< bound to `compute`
  CudnnAttention *cudnn = nullptr;    ///< cuDNN's handle and attention graphs, on first use
  std::mutex constantsMutex;
  std::map<const void *, void *> constants; ///< host constant -> its device copy

  /// Kernels report bad data (an index out of range) here: {kernel code, value}, checked when
  /// the host next waits for the stream (checkErrors), where the job ends naming it.
  int64_t *errors = nullptr;
  void checkErrors();
  /// Device working memory of at least `bytes` for the kernel being enqueued (statistics,
  /// partial sums), outside the arena like the CPU kernels' scratch vectors; valid until the
  /// next call.
  void *scratch(size_t bytes);
  void *scratchBlock = nullptr;
  size_t scratchBytes = 0;
};

namespace cuda {

/// Ends the job naming the CUDA call that failed and its error.
void check(cudaError_t e, const char *what);
void checkBlas(cublasStatus_t s, const char *what);
inline CudaDevice &device(dsrt_context *ctx) { return static_cast<CudaDevice &>(*ctx->device); }
inline cudaStream_t stream(dsrt_context *ctx) { return device(ctx).compute; }

constexpr int kThreads = 256;
/// Blocks for a grid-stride loop over n elements.
inline unsigned blocksFor(int64_t n) {
  return (unsigned)std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, 1 << 16));
}
/// After a launch: ends the job on a launch error (a bad configuration), naming the kernel.
void launched(const char *kernel);

/// Codes of the errors kernels report (CudaDevice::errors).
enum ErrorCode : int64_t {
  kNoError = 0,
  kIndexOutOfRange = 1,
  kTargetOutOfRange = 2,
  kSlotOutOfRange = 3,   ///< cache_write: the slot
  kPageOutOfRange = 4,   ///< paged_attention: the page
  kLengthOutOfRange = 5, ///< paged_attention: the sequence whose lengths do not fit
  kSampleParameters = 6, ///< sample: the sequence whose parameters are out of range
};

/// Up to three operands broadcast to an output, as element strides per output dim (from the
/// core's Broadcast, coalesced), passed to kernels by value.
struct Strided {
  int nd = 0;
  int nin = 0;
  bool small = false; ///< every element index fits 32 bits: cheaper divisions
  int64_t dims[DSRT_MAX_RANK] = {};
  int64_t strides[3][DSRT_MAX_RANK] = {};
};
Strided strided(const char *kernel, const dsrt_tensor *out, const dsrt_tensor *const *ins,
                int nin);

#define DSRT_KERNEL(name, params, args) void name params;
#include "../device/kernels.def"
#undef DSRT_KERNEL

} // namespace cuda
} // namespace dsrt

#ifdef __CUDACC__
namespace dsrt::cuda {
/// Element offsets of output element i in each of the NIN operands. The operand count is a
/// constant and the dimension loop unrolled, so that the offsets stay in registers (a loop
/// bound read at run time put them in local memory); the outermost dimension's index is what
/// the inner ones leave (no division), and indices below 2^32 divide in 32 bits (64-bit
/// division is a long software sequence on the GPU).
template <int NIN, class I>
__device__ __forceinline__ void offsetsIn(const Strided &s, I i, int64_t (&off)[NIN]) {
#pragma unroll
  for (int k = 0; k < NIN; ++k)
    off[k] = 0;
#pragma unroll
  for (int d = DSRT_MAX_RANK - 1; d > 0; --d) {
    if (d >= s.nd)
      continue;
    I c = i % (I)s.dims[d];
    i /= (I)s.dims[d];
#pragma unroll
    for (int k = 0; k < NIN; ++k)
      off[k] += (int64_t)c * s.strides[k][d];
  }
  if (s.nd > 0) {
#pragma unroll
    for (int k = 0; k < NIN; ++k)
      off[k] += (int64_t)i * s.strides[k][0];
  }
}
template <int NIN>
__device__ __forceinline__ void offsetsOf(const Strided &s, int64_t i, int64_t (&off)[NIN]) {
  if (s.small)
    offsetsIn<NIN, uint32_t>(s, (uint32_t)i, off);
  else
    offsetsIn<NIN, int64_t>(s, i, off);
}
/// Records the first error of the stream (CudaDevice::errors).
__device__ __forceinline__ void report(int64_t *errors, int64_t code, int64_t value) {
  if (atomicCAS(reinterpret_cast<unsigned long long *>(errors), 0ull,
                static_cast<unsigned long long>(code)) == 0ull)
    errors[1] = value;
}

/// The reduction of v over the block (blockDim.x a multiple of 32, at most 1024); every
/// thread gets the result.
template <class T, class Op> __device__ T blockReduce(T v, Op op, T identity) {
  __shared__ T warps[32];
  __shared__ T result;
  for (int o = 16; o > 0; o >>= 1)
    v = op(v, __shfl_down_sync(0xffffffffu, v, o));
  int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  __syncthreads(); // warps[] may still be read by a previous call
  if (lane == 0)
    warps[wid] = v;
  __syncthreads();
  if (wid == 0) {
    v = lane < (int)((blockDim.x + 31) / 32) ? warps[lane] : identity;
    for (int o = 16; o > 0; o >>= 1)
      v = op(v, __shfl_down_sync(0xffffffffu, v, o));
    if (lane == 0)
      result = v;
  }
  __syncthreads();
  return result;
}
struct Sum {
  template <class T> __device__ T operator()(T a, T b) const { return a + b; }
};
/// max with NaN propagating (a NaN wins), as the CPU's loops.
struct MaxNan {
  template <class T> __device__ T operator()(T a, T b) const {
    return (b > a || b != b) ? b : a;
  }
};

#define DSRT_GRID_STRIDE(i, n)                                                                 \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                    \
       i += (int64_t)gridDim.x * blockDim.x)
} // namespace dsrt::cuda
#endif

#endif // DSRT_CUDA_CUDA_DEVICE_H

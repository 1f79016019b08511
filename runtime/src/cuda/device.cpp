//===- device.cpp - the CUDA device: memory, copies, streams, events ----------===//
#include "cuda_device.h"
#include "cudnn_attention.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#ifndef DSRT_CUDA_ARCHS
#define DSRT_CUDA_ARCHS "?"
#endif

namespace dsrt {

namespace cuda {
void check(cudaError_t e, const char *what) {
  if (e != cudaSuccess)
    fail("cuda", "%s failed: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}
void checkBlas(cublasStatus_t s, const char *what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    fail("cuda", "%s failed: cuBLAS status %d", what, (int)s);
}
void launched(const char *kernel) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    fail(kernel, "kernel launch failed: %s", cudaGetErrorString(e));
}
Strided strided(const char *kernel, const dsrt_tensor *out, const dsrt_tensor *const *ins,
                int nin) {
  Broadcast b(kernel, out, ins, nin);
  Strided s;
  s.nd = b.nd;
  s.nin = nin;
  s.small = out->numel <= (int64_t)UINT32_MAX;
  for (int d = 0; d < b.nd; ++d) {
    s.dims[d] = b.dims[d];
    for (int k = 0; k < nin; ++k)
      s.strides[k][d] = b.strides[k][d];
  }
  return s;
}
} // namespace cuda

using cuda::check;

void CudaDevice::checkErrors() {
  int64_t e[2] = {0, 0};
  check(cudaMemcpy(e, errors, sizeof e, cudaMemcpyDeviceToHost), "cudaMemcpy (kernel errors)");
  if (e[0] == cuda::kIndexOutOfRange)
    fail("embedding", "index %lld out of range", (long long)e[1]);
  if (e[0] == cuda::kTargetOutOfRange)
    fail("cross_entropy", "target %lld out of range", (long long)e[1]);
  if (e[0] == cuda::kSlotOutOfRange)
    fail("cache_write", "slot %lld is past the cache", (long long)e[1]);
  if (e[0] == cuda::kPageOutOfRange)
    fail("paged_attention", "page %lld is not one of the cache's pages", (long long)e[1]);
  if (e[0] == cuda::kLengthOutOfRange)
    fail("paged_attention",
         "sequence %lld's lengths do not fit (new tokens 0..T, at most its cached positions, "
         "those within its pages)",
         (long long)e[1]);
  if (e[0] == cuda::kSampleParameters)
    fail("sample",
         "sequence %lld asks for a temperature, top_k or top_p out of range (a temperature >= 0, "
         "a top_k >= 0, a top_p in (0, 1])",
         (long long)e[1]);
  if (e[0])
    fail("cuda", "kernel error %lld (value %lld)", (long long)e[0], (long long)e[1]);
}

void *CudaDevice::scratch(size_t bytes) {
  if (bytes > scratchBytes) {
    check(cudaStreamSynchronize(compute), "cudaStreamSynchronize");
    if (scratchBlock)
      check(cudaFree(scratchBlock), "cudaFree (scratch)");
    scratchBytes = std::max(bytes, scratchBytes * 2);
    check(cudaMalloc(&scratchBlock, scratchBytes), "cudaMalloc (kernel scratch)");
  }
  return scratchBlock;
}

CudaDevice::~CudaDevice() {
  cudaStreamSynchronize(compute);
  if (errors)
    cudaFree(errors);
  if (scratchBlock)
    cudaFree(scratchBlock);
  for (auto &c : constants)
    cudaFree(c.second);
  cuda::release(cudnn);
  if (blas)
    cublasDestroy(blas);
  for (cudaStream_t s : {compute, collectives, transfers})
    if (s)
      cudaStreamDestroy(s);
}

void *CudaDevice::allocate(size_t bytes) {
  void *p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    cudaGetLastError(); // clear the sticky-free error so that the caller may retry
    return nullptr;
  }
  return p;
}
void CudaDevice::deallocate(void *block) {
  // The arena frees in compute-stream order; cudaFree waits for the device.
  check(cudaFree(block), "cudaFree");
}
const void *CudaDevice::constant(const void *host, size_t bytes) {
  std::lock_guard<std::mutex> lock(constantsMutex);
  auto it = constants.find(host);
  if (it != constants.end())
    return it->second;
  void *d = nullptr;
  check(cudaMalloc(&d, std::max<size_t>(bytes, 1)), "cudaMalloc (a constant)");
  check(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (a constant)");
  constants.emplace(host, d);
  return d;
}
void CudaDevice::toHost(void *host, const void *src, size_t bytes) {
  if (!bytes)
    return;
  check(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, compute), "cudaMemcpyAsync D2H");
  check(cudaStreamSynchronize(compute), "cudaStreamSynchronize");
  checkErrors();
}
void CudaDevice::fromHost(void *dst, const void *host, size_t bytes) {
  if (!bytes)
    return;
  // From pageable memory the copy is staged before the call returns: `host` may be reused.
  check(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, compute), "cudaMemcpyAsync H2D");
}
void CudaDevice::copy(void *dst, const void *src, size_t bytes) {
  if (bytes && dst != src)
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, compute),
          "cudaMemcpyAsync D2D");
}
void CudaDevice::zero(void *dst, size_t bytes) {
  if (bytes)
    check(cudaMemsetAsync(dst, 0, bytes, compute), "cudaMemsetAsync");
}
void CudaDevice::record(dsrt_event *event) {
  cudaEvent_t e;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventRecord(e, compute), "cudaEventRecord");
  event->native = e;
}
bool CudaDevice::query(dsrt_event *event) {
  cudaError_t r = cudaEventQuery(static_cast<cudaEvent_t>(event->native));
  if (r == cudaErrorNotReady)
    return false;
  check(r, "cudaEventQuery");
  return true;
}
void CudaDevice::synchronize(dsrt_event *event) {
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(event->native)), "cudaEventSynchronize");
}
void CudaDevice::streamWait(dsrt_event *event) {
  check(cudaStreamWaitEvent(compute, static_cast<cudaEvent_t>(event->native), 0),
        "cudaStreamWaitEvent");
}
void CudaDevice::destroy(dsrt_event *event) {
  check(cudaEventDestroy(static_cast<cudaEvent_t>(event->native)), "cudaEventDestroy");
  event->native = nullptr;
}
void CudaDevice::synchronize() {
  check(cudaStreamSynchronize(compute), "cudaStreamSynchronize");
  checkErrors();
}

namespace {
void setWhy(char *why, size_t cap, const std::string &s) {
  if (!why || !cap)
    return;
  size_t n = std::min(cap - 1, s.size());
  std::memcpy(why, s.data(), n);
  why[n] = '\0';
}

/// "" when a GPU is usable, else why not.
std::string unusable(int &count) {
  count = 0;
  int driver = 0;
  cudaDriverGetVersion(&driver);
  if (driver == 0)
    return "no NVIDIA driver (libcuda.so.1 not found)";
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    count = 0;
    return std::string("no usable GPU (cudaGetDeviceCount: ") + cudaGetErrorString(e) + ")";
  }
  if (count == 0)
    return "no GPU visible (check CUDA_VISIBLE_DEVICES)";
  return "";
}

std::string versionText(int v) { // 13000 -> "13.0"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

/// cuDNN's version when its library loads, else "" with `why`.
std::string cudnnVersion(std::string &why) {
  void *h = cuda::cudnnLibrary(why);
  if (!h)
    return "";
  auto get = reinterpret_cast<size_t (*)()>(dlsym(h, "cudnnGetVersion"));
  if (!get) {
    why = "libcudnn.so.9 has no cudnnGetVersion";
    return "";
  }
  size_t v = get(); // 9.12.0 is 91200
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
         std::to_string(v % 100);
}
} // namespace

} // namespace dsrt

extern "C" dsrt::Device *dsrt_cuda_create(dsrt_context *, char *why, size_t cap) {
  using namespace dsrt;
  int count = 0;
  std::string bad = unusable(count);
  if (!bad.empty()) {
    setWhy(why, cap, bad);
    return nullptr;
  }
  auto *d = new CudaDevice();
  int localRank = 0; // under mpirun or srun, each rank of a machine takes its own GPU
  for (const char *v : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"})
    if (const char *s = std::getenv(v)) {
      localRank = std::atoi(s);
      break;
    }
  d->gpu = localRank % count;
  cudaSetDevice(d->gpu);
  if (cudaStreamCreateWithFlags(&d->compute, cudaStreamNonBlocking) != cudaSuccess ||
      cudaStreamCreateWithFlags(&d->collectives, cudaStreamNonBlocking) != cudaSuccess ||
      cudaStreamCreateWithFlags(&d->transfers, cudaStreamNonBlocking) != cudaSuccess) {
    setWhy(why, cap, std::string("cannot create streams: ") + cudaGetErrorString(cudaGetLastError()));
    delete d;
    return nullptr;
  }
  if (cublasCreate(&d->blas) != CUBLAS_STATUS_SUCCESS) {
    setWhy(why, cap, "cuBLAS could not start (cublasCreate)");
    delete d;
    return nullptr;
  }
  cublasSetStream(d->blas, d->compute);
  if (cudaMalloc(&d->errors, 2 * sizeof(int64_t)) != cudaSuccess ||
      cudaMemset(d->errors, 0, 2 * sizeof(int64_t)) != cudaSuccess) {
    setWhy(why, cap, "cannot allocate 16 bytes of GPU memory");
    delete d;
    return nullptr;
  }
  // fp32 GEMMs stay fp32 (no TF32), as PyTorch's default allow_tf32 = False for matmul.
  cublasSetMathMode(d->blas, CUBLAS_DEFAULT_MATH);
#define DSRT_KERNEL(name, params, args) d->kernels.name = &cuda::name;
#include "../device/kernels.def"
#undef DSRT_KERNEL
  return d;
}

extern "C" size_t dsrt_cuda_report(char *buf, size_t cap) {
  using namespace dsrt;
  int runtime = 0, driver = 0, count = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  int blasMajor = 0, blasMinor = 0, blasPatch = 0;
  cublasGetProperty(MAJOR_VERSION, &blasMajor);
  cublasGetProperty(MINOR_VERSION, &blasMinor);
  cublasGetProperty(PATCH_LEVEL, &blasPatch);
  std::string bad = unusable(count);
  std::string line = "cuda: built yes; " DSRT_CUDA_ARCHS "; CUDA runtime " + versionText(runtime) +
                     ", driver " + (driver ? versionText(driver) : std::string("none")) +
                     ", cuBLAS " + std::to_string(blasMajor) + "." + std::to_string(blasMinor) +
                     "." + std::to_string(blasPatch);
  std::string noDnn, dnn = cudnnVersion(noDnn);
  line += dnn.empty() ? ", cuDNN not found (" + noDnn + "; attention runs ds's kernels)"
                       : ", cuDNN " + dnn;
  line += "; attention: " + cuda::cudnnAttentionBuild();
  line += "; ";
  if (bad.empty()) {
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    line += "usable (" + std::to_string(count) + " GPU" + (count > 1 ? "s" : "") + ", " +
            prop.name + ", sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ")\n";
  } else {
    line += "unavailable: " + bad + "\n";
  }
  if (buf && cap) {
    size_t n = std::min(cap - 1, line.size());
    std::memcpy(buf, line.data(), n);
    buf[n] = '\0';
  }
  return line.size();
}

//===- cudnn_library.cpp - cuDNN, opened at run time --------------------------===//
//
// The device does not link cuDNN: it is opened when first asked for (ds-report, the fused
// attention), so that a runtime built with CUDA starts where cuDNN is missing.
//
#include "cudnn_attention.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <mutex>

void *dsrt::cuda::cudnnLibrary(std::string &why) {
  static std::once_flag once;
  static void *lib = nullptr;
  static std::string missing;
  std::call_once(once, [] {
    // Global: the library's engine parts (libcudnn_engines_*.so.9) resolve against it.
    lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_GLOBAL);
    Dl_info info;
    if (!lib && dladdr(reinterpret_cast<void *>(&cudaRuntimeGetVersion), &info) &&
        info.dli_fname) {
      std::string dir = info.dli_fname;
      dir = dir.substr(0, dir.rfind('/') + 1);
      lib = dlopen((dir + "libcudnn.so.9").c_str(), RTLD_NOW | RTLD_GLOBAL);
    }
    if (!lib)
      missing = "libcudnn.so.9 not found";
  });
  why = missing;
  return lib;
}

//===- report.cpp - what this runtime was built with, and what works here -----===//
//
// dsrt_report backs ds-report (DeepSpeed's ds_report): one line per device and channel with
// "built", the libraries' versions and "usable" or "unavailable: REASON".
//
#include "../comm/channel.h"
#include "../core/internal.h"
#include "../cpu/gemm_half.h"

#ifdef DSRT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#include <cstring>
#include <string>

extern "C" size_t dsrt_report(char *buf, size_t cap) {
  std::string out;
#ifdef DSRT_HAVE_DNNL
  const dnnl_version_t *v = dnnl_version();
  out += "cpu: built yes; oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) +
         "." + std::to_string(v->patch) + "; " + dsrt::cpu::halfProductsReport() + "; usable\n";
#else
  out += "cpu: built yes; without oneDNN (plain loops: slow GEMM and convolution); " +
         dsrt::cpu::halfProductsReport() + "; usable\n";
#endif
  out += "loopback: built yes; usable (one rank)\n";
  std::string mpi = dsrt::mpiLibraryVersion();
  out += mpi.empty() ? "mpi: built no; unavailable: built without MPI (install libopenmpi-dev)\n"
                     : "mpi: built yes; " + mpi + "; usable under mpirun or srun\n";
  out += dsrt::pluginReport("cuda");
  out += dsrt::pluginReport("nccl");
  if (buf && cap) {
    size_t n = std::min(cap - 1, out.size());
    std::memcpy(buf, out.data(), n);
    buf[n] = '\0';
  }
  return out.size();
}

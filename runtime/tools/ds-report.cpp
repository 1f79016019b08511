//===- ds-report.cpp - the runtime's devices and channels, built and usable ---===//
//
// Like DeepSpeed's ds_report: one line per device (cpu, cuda) and channel (loopback, mpi,
// nccl): whether it was built, with which libraries and GPU architectures, and whether it is
// usable on this machine or why not. Exit code 0 either way.
//
#include "dsrt/dsrt.h"

#include <cstdio>
#include <cstring>
#include <string>

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf("usage: ds-report\n\nPrints one line per device and channel of the ds "
                  "runtime: built yes/no, library versions, GPU architectures, and 'usable' or "
                  "'unavailable: REASON' on this machine.\n");
      return 0;
    }
    std::fprintf(stderr, "ds-report: unknown argument '%s' (it takes none; see --help)\n",
                 argv[i]);
    return 2;
  }
  std::string text(dsrt_report(nullptr, 0) + 1, '\0');
  dsrt_report(text.data(), text.size());
  std::printf("ds runtime report\n%s", text.c_str());
  std::printf("default device: %s\n", dsrt_default_device());
  return 0;
}

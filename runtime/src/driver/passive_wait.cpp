//===- passive_wait.cpp - OMP_WAIT_POLICY=PASSIVE before OpenMP starts ----===//
#include "dsrt/dsrt.h"

#include <cstdlib>
#include <unistd.h>

// Spinning OpenMP workers steal the cores of other ranks and of the host code between kernels;
// the policy is read once when the OpenMP runtime loads, so it has to be in the environment
// of a fresh process image.
extern "C" void dsrt_ensure_passive_wait(char **argv) {
  const char *policy = std::getenv("OMP_WAIT_POLICY");
  if (!argv || !argv[0] || (policy && *policy))
    return;
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0)
    return;
  execv("/proc/self/exe", argv);
  // exec failed (no /proc): carry on with the default policy rather than not running.
}

//===- main.cpp - main() of executables made by ds-compile -------------------===//
//
// Linked with the object that ds-compile emits, which defines the step's entry points and the
// path of the initial weights recorded at compile time.
//
#include "dsrt/dsrt.h"

#include <cstring>
#include <vector>

extern "C" {
const char *ds_metadata(void);
void ds_init_slots(dsrt_context *ctx);
dsrt_tensor *ds_micro_step(dsrt_context *ctx, dsrt_tensor **inputs);
void ds_optimizer_step(dsrt_context *ctx, dsrt_tensor *lr, dsrt_tensor *step, dsrt_tensor *beta1,
                       dsrt_tensor *aux_lr);
extern const char ds_default_weights[];
}

int main(int argc, char **argv) {
  dsrt_ensure_passive_wait(argv);
  std::vector<char *> args(argv, argv + argc);
  bool hasWeights = false;
  for (int i = 1; i < argc; ++i)
    hasWeights |= std::strcmp(argv[i], "--weights") == 0 ||
                  std::strncmp(argv[i], "--weights=", 10) == 0;
  static char weightsFlag[] = "--weights";
  if (!hasWeights && ds_default_weights[0]) {
    args.push_back(weightsFlag);
    args.push_back(const_cast<char *>(ds_default_weights));
  }
  args.push_back(nullptr);
  dsrt_program program{ds_metadata(), ds_init_slots, ds_micro_step, ds_optimizer_step};
  return dsrt_driver_main(static_cast<int>(args.size()) - 1, args.data(), &program);
}

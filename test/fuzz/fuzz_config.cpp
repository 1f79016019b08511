//===- fuzz_config.cpp - the DeepSpeed config parser on arbitrary text ----------===//
#include "ds/Config/DeepSpeedConfig.h"

#include "llvm/Support/Error.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  // The first byte picks the world size the batch keys are checked against.
  int64_t world = 1 + data[0] % 8;
  llvm::StringRef text(reinterpret_cast<const char *>(data + 1), size - 1);
  llvm::Expected<ds::DeepSpeedConfig> cfg = ds::parseDeepSpeedConfig(text, world);
  if (!cfg) {
    llvm::consumeError(cfg.takeError());
    return 0;
  }
  // What the compiler relies on: DeepSpeed's batch identity.
  int64_t product;
  if (__builtin_mul_overflow(cfg->microBatchSize, cfg->gradientAccumulationSteps, &product) ||
      __builtin_mul_overflow(product, world, &product) || cfg->trainBatchSize != product)
    __builtin_trap();
  return 0;
}

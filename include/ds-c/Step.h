/*===- ds-c/Step.h - a model to a compiled training step, in-process -------===*\
|*                                                                            *|
|* What ds-opt --config and ds-run's JIT do, as one call: import a PyTorch   *|
|* model (.pt2 or .pt), build its training step from a DeepSpeed config for  *|
|* this job's ranks, lower it to the runtime and JIT-compile it. The program *|
|* it returns is what dsrt_session_open (dsrt/dsrt.h) trains. Link ds::CAPI. *|
\*===----------------------------------------------------------------------===*/
#ifndef DS_C_STEP_H
#define DS_C_STEP_H

#include "dsrt/dsrt.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct DsStep DsStep;

/* Compiles the training step of the model at `modelPath` (its forward's arguments and their
 * per-rank micro-batch types in `inputs`, as ds-opt's --input takes them:
 * "input_ids=tensor<8x128xi64>"; `lossIndex` < 0: the last scalar result is the loss) with the
 * DeepSpeed config at `configPath`, for a job of `ranks` ranks (its data-parallel size is
 * ranks / (tp x pp x sp); 0: from the config's batch keys, as ds-opt without --world-size).
 * The model's state_dict is written to `weightsPath` (safetensors). `runtimeLibrary` is the
 * path of the loaded libdsrt.so whose functions the step calls (NULL: the process's global
 * symbols). What was compiled (ds-opt's summary and the config's warnings) is kept for
 * dsStepSummary. On failure returns NULL with every diagnostic, one per line, in `err`. */
DsStep *dsStepCompile(const char *modelPath, intptr_t numInputs, const char *const *inputs,
                      int64_t lossIndex, const char *configPath, int64_t ranks,
                      const char *weightsPath, const char *runtimeLibrary, char *err,
                      size_t cap);
/* The compiled entry points and descriptor (valid until dsStepDestroy). */
const dsrt_program *dsStepProgram(DsStep *step);
/* What ds-opt --config prints to stderr of the step: the mesh, batch, ZeRO stage, precision,
 * optimizer and the tensor-parallel split, after the config's warnings. */
const char *dsStepSummary(DsStep *step);
void dsStepDestroy(DsStep *step);

#ifdef __cplusplus
}
#endif

#endif /* DS_C_STEP_H */

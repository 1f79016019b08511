//===- cudnn_attention.h - cuDNN's fused attention behind ds.attention --------===//
//
// On the GPU, ds.attention and its gradient run cuDNN's fused scaled dot-product attention
// (the cuDNN frontend's graph API: flash attention in bf16/f16, f32 statistics) wherever cuDNN
// takes the case, and ds's own kernels (attention.cu) elsewhere: f32, a bool mask, the strictly
// causal blocks of a ring, head widths or shapes cuDNN refuses. cuDNN is opened at run time
// (libcudnn.so.9, by name or beside cudart): a runtime built with the frontend starts without
// it. DSRT_CUDA_ATTENTION chooses: `cudnn` (a case cuDNN refuses ends the job, naming why), `ds`
// (ds's kernels only), unset (cuDNN where it takes the case).
//
#ifndef DSRT_CUDA_CUDNN_ATTENTION_H
#define DSRT_CUDA_CUDNN_ATTENTION_H

#include "../kernels/checks.h"

#include <string>

namespace dsrt {
struct CudaDevice;
struct CudnnAttention; ///< a device's cuDNN handle and its built graphs, by case

namespace cuda {

/// cuDNN's library, opened once (by name, else beside the loaded cudart), or null with `why`.
void *cudnnLibrary(std::string &why);

/// Runs cuDNN's fused attention forward for the case `s` and returns true; returns false with
/// `why` when cuDNN does not take the case (nothing is written then).
bool cudnnAttention(dsrt_context *ctx, const checks::AttentionShape &s, dsrt_tensor *out,
                    dsrt_tensor *lse, const dsrt_tensor *q, const dsrt_tensor *k,
                    const dsrt_tensor *v, const dsrt_tensor *mask, double scale, int32_t causal,
                    std::string &why);
/// The same for the gradient: dq, dk and dv from the forward's operands, out, lse and dout.
bool cudnnAttentionGrad(dsrt_context *ctx, const checks::AttentionShape &s, dsrt_tensor *dq,
                        dsrt_tensor *dk, dsrt_tensor *dv, const dsrt_tensor *q,
                        const dsrt_tensor *k, const dsrt_tensor *v, const dsrt_tensor *mask,
                        const dsrt_tensor *out, const dsrt_tensor *lse, const dsrt_tensor *dout,
                        double scale, int32_t causal, std::string &why);
void release(CudnnAttention *state);

/// How ds-report names the route: the frontend's version, or why the runtime has none.
std::string cudnnAttentionBuild();

} // namespace cuda
} // namespace dsrt

#endif // DSRT_CUDA_CUDNN_ATTENTION_H

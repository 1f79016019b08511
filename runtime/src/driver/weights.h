// Weights in and out of the slots: the initial weights (into parameters, their fp32 masters
// and stage-3 shards), --save-weights (the fp32 state_dict, gathered) and --dump-grads.
#ifndef DSRT_DRIVER_WEIGHTS_H
#define DSRT_DRIVER_WEIGHTS_H

#include "group.h"
#include "program.h"

#include <string>

namespace dsrt::driver {

/// Mixed precision: the slot of parameter `s`'s f32 master, and for a ZeRO shard of a flat
/// buffer the element of the unsharded buffer where `s` starts (in `offset`); -1 without a
/// master.
int32_t masterOf(const ProgramSpec &p, const SlotSpec &s, int64_t &offset);

/// Writes `n` elements of `src` (dtype `from`) into `dst` (dtype `to`), converting f32 and the
/// 16-bit types.
void copyElements(void *dst, int32_t to, const void *src, int32_t from, int64_t n);

/// Loads the initial weights of every parameter and buffer (under its name or an alias).
bool loadWeights(const ProgramSpec &p, const Group &g, const std::string &path,
                 std::string &err);

/// --save-weights: writes every parameter and buffer under its name and aliases (16-bit
/// parameters as their f32 masters): the fp32 state_dict. Every rank takes part; rank 0
/// writes, receiving sharded tensors window by window (at most one transfer buffer), so no
/// rank ever holds more than its own state plus that window.
bool exportWeights(const ProgramSpec &p, const Group &g, const std::string &path,
                   std::string &err);

/// --dump-grads: writes the gradients under their parameters' names, summed over the ranks.
/// Every rank takes part; rank 0 writes.
bool dumpGradients(const ProgramSpec &p, const Group &g, const std::string &path,
                   std::string &err);

} // namespace dsrt::driver

#endif

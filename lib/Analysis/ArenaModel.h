//===- ArenaModel.h - the runtime's storages, counted as dsrt counts them ---===//
#ifndef DS_ANALYSIS_ARENAMODEL_H
#define DS_ANALYSIS_ARENAMODEL_H

#include "ds/IR/DSDialect.h"
#include "dsrt/dsrt.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mlir::ds {

/// Storages with reference counts, exactly as dsrt counts them: the device arena (counted
/// against the budget, with its running peak) and, apart, host memory and the swap file.
struct ArenaModel {
  struct Storage {
    int64_t bytes = 0;
    int refs = 0;
    bool counted = true;
    std::string what;
    bool comm = false; ///< a communication buffer (a collective's input or output)
    MemorySpace space = MemorySpace::device;
  };
  std::vector<Storage> storages;
  int64_t inUse = 0, peak = 0;
  int64_t hostInUse = 0, hostPeak = 0, nvmeInUse = 0, nvmePeak = 0;
  /// Communication buffers live now, and at the last peak.
  int64_t commInUse = 0, commAtPeak = 0;
  /// The allocator's padding of the arena's live storages now, and at the last peak.
  int64_t paddingInUse = 0, paddingAtPeak = 0;

  /// The bytes the device allocator adds to a storage of `bytes`.
  static int64_t padding(int64_t bytes) {
    const int64_t g = DSRT_ALLOCATION_GRANULE;
    return std::max(g, (bytes + g - 1) / g * g) - bytes;
  }
  /// Where the arena stands, to go back to (a function's temporaries gone).
  struct Mark {
    int64_t inUse, padding;
  };
  Mark mark() const { return {inUse, paddingInUse}; }
  /// Back to `m`, with the peak counted from there.
  void resetTo(Mark m) {
    inUse = peak = m.inUse;
    paddingInUse = paddingAtPeak = m.padding;
  }
  /// The peak counted from now.
  void restartPeak() {
    peak = inUse;
    paddingAtPeak = paddingInUse;
  }

  int alloc(int64_t bytes, std::string what, bool counted = true, bool comm = false) {
    storages.push_back({bytes, 1, counted, std::move(what), comm});
    if (counted) {
      inUse += bytes;
      commInUse += comm ? bytes : 0;
      paddingInUse += padding(bytes);
      if (inUse > peak) {
        peak = inUse;
        commAtPeak = commInUse;
        paddingAtPeak = paddingInUse;
      }
    }
    return static_cast<int>(storages.size()) - 1;
  }
  /// The bytes in use and the peak of a space apart from the device arena (the arena's are
  /// inUse and peak, with the communication buffers'), as dsrt_space_bytes counts them.
  std::pair<int64_t *, int64_t *> apart(MemorySpace space) {
    switch (space) {
    case MemorySpace::device:
      return {nullptr, nullptr};
    case MemorySpace::host:
      return {&hostInUse, &hostPeak};
    case MemorySpace::nvme:
      return {&nvmeInUse, &nvmePeak};
    }
    return {nullptr, nullptr};
  }
  int allocIn(MemorySpace space, int64_t bytes, std::string what) {
    auto [use, top] = apart(space);
    if (!use)
      return alloc(bytes, std::move(what));
    storages.push_back({bytes, 1, true, std::move(what), false, space});
    *use += bytes;
    *top = std::max(*top, *use);
    return static_cast<int>(storages.size()) - 1;
  }
  /// Counts storage `s` as a communication buffer from now on.
  void markComm(int s) {
    Storage &st = storages[s];
    st.comm = true;
    commInUse += st.bytes;
    if (peak == inUse)
      commAtPeak = commInUse;
  }
  void retain(int s) { ++storages[s].refs; }
  void release(int s) {
    Storage &st = storages[s];
    if (int64_t *use = apart(st.space).first; --st.refs == 0 && st.counted && use) {
      *use -= st.bytes;
      return;
    }
    if (st.refs == 0 && st.counted) {
      inUse -= st.bytes;
      commInUse -= st.comm ? st.bytes : 0;
      paddingInUse -= padding(st.bytes);
    }
  }
};

} // namespace mlir::ds

#endif // DS_ANALYSIS_ARENAMODEL_H

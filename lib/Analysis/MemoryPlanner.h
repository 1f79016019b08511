//===- MemoryPlanner.h - the walk that makes a MemoryPlan --------------------===//
//
// One walk over each function in program order, with the runtime's storages modelled
// (ArenaModel): every op's results placed, its operands freed after their last use, the
// events it waits for; the same walk the program makes when it runs.
//
#ifndef DS_ANALYSIS_MEMORYPLANNER_H
#define DS_ANALYSIS_MEMORYPLANNER_H

#include "ArenaModel.h"

#include "ds/Analysis/MemoryPlan.h"

#include "llvm/ADT/MapVector.h"

#include <deque>

namespace mlir::ds {

class MemoryPlanner {
public:
  MemoryPlanner(ModuleOp module, MemoryPlan &plan) : module(module), plan(plan) {}
  LogicalResult run();

private:
  // The module: one program, or one per pipeline rank.
  LogicalResult runSingle(func::FuncOp micro, func::FuncOp opt);
  LogicalResult runPipeline(PipelineAttr info);
  LogicalResult runGeneration(ArrayRef<func::FuncOp> calls);
  /// The arena with the slots that pp rank `ppRank` holds (-1: all) allocated.
  void allocateSlots(int64_t ppRank);
  LogicalResult planFunction(func::FuncOp func, StringRef symbol, bool microStep,
                             bool generation = false);
  void computeOffloadable();
  void collectBuffers();

  // One function.
  void beginFunction(func::FuncOp func);
  LogicalResult planOp(Operation *op);
  /// Collectives, views, transfers and constants; false: not one of these.
  FailureOr<bool> planStructure(Operation *op);
  /// Slot reads and writes, moves, reshapes, matmuls on views, in-place updates; false: not
  /// one of these (a kernel).
  FailureOr<bool> planMemory(Operation *op);
  LogicalResult planCollective(Operation *op);
  void planKernel(Operation *op);
  void planAssign(StringRef name, Value v);
  void planWaits(Operation *op);
  void planFrees(Operation *op);
  void waitStores(size_t keep);

  // Placements.
  int allocate(Value result, MemorySpace space);
  /// A fresh tensor where the op runs: host memory for the host optimizer's ops.
  int allocHere(Value result);
  void place(Value result, Placement p);
  void viewOf(Value result, Value source);
  void slotValue(Value result, int slot);
  void opMade(Value result, int storage);
  Value reuseDying(Operation *op, Value result);
  SmallVector<Value> readsOf(Operation *op) const;
  SmallVector<Value> definesOf(Operation *op) const;
  bool isCommBuffer(Value v) const;

  ModuleOp module;
  MemoryPlan &plan;
  ArenaModel arena;
  std::vector<int> slotStorage;
  int64_t persistentBytes = 0, hostPersistent = 0, nvmePersistent = 0;
  std::vector<std::pair<int64_t, std::string>> temporaries;

  // The function being planned.
  FunctionPlan *fp = nullptr;
  OpPlan *cur = nullptr;
  llvm::DenseMap<Value, int> storageOf;
  llvm::DenseMap<Value, Operation *> lastUse;
  llvm::DenseMap<Operation *, SmallVector<Value>> extendedTo;
  /// Values whose event the compute stream has not waited for yet, in issue order.
  llvm::MapVector<Value, bool> pendingEvents;
  llvm::DenseMap<Value, SmallVector<Value>> chainedEvents;
  /// NVMe writes in flight: the storages they read, oldest first.
  std::deque<int> pendingStores;
  bool onHost = false;
  MovedBytes movedNow{};
};

} // namespace mlir::ds

#endif // DS_ANALYSIS_MEMORYPLANNER_H

//===- DSOps.h - ops of the ds dialect -------------------------------------===//
#ifndef DS_IR_DSOPS_H
#define DS_IR_DSOPS_H

#include "ds/IR/DSDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ds/IR/DSInterfaces.h.inc"

namespace mlir::OpTrait::ds {
/// DS_WritesOverOperand (DSBase.td): the result may take a dying operand's storage.
template <typename ConcreteType>
class WritesOverOperand : public mlir::OpTrait::TraitBase<ConcreteType, WritesOverOperand> {};
/// DS_OptionalGradients (DSBase.td): results after the first may go unmade when unused.
template <typename ConcreteType>
class OptionalGradients : public mlir::OpTrait::TraitBase<ConcreteType, OptionalGradients> {};
} // namespace mlir::OpTrait::ds

namespace mlir::ds {
/// Shared verifiers of the op classes in DSOps.td.
LogicalResult verifyBroadcastBinary(Operation *op);
LogicalResult verifyReduce(Operation *op);
LogicalResult verifyDimInRange(Operation *op, int64_t dim);
/// ds.linear_cross_entropy's operands (its gradient checks the same), the tile's rows.
FailureOr<int64_t> verifyLinearCrossEntropy(Operation *op, Value x, Value w, Value bias,
                                            Value target, int64_t tiles);
/// ds.attention's operands and results (ds.attention_grad checks the same forward).
LogicalResult verifyAttention(Operation *op, Value query, Value key, Value value, Value mask,
                              bool causal, Value result, Value lse);
/// The type of the ds.parameter or ds.state that `name` names, or an error on `user`.
FailureOr<Type> lookupPersistentType(Operation *user, FlatSymbolRefAttr name,
                                     SymbolTableCollection &symbolTable);
} // namespace mlir::ds

#define GET_OP_CLASSES
#include "ds/IR/DSOps.h.inc"

#endif // DS_IR_DSOPS_H

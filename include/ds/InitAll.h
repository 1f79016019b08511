//===- InitAll.h - registration of everything ds-opt understands ----------===//
#ifndef DS_INITALL_H
#define DS_INITALL_H

namespace mlir {
class DialectRegistry;
namespace ds {
/// Registers the ds dialect and the upstream dialects ds programs use (func, shard, scf).
void registerAllDialects(DialectRegistry &registry);
/// Registers the ds passes and the upstream passes the ds pipelines use.
void registerAllPasses();
} // namespace ds
} // namespace mlir

#endif // DS_INITALL_H

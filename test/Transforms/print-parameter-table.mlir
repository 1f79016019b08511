// RUN: ds-opt %s --ds-print-parameter-table | FileCheck %s

// CHECK: name shape dtype kind elements bytes tied to
// CHECK-NEXT: emb.weight [10, 4] f32 parameter 40 160 head.weight, out.weight
// CHECK-NEXT: bn.running_mean [4] f32 buffer 4 16
// CHECK-NEXT: bn.num_batches_tracked [] i64 buffer 1 8
// CHECK-NEXT: total: 1 parameters, 40 elements, 160 bytes; 2 buffers, 5 elements, 24 bytes
// The IR is printed unchanged after the table.
// CHECK: ds.parameter @emb.weight trainable
module {
  ds.parameter @emb.weight trainable : tensor<10x4xf32> aliases ["head.weight", "out.weight"]
  ds.parameter @bn.running_mean : tensor<4xf32>
  ds.parameter @bn.num_batches_tracked : tensor<i64>
}

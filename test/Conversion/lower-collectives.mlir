// RUN: ds-opt %s --ds-lower-to-runtime | FileCheck %s

// Collectives run in the runtime group of their grid axes: the mask of the axes (tp, axis 1 of
// dp x tp: 2; dp and tp: 3). An all-to-all exchanges dimension-0 chunks; a rank's mesh
// coordinate comes from the runtime. The program's metadata carries the mesh.
// CHECK-LABEL: llvm.func @ds_micro_step
// CHECK: %[[AX:.+]] = llvm.mlir.constant(1 : i32) : i32
// CHECK: %[[C:.+]] = llvm.call @dsrt_comm_coordinate(%{{.+}}, %[[AX]]) : (!llvm.ptr, i32) -> i32
// CHECK: %[[F:.+]] = llvm.sitofp %[[C]] : i32 to f64
// CHECK: llvm.call @dsrt_fill(%{{.+}}, %{{.+}}, %[[F]])
// CHECK: llvm.call @dsrt_convert
// CHECK: llvm.call @dsrt_tensor_alloc
// CHECK-NEXT: %[[TP:.+]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: llvm.call @dsrt_all_reduce(%{{.+}}, %[[TP]],
// CHECK: llvm.call @dsrt_event_release
// CHECK: %[[BOTH:.+]] = llvm.mlir.constant(3 : i32) : i32
// CHECK: llvm.call @dsrt_all_to_all(%{{.+}}, %[[BOTH]],
// CHECK: \22mesh\22:{\22axes\22:[\22dp\22,\22tp\22],\22shape\22:[2,2]}
module attributes {ds.mesh = #ds.mesh<axes = ["dp", "tp"], shape = [2, 2]>} {
  shard.grid @mesh(shape = 2x2)
  func.func @micro_step(%x: tensor<4x2xf32>) -> tensor<f32> {
    %r = ds.mesh_coordinate on @mesh grid_axis = 1 : tensor<i64>
    %rf = ds.convert %r : tensor<i64> -> tensor<f32>
    %y = shard.all_reduce %x on @mesh grid_axes = [1] : tensor<4x2xf32> -> tensor<4x2xf32>
    %z = shard.all_to_all %y on @mesh grid_axes = [0, 1] split_axis = 0 concat_axis = 0 : tensor<4x2xf32> -> tensor<4x2xf32>
    %s = ds.sum %z dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
    %t = ds.add %s, %rf : tensor<f32>, tensor<f32> -> tensor<f32>
    return %t : tensor<f32>
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
                            %aux_lr: tensor<f32>) { return }
}

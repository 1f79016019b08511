// RUN: ds-opt %s --ds-lower-to-runtime | grep -B1 "llvm.call @dsrt_expert_linear\|llvm.call @dsrt_swiglu" | FileCheck %s

// The rows that no expert takes (past an expert-parallel rank's received rows) are left
// unwritten (DSRT_EXPERT_UNROUTED_UNDEFINED, 2) by the products and the SwiGLU whose every
// reader skips them: the next product and SwiGLU told the same ids, the combine of their
// route. A product whose result a sum reads keeps its zeros (flags 1: transposed only).
// CHECK: %[[F1:.+]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: llvm.call @dsrt_expert_linear(%{{.+}}, %[[F1]])
// CHECK: %[[F2:.+]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: llvm.call @dsrt_swiglu(%{{.+}}, %[[F2]])
// CHECK: %[[F3:.+]] = llvm.mlir.constant(3 : i32) : i32
// CHECK-NEXT: llvm.call @dsrt_expert_linear(%{{.+}}, %[[F3]])
// CHECK: %[[F4:.+]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: llvm.call @dsrt_expert_linear(%{{.+}}, %[[F4]])
module attributes {ds.mesh = #ds.mesh<axes = ["dp", "tp"], shape = [2, 2]>} {
  shard.grid @mesh(shape = 2x2)
  func.func @micro_step(%x: tensor<6x8xf32>, %w: tensor<2x16x8xf32>, %w2: tensor<2x8x8xf32>, %ids: tensor<6xi64>) -> (tensor<f32>, tensor<f32>) {
    %plan, %local = ds.expert_route %ids experts = 4 on @mesh grid_axes = [0] : (tensor<6xi64>) -> (tensor<10xi64>, tensor<12xi64>)
    %r = ds.expert_dispatch %x along %plan on @mesh grid_axes = [0] : (tensor<6x8xf32>, tensor<10xi64>) -> tensor<12x8xf32>
    %h = ds.expert_linear %r, %w[%local] : (tensor<12x8xf32>, tensor<2x16x8xf32>, tensor<12xi64>) -> tensor<12x16xf32>
    %a = ds.swiglu %h rows[%local] : (tensor<12x16xf32>, tensor<12xi64>) -> tensor<12x8xf32>
    %e = ds.expert_linear %a, %w2[%local] transposed : (tensor<12x8xf32>, tensor<2x8x8xf32>, tensor<12xi64>) -> tensor<12x8xf32>
    %y = ds.expert_combine %e along %plan on @mesh grid_axes = [0] : (tensor<12x8xf32>, tensor<10xi64>) -> tensor<6x8xf32>
    %s = ds.sum %y dims = [0, 1] : tensor<6x8xf32> -> tensor<f32>
    %read = ds.expert_linear %r, %w2[%local] transposed : (tensor<12x8xf32>, tensor<2x8x8xf32>, tensor<12xi64>) -> tensor<12x8xf32>
    %t = ds.sum %read dims = [0, 1] : tensor<12x8xf32> -> tensor<f32>
    return %s, %t : tensor<f32>, tensor<f32>
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
                            %aux_lr: tensor<f32>) { return }
}

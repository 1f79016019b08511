// RUN: ds-opt %s --ds-lower-to-runtime | FileCheck %s
// RUN: ds-opt %s --ds-lower-to-runtime | grep -B2 "llvm.call @dsrt_expert_[rdc]" | FileCheck %s --check-prefix=GROUP

// Expert parallelism's exchange runs in the runtime group of its grid axes (dp, axis 0 of
// dp x tp: mask 1); each call returns its communication thread's event, waited for and
// released at once, so the next op reads what it wrote.
// CHECK-LABEL: llvm.func @ds_micro_step
// CHECK: %[[R:.+]] = llvm.call @dsrt_expert_route(
// CHECK-NEXT: llvm.call @dsrt_event_wait(%{{.+}}, %[[R]])
// CHECK-NEXT: llvm.call @dsrt_event_release(%[[R]])
// CHECK: %[[D:.+]] = llvm.call @dsrt_expert_dispatch(
// CHECK-NEXT: llvm.call @dsrt_event_wait(%{{.+}}, %[[D]])
// CHECK-NEXT: llvm.call @dsrt_event_release(%[[D]])
// CHECK: llvm.call @dsrt_expert_linear(
// CHECK: %[[C:.+]] = llvm.call @dsrt_expert_combine(
// CHECK-NEXT: llvm.call @dsrt_event_wait(%{{.+}}, %[[C]])
// CHECK-NEXT: llvm.call @dsrt_event_release(%[[C]])
// GROUP: %[[DP:.+]] = llvm.mlir.constant(1 : i32) : i32
// GROUP-NEXT: %[[E:.+]] = llvm.mlir.constant(4 : i64) : i64
// GROUP-NEXT: llvm.call @dsrt_expert_route(%{{.+}}, %[[DP]], %{{.+}}, %{{.+}}, %{{.+}}, %[[E]])
// GROUP: %[[DP2:.+]] = llvm.mlir.constant(1 : i32) : i32
// GROUP-NEXT: llvm.call @dsrt_expert_dispatch(%{{.+}}, %[[DP2]],
// GROUP: %[[DP3:.+]] = llvm.mlir.constant(1 : i32) : i32
// GROUP-NEXT: llvm.call @dsrt_expert_combine(%{{.+}}, %[[DP3]],
module attributes {ds.mesh = #ds.mesh<axes = ["dp", "tp"], shape = [2, 2]>} {
  shard.grid @mesh(shape = 2x2)
  func.func @micro_step(%x: tensor<6x8xf32>, %w: tensor<2x10x8xf32>, %ids: tensor<6xi64>) -> tensor<f32> {
    %plan, %local = ds.expert_route %ids experts = 4 on @mesh grid_axes = [0] : (tensor<6xi64>) -> (tensor<10xi64>, tensor<12xi64>)
    %r = ds.expert_dispatch %x along %plan on @mesh grid_axes = [0] : (tensor<6x8xf32>, tensor<10xi64>) -> tensor<12x8xf32>
    %e = ds.expert_linear %r, %w[%local] : (tensor<12x8xf32>, tensor<2x10x8xf32>, tensor<12xi64>) -> tensor<12x10xf32>
    %y = ds.expert_combine %e along %plan on @mesh grid_axes = [0] : (tensor<12x10xf32>, tensor<10xi64>) -> tensor<6x10xf32>
    %s = ds.sum %y dims = [0, 1] : tensor<6x10xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
                            %aux_lr: tensor<f32>) { return }
}

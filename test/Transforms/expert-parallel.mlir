// RUN: ds-opt %s --ds-expert-parallel=expert-parallel-size=2 --split-input-file | FileCheck %s
// RUN: ds-opt %s --ds-expert-parallel=expert-parallel-size=2 --ds-autodiff --split-input-file | FileCheck %s --check-prefix=GRAD

// Two expert products routed by the same ids (a SwiGLU-less MoE MLP): the experts' weights
// split over ep (each rank 2 of 4 experts, the names kept), one route, receive buffers of
// 2 x 6 rows. The gelu between the products reads each row alone, so it runs on the experts'
// rank: one dispatch before the first product, one combine after the second, none between.
// CHECK-LABEL: module attributes {ds.mesh = #ds.mesh<axes = ["dp", "ep"], shape = [1, 2]>}
// CHECK: ds.parameter @experts.up trainable : tensor<2x16x8xf32> sharding <{{\[\["ep"\], \[\], \[\]\]}}>
// CHECK: ds.parameter @experts.down trainable : tensor<2x8x16xf32> sharding <{{\[\["ep"\], \[\], \[\]\]}}>
// CHECK: ds.parameter @router.weight trainable : tensor<4x8xf32>{{$}}
// CHECK: func.func @forward
// CHECK: %[[PLAN:.+]], %[[LOCAL:.+]] = ds.expert_route %[[IDS:.+]] experts = 4 on @mesh grid_axes = [1] : (tensor<6xi64>) -> (tensor<10xi64>, tensor<12xi64>)
// CHECK-NOT: ds.expert_route
// CHECK: %[[X1:.+]] = ds.expert_dispatch %arg0 along %[[PLAN]] on @mesh grid_axes = [1] : (tensor<6x8xf32>, tensor<10xi64>) -> tensor<12x8xf32>
// CHECK: %[[H1:.+]] = ds.expert_linear %[[X1]], %{{.+}}[%[[LOCAL]]] : (tensor<12x8xf32>, tensor<2x16x8xf32>, tensor<12xi64>) -> tensor<12x16xf32>
// CHECK-NOT: ds.expert_combine
// CHECK: %[[G:.+]] = ds.gelu %[[H1]] : tensor<12x16xf32>
// CHECK-NOT: ds.expert_dispatch
// CHECK: %[[Y1:.+]] = ds.expert_linear %[[G]], %{{.+}}[%[[LOCAL]]] : (tensor<12x16xf32>, tensor<2x8x16xf32>, tensor<12xi64>) -> tensor<12x8xf32>
// CHECK: ds.expert_combine %[[Y1]] along %[[PLAN]] on @mesh grid_axes = [1] : (tensor<12x8xf32>, tensor<10xi64>) -> tensor<6x8xf32>
// CHECK-NOT: ds.expert_combine
// CHECK-NOT: ds.gelu
// The gradients: the combine's is a dispatch along the same plan, the dispatch's a combine;
// the experts' weight gradients are of the local experts.
// GRAD-LABEL: func.func @micro_step
// GRAD: %[[PLAN:.+]], %[[LOCAL:.+]] = ds.expert_route
// GRAD: ds.expert_dispatch %{{.+}} along %[[PLAN]] on @mesh grid_axes = [1] : (tensor<6x8xf32>, tensor<10xi64>) -> tensor<12x8xf32>
// GRAD: ds.expert_combine %{{.+}} along %[[PLAN]] on @mesh grid_axes = [1] : (tensor<12x8xf32>, tensor<10xi64>) -> tensor<6x8xf32>
// GRAD: ds.expert_dispatch %{{.+}} along %[[PLAN]] on @mesh grid_axes = [1] : (tensor<6x8xf32>, tensor<10xi64>) -> tensor<12x8xf32>
// GRAD: ds.expert_linear_grad_weight %{{.+}}, %{{.+}}[%[[LOCAL]]] : (tensor<12x16xf32>, tensor<12x8xf32>, tensor<12xi64>) -> tensor<2x8x16xf32>
// GRAD: ds.expert_linear_grad_weight %{{.+}}, %{{.+}}[%[[LOCAL]]] : (tensor<12x8xf32>, tensor<12x16xf32>, tensor<12xi64>) -> tensor<2x16x8xf32>
// GRAD: ds.expert_combine %{{.+}} along %[[PLAN]] on @mesh grid_axes = [1] : (tensor<12x8xf32>, tensor<10xi64>) -> tensor<6x8xf32>
module {
  ds.parameter @experts.up trainable : tensor<4x16x8xf32>
  ds.parameter @experts.down trainable : tensor<4x8x16xf32>
  ds.parameter @router.weight trainable : tensor<4x8xf32>
  func.func @forward(%x: tensor<6x8xf32>, %t: tensor<6xi64>) -> tensor<f32> {
    %r = ds.get_parameter @router.weight : tensor<4x8xf32>
    %logits = ds.linear %x, %r : (tensor<6x8xf32>, tensor<4x8xf32>) -> tensor<6x4xf32>
    %v, %i = ds.top_k %logits k = 1 : (tensor<6x4xf32>) -> (tensor<6x1xf32>, tensor<6x1xi64>)
    %ids = ds.reshape %i : tensor<6x1xi64> -> tensor<6xi64>
    %up = ds.get_parameter @experts.up : tensor<4x16x8xf32>
    %h = ds.expert_linear %x, %up[%ids] : (tensor<6x8xf32>, tensor<4x16x8xf32>, tensor<6xi64>) -> tensor<6x16xf32>
    %g = ds.gelu %h : tensor<6x16xf32>
    %down = ds.get_parameter @experts.down : tensor<4x8x16xf32>
    %y = ds.expert_linear %g, %down[%ids] : (tensor<6x16xf32>, tensor<4x8x16xf32>, tensor<6xi64>) -> tensor<6x8xf32>
    %w = ds.mul %y, %v : tensor<6x8xf32>, tensor<6x1xf32> -> tensor<6x8xf32>
    %l = ds.cross_entropy %w, %t : (tensor<6x8xf32>, tensor<6xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Between the products an op that mixes rows (a softmax over the tokens): the rows come back
// to their tokens and go out again.
// CHECK-LABEL: ds.parameter @mix.up
// CHECK: ds.expert_dispatch
// CHECK: ds.expert_combine
// CHECK: ds.softmax
// CHECK: ds.expert_dispatch
// CHECK: ds.expert_combine
module {
  ds.parameter @mix.up trainable : tensor<4x16x8xf32>
  ds.parameter @mix.down trainable : tensor<4x8x16xf32>
  func.func @forward(%x: tensor<6x8xf32>, %ids: tensor<6xi64>, %t: tensor<6xi64>) -> tensor<f32> {
    %up = ds.get_parameter @mix.up : tensor<4x16x8xf32>
    %h = ds.expert_linear %x, %up[%ids] : (tensor<6x8xf32>, tensor<4x16x8xf32>, tensor<6xi64>) -> tensor<6x16xf32>
    %g = ds.softmax %h dim = 0 : tensor<6x16xf32>
    %down = ds.get_parameter @mix.down : tensor<4x8x16xf32>
    %y = ds.expert_linear %g, %down[%ids] : (tensor<6x16xf32>, tensor<4x8x16xf32>, tensor<6xi64>) -> tensor<6x8xf32>
    %l = ds.cross_entropy %y, %t : (tensor<6x8xf32>, tensor<6xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A ds.swiglu between the products, told the route's ids: on the experts' side, told the
// received rows' ids (past the received rows, -1: skipped); its gradient too.
// CHECK-LABEL: ds.parameter @glu.up
// CHECK: %[[PLAN:.+]], %[[LOCAL:.+]] = ds.expert_route
// CHECK: %[[H:.+]] = ds.expert_linear %{{.+}}, %{{.+}}[%[[LOCAL]]] : (tensor<12x8xf32>, tensor<2x16x8xf32>, tensor<12xi64>) -> tensor<12x16xf32>
// CHECK-NOT: ds.expert_combine
// CHECK: %[[A:.+]] = ds.swiglu %[[H]] rows[%[[LOCAL]]] : (tensor<12x16xf32>, tensor<12xi64>) -> tensor<12x8xf32>
// CHECK-NOT: ds.expert_dispatch
// CHECK: ds.expert_linear %[[A]], %{{.+}}[%[[LOCAL]]] : (tensor<12x8xf32>, tensor<2x8x8xf32>, tensor<12xi64>) -> tensor<12x8xf32>
// GRAD-LABEL: ds.parameter @glu.up
// GRAD: %[[PLAN:.+]], %[[LOCAL:.+]] = ds.expert_route
// GRAD: ds.swiglu_grad %{{.+}}, %{{.+}} rows[%[[LOCAL]]] : (tensor<12x16xf32>, tensor<12x8xf32>, tensor<12xi64>) -> tensor<12x16xf32>
module {
  ds.parameter @glu.up trainable : tensor<4x16x8xf32>
  ds.parameter @glu.down trainable : tensor<4x8x8xf32>
  func.func @forward(%x: tensor<6x8xf32>, %ids: tensor<6xi64>, %t: tensor<6xi64>) -> tensor<f32> {
    %up = ds.get_parameter @glu.up : tensor<4x16x8xf32>
    %h = ds.expert_linear %x, %up[%ids] : (tensor<6x8xf32>, tensor<4x16x8xf32>, tensor<6xi64>) -> tensor<6x16xf32>
    %a = ds.swiglu %h rows[%ids] : (tensor<6x16xf32>, tensor<6xi64>) -> tensor<6x8xf32>
    %down = ds.get_parameter @glu.down : tensor<4x8x8xf32>
    %y = ds.expert_linear %a, %down[%ids] : (tensor<6x8xf32>, tensor<4x8x8xf32>, tensor<6xi64>) -> tensor<6x8xf32>
    %l = ds.cross_entropy %y, %t : (tensor<6x8xf32>, tensor<6xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A ds.swiglu told other ids than the next product's route: it stays with the tokens, between
// a combine and a dispatch.
// CHECK-LABEL: ds.parameter @other.up
// CHECK: ds.expert_combine
// CHECK: ds.swiglu %{{.+}} rows[%arg3] : (tensor<6x16xf32>, tensor<6xi64>) -> tensor<6x8xf32>
// CHECK: ds.expert_dispatch
module {
  ds.parameter @other.up trainable : tensor<4x16x8xf32>
  ds.parameter @other.down trainable : tensor<4x8x8xf32>
  func.func @forward(%x: tensor<6x8xf32>, %ids: tensor<6xi64>, %t: tensor<6xi64>, %rows: tensor<6xi64>) -> tensor<f32> {
    %up = ds.get_parameter @other.up : tensor<4x16x8xf32>
    %h = ds.expert_linear %x, %up[%ids] : (tensor<6x8xf32>, tensor<4x16x8xf32>, tensor<6xi64>) -> tensor<6x16xf32>
    %a = ds.swiglu %h rows[%rows] : (tensor<6x16xf32>, tensor<6xi64>) -> tensor<6x8xf32>
    %down = ds.get_parameter @other.down : tensor<4x8x8xf32>
    %y = ds.expert_linear %a, %down[%ids] : (tensor<6x8xf32>, tensor<4x8x8xf32>, tensor<6xi64>) -> tensor<6x8xf32>
    %l = ds.cross_entropy %y, %t : (tensor<6x8xf32>, tensor<6xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

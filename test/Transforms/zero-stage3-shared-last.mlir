// RUN: ds-opt %s --ds-autodiff --canonicalize --cse --ds-zero="stage=3 data-parallel-size=2 param-persistence-threshold=20 reduce-bucket-size=1" | FileCheck %s

// Two buckets whose last gradient comes from the same op: @w's weight gradient (partitioned)
// and @b's bias gradient (under the persistence threshold, a bucket of its own) are both
// results of one linear_grad_weight. The second bucket is issued after the first, and each
// shard is accumulated after its reduce-scatter (this was a dominance error).
// CHECK: %[[DW:.+]], %[[DB:.+]] = ds.linear_grad_weight %arg0
// CHECK-NEXT: %[[PW:.+]] = ds.reshape %[[DW]] : tensor<16x16xf32> -> tensor<256xf32>
// CHECK-NEXT: %[[RW:.+]] = shard.reduce_scatter %[[PW]]
// CHECK: ds.reshape %[[DB]] : tensor<16xf32> -> tensor<16xf32>
// CHECK: %[[RB:.+]] = shard.reduce_scatter
// CHECK: ds.add %{{.+}}, %[[RW]] : tensor<128xf32>
// CHECK: ds.add %{{.+}}, %[[RB]] : tensor<16xf32>
// CHECK: return
module {
  ds.parameter @w trainable : tensor<16x16xf32>
  ds.parameter @b trainable : tensor<16xf32>
  ds.parameter @v trainable : tensor<4x16xf32>
  func.func @forward(%x: tensor<8x16xf32>, %y: tensor<8xi64>) -> tensor<f32> {
    %w = ds.get_parameter @w : tensor<16x16xf32>
    %b = ds.get_parameter @b : tensor<16xf32>
    %h = ds.linear %x, %w, %b : (tensor<8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
    %g = ds.gelu %h : tensor<8x16xf32>
    %v = ds.get_parameter @v : tensor<4x16xf32>
    %o = ds.linear %g, %v : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
    %l = ds.cross_entropy %o, %y : (tensor<8x4xf32>, tensor<8xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

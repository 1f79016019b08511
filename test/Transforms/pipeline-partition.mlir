// RUN: ds-opt %s --ds-pipeline-partition="stages=2" | FileCheck %s --check-prefix=BEST
// RUN: ds-opt %s --ds-pipeline-partition="stages=2 partition=parameters" | FileCheck %s --check-prefix=PARAMS
// RUN: ds-opt %s --ds-pipeline-partition="stages=2 partition=uniform" | FileCheck %s --check-prefix=PARAMS
// RUN: ds-opt %s --ds-pipeline-partition="stages=2 partition=type:^l[13]$" | FileCheck %s --check-prefix=TYPE
// RUN: ds-opt %s --ds-pipeline-partition="stages=4" | FileCheck %s --check-prefix=FOUR

// Four linears (4096, 4096, 4096 and 1024 FLOPs; a GELU 128) and a cross-entropy.
// best: the smallest heaviest chunk is l0 + gelu + l1 (8320 FLOPs) against the rest (about
// 5400): the cut falls inside a layer, between l1's linear and its GELU.
// BEST: ds.mesh = #ds.mesh<axes = ["pp", "dp"], shape = [2, 1]>, ds.pipeline = #ds.pipeline<stages = 2, virtual_stages = 1>
// BEST: ds.get_parameter @l0.weight {ds.stage = 0 : i64}
// BEST: ds.linear %arg0, %{{.+}} {ds.stage = 0 : i64}
// BEST: ds.gelu %{{.+}} {ds.stage = 0 : i64}
// BEST: ds.get_parameter @l1.weight {ds.stage = 0 : i64}
// BEST: ds.linear %{{.+}} {ds.stage = 0 : i64}
// BEST: ds.gelu %{{.+}} {ds.stage = 1 : i64}
// BEST: ds.get_parameter @l2.weight {ds.stage = 1 : i64}
// BEST: ds.cross_entropy %{{.+}} {ds.stage = 1 : i64}
// parameters (256, 256, 256, 64 elements) and uniform (8 computing ops) both cut before l2.
// PARAMS: ds.get_parameter @l1.weight {ds.stage = 0 : i64}
// PARAMS: ds.gelu %{{.+}} {ds.stage = 0 : i64}
// PARAMS: ds.get_parameter @l2.weight {ds.stage = 1 : i64}
// PARAMS: ds.linear %{{.+}} {ds.stage = 1 : i64}
// type: two modules match (l1, l3); a chunk starts at a matching module, so l0-l2 form the
// first chunk (it holds l1) and l3 the second.
// TYPE: ds.get_parameter @l2.weight {ds.stage = 0 : i64}
// TYPE: ds.gelu %{{.+}} {ds.stage = 0 : i64}
// TYPE: ds.get_parameter @l3.weight {ds.stage = 1 : i64}
// Four stages: a linear each (the GELUs go where the heaviest chunk stays smallest).
// FOUR: ds.linear %arg0, %{{.+}} {ds.stage = 0 : i64}
// FOUR: ds.gelu %{{.+}} {ds.stage = 1 : i64}
// FOUR: ds.linear %{{.+}} {ds.stage = 1 : i64}
// FOUR: ds.linear %{{.+}} {ds.stage = 2 : i64}
// FOUR: ds.linear %{{.+}} {ds.stage = 3 : i64}
// FOUR: ds.cross_entropy %{{.+}} {ds.stage = 3 : i64}
module {
  ds.parameter @l0.weight trainable : tensor<16x16xf32>
  ds.parameter @l1.weight trainable : tensor<16x16xf32>
  ds.parameter @l2.weight trainable : tensor<16x16xf32>
  ds.parameter @l3.weight trainable : tensor<4x16xf32>
  func.func @forward(%x: tensor<8x16xf32>, %y: tensor<8xi64>) -> tensor<f32> {
    %w0 = ds.get_parameter @l0.weight : tensor<16x16xf32>
    %h0 = ds.linear %x, %w0 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %g0 = ds.gelu %h0 : tensor<8x16xf32>
    %w1 = ds.get_parameter @l1.weight : tensor<16x16xf32>
    %h1 = ds.linear %g0, %w1 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %g1 = ds.gelu %h1 : tensor<8x16xf32>
    %w2 = ds.get_parameter @l2.weight : tensor<16x16xf32>
    %h2 = ds.linear %g1, %w2 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %g2 = ds.gelu %h2 : tensor<8x16xf32>
    %w3 = ds.get_parameter @l3.weight : tensor<4x16xf32>
    %h3 = ds.linear %g2, %w3 : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
    %l = ds.cross_entropy %h3, %y : (tensor<8x4xf32>, tensor<8xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// RUN: ds-opt %s --ds-expert-parallel=expert-parallel-size=2 --split-input-file -verify-diagnostics

// Each refusal names the cause and what to change.

// expected-error @+1 {{ds-expert-parallel: @forward has no routed experts (ds.expert_linear) to split; expert parallelism needs a mixture-of-experts model (docs/importer/supported-ops.md says which forms import)}}
module {
  ds.parameter @fc.weight trainable : tensor<4x8xf32>
  func.func @forward(%x: tensor<6x8xf32>, %t: tensor<6xi64>) -> tensor<f32> {
    %w = ds.get_parameter @fc.weight : tensor<4x8xf32>
    %y = ds.linear %x, %w : (tensor<6x8xf32>, tensor<4x8xf32>) -> tensor<6x4xf32>
    %l = ds.cross_entropy %y, %t : (tensor<6x4xf32>, tensor<6xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// expected-error @+1 {{ds-expert-parallel: expert-parallel-size 2 but the module's mesh dp=4 has 1 ep ranks (ds-opt --config makes the mesh from expert_parallel.autoep_size)}}
module attributes {ds.mesh = #ds.mesh<axes = ["dp"], shape = [4]>} {
  ds.parameter @experts trainable : tensor<4x8x8xf32>
  func.func @forward(%x: tensor<6x8xf32>, %ids: tensor<6xi64>) -> tensor<6x8xf32> {
    %w = ds.get_parameter @experts : tensor<4x8x8xf32>
    %y = ds.expert_linear %x, %w[%ids] : (tensor<6x8xf32>, tensor<4x8x8xf32>, tensor<6xi64>) -> tensor<6x8xf32>
    return %y : tensor<6x8xf32>
  }
}

// -----

module {
  // expected-error @+1 {{ds-expert-parallel: 'experts' holds 3 experts, which do not split evenly over 2 ranks; choose an expert_parallel.autoep_size that divides 3}}
  ds.parameter @experts trainable : tensor<3x8x8xf32>
  func.func @forward(%x: tensor<6x8xf32>, %ids: tensor<6xi64>) -> tensor<6x8xf32> {
    %w = ds.get_parameter @experts : tensor<3x8x8xf32>
    %y = ds.expert_linear %x, %w[%ids] : (tensor<6x8xf32>, tensor<3x8x8xf32>, tensor<6xi64>) -> tensor<6x8xf32>
    return %y : tensor<6x8xf32>
  }
}

// -----

module {
  ds.parameter @experts trainable : tensor<4x8x8xf32>
  func.func @forward(%x: tensor<6x8xf32>, %ids: tensor<6xi64>) -> (tensor<6x8xf32>, tensor<f32>) {
    %w = ds.get_parameter @experts : tensor<4x8x8xf32>
    %y = ds.expert_linear %x, %w[%ids] : (tensor<6x8xf32>, tensor<4x8x8xf32>, tensor<6xi64>) -> tensor<6x8xf32>
    // expected-error @+1 {{ds-expert-parallel: 'experts' is read here besides the experts' products, so it cannot be split over the experts' ranks}}
    %s = ds.sum %w dims = [0, 1, 2] : tensor<4x8x8xf32> -> tensor<f32>
    return %y, %s : tensor<6x8xf32>, tensor<f32>
  }
}

// -----

module {
  func.func @forward(%x: tensor<6x8xf32>, %w: tensor<4x8x8xf32>, %ids: tensor<6xi64>) -> tensor<6x8xf32> {
    // expected-error @+1 {{ds-expert-parallel: this product's expert weights are not a parameter read; only the experts' parameters split}}
    %y = ds.expert_linear %x, %w[%ids] : (tensor<6x8xf32>, tensor<4x8x8xf32>, tensor<6xi64>) -> tensor<6x8xf32>
    return %y : tensor<6x8xf32>
  }
}

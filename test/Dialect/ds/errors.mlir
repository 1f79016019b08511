// RUN: ds-opt %s -split-input-file -verify-diagnostics

// One case per error branch of the ds verifiers (DSOps.cpp, DSShapes.cpp, DSAttrs.cpp,
// DSDialect.cpp), plus the ODS-generated checks the verifiers rely on.

//===----------------------------------------------------------------------===//
// #ds.mesh (DSAttrs.cpp)
//===----------------------------------------------------------------------===//

// expected-error @+1 {{mesh has 2 axes but 1 sizes}}
module attributes {ds.mesh = #ds.mesh<axes = ["dp", "tp"], shape = [2]>} {}

// -----

// expected-error @+1 {{mesh axis names must not be empty}}
module attributes {ds.mesh = #ds.mesh<axes = ["dp", ""], shape = [2, 2]>} {}

// -----

// expected-error @+1 {{mesh axis 'model' is not a role: name axes dp, pp, tp, sp or ep}}
module attributes {ds.mesh = #ds.mesh<axes = ["dp", "model"], shape = [2, 2]>} {}

// -----

// expected-error @+1 {{mesh axis 'dp' appears twice}}
module attributes {ds.mesh = #ds.mesh<axes = ["dp", "dp"], shape = [2, 2]>} {}

// -----

// expected-error @+1 {{mesh axis 'tp' has size 0; sizes must be >= 1}}
module attributes {ds.mesh = #ds.mesh<axes = ["dp", "tp"], shape = [2, 0]>} {}

// -----

// expected-error @+1 {{mesh axis 'dp' has size -2; sizes must be >= 1}}
module attributes {ds.mesh = #ds.mesh<axes = ["dp"], shape = [-2]>} {}

// -----

//===----------------------------------------------------------------------===//
// #ds.sharding (DSAttrs.cpp)
//===----------------------------------------------------------------------===//

module attributes {ds.mesh = #ds.mesh<axes = ["dp", "tp"], shape = [2, 2]>} {
  // expected-error @+1 {{each sharding entry must be a list of mesh axis names}}
  ds.parameter @w : tensor<4xf32> sharding #ds.sharding<["dp"]>
}

// -----

module attributes {ds.mesh = #ds.mesh<axes = ["dp", "tp"], shape = [2, 2]>} {
  // expected-error @+1 {{mesh axis names in a sharding must be non-empty strings}}
  ds.parameter @w : tensor<4xf32> sharding #ds.sharding<[[""]]>
}

// -----

module attributes {ds.mesh = #ds.mesh<axes = ["dp", "tp"], shape = [2, 2]>} {
  // expected-error @+1 {{mesh axis names in a sharding must be non-empty strings}}
  ds.parameter @w : tensor<4xf32> sharding #ds.sharding<[[1]]>
}

// -----

module attributes {ds.mesh = #ds.mesh<axes = ["dp", "tp"], shape = [2, 2]>} {
  // expected-error @+1 {{mesh axis 'dp' shards more than one dimension}}
  ds.parameter @w : tensor<4x4xf32> sharding #ds.sharding<[["dp"], ["tp", "dp"]]>
}

// -----

module attributes {ds.mesh = #ds.mesh<axes = ["dp", "tp"], shape = [2, 2]>} {
  // expected-error @+1 {{mesh axis 'tp' shards more than one dimension}}
  ds.parameter @w : tensor<4xf32> sharding #ds.sharding<[["tp", "tp"]]>
}

// -----

module attributes {ds.mesh = #ds.mesh<axes = ["dp", "tp"], shape = [1, 2]>} {
  // expected-error @+1 {{sharding segment sizes need one dimension of several segments, one size each}}
  ds.parameter @w : tensor<32x4xf32> sharding #ds.sharding<[["tp"], []], segments = [3, 1], sizes = [32, 32]>
}

// -----

module attributes {ds.mesh = #ds.mesh<axes = ["dp", "tp"], shape = [1, 2]>} {
  // expected-error @+1 {{sharding segment sizes must be >= 1, not 0}}
  ds.parameter @w : tensor<32x4xf32> sharding #ds.sharding<[["tp"], []], segments = [2, 1], sizes = [64, 0]>
}

// -----

//===----------------------------------------------------------------------===//
// Dialect attributes (DSDialect.cpp)
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'ds.mesh' belongs on a builtin.module}}
func.func @mesh_on_func() attributes {ds.mesh = #ds.mesh<axes = ["dp"], shape = [2]>} {
  return
}

// -----

// expected-error @+1 {{'ds.mesh' must be a #ds.mesh attribute}}
module attributes {ds.mesh = ["dp", "tp"]} {}

// -----

// expected-error @+1 {{'ds.mesh' must be a #ds.mesh attribute}}
module attributes {ds.mesh = #ds.sharding<[["dp"]]>} {}

// -----

// expected-error @+1 {{unknown ds attribute 'ds.bogus'}}
module attributes {ds.bogus = 1 : i64} {}

// -----

func.func @unknown_attr_on_op(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{unknown ds attribute 'ds.sharding'}}
  %0 = ds.relu %x {ds.sharding = #ds.sharding<[[]]>} : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

//===----------------------------------------------------------------------===//
// ds.parameter
//===----------------------------------------------------------------------===//

// expected-error @+1 {{needs a name: its state_dict key, which cannot be empty}}
ds.parameter @"" trainable : tensor<4xf32>

// -----

// expected-error @+1 {{'ds.state' op needs a name, which cannot be empty}}
ds.state @"" role loss_scale : tensor<f32>

// -----

ds.parameter @w trainable : tensor<6xf32>
// expected-error @+1 {{'ds.flat_buffer' op needs a name, which cannot be empty}}
ds.flat_buffer @"" role params members [@w] : tensor<16xf32>

// -----

// expected-error @+1 {{state_dict key 'w' is listed twice}}
ds.parameter @w trainable : tensor<4xf32> aliases ["v", "w"]

// -----

// expected-error @+1 {{state_dict key 'v' is listed twice}}
ds.parameter @w trainable : tensor<4xf32> aliases ["v", "u", "v"]

// -----

module attributes {ds.mesh = #ds.mesh<axes = ["dp", "tp"], shape = [2, 2]>} {
  // expected-error @+1 {{sharding has 1 entries for a tensor of rank 2}}
  ds.parameter @w trainable : tensor<4x4xf32> sharding #ds.sharding<[["dp"]]>
}

// -----

module attributes {ds.mesh = #ds.mesh<axes = ["dp", "tp"], shape = [2, 2]>} {
  // expected-error @+1 {{sharding has 1 entries for a tensor of rank 0}}
  ds.parameter @w : tensor<f32> sharding #ds.sharding<[[]]>
}

// -----

// expected-error @+1 {{has a sharding but the module has no 'ds.mesh' attribute}}
ds.parameter @w trainable : tensor<4xf32> sharding #ds.sharding<[["dp"]]>

// -----

// The nearest module counts: an inner module without a mesh does not inherit the outer one.
module attributes {ds.mesh = #ds.mesh<axes = ["dp"], shape = [2]>} {
  module {
    // expected-error @+1 {{has a sharding but the module has no 'ds.mesh' attribute}}
    ds.parameter @w trainable : tensor<4xf32> sharding #ds.sharding<[["dp"]]>
  }
}

// -----

module attributes {ds.mesh = #ds.mesh<axes = ["dp", "tp"], shape = [2, 2]>} {
  // expected-error @+1 {{sharding names mesh axis 'pp', which the module's mesh does not have}}
  ds.parameter @w trainable : tensor<4x4xf32> sharding #ds.sharding<[["dp"], ["pp"]]>
}

// -----

func.func @parameter_in_func() {
  // expected-error @+1 {{expects parent op 'builtin.module'}}
  ds.parameter @w trainable : tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{statically shaped tensor}}
ds.parameter @w trainable : tensor<*xf32>

// -----

//===----------------------------------------------------------------------===//
// ds.get_parameter / ds.assign_buffer (symbol uses)
//===----------------------------------------------------------------------===//

func.func @unknown_symbol() -> tensor<4xf32> {
  // expected-error @+1 {{'nope' is not a ds.parameter}}
  %0 = ds.get_parameter @nope : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @not_a_parameter() -> tensor<4xf32> {
  // expected-error @+1 {{'not_a_parameter' is not a ds.parameter}}
  %0 = ds.get_parameter @not_a_parameter : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

ds.parameter @w trainable : tensor<4xf32>
func.func @get_type_mismatch() -> tensor<4xf16> {
  // expected-error @+1 {{result type 'tensor<4xf16>' differs from the symbol's 'tensor<4xf32>'}}
  %0 = ds.get_parameter @w : tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

ds.parameter @w trainable : tensor<4xf32>
func.func @get_shape_mismatch() -> tensor<2x2xf32> {
  // expected-error @+1 {{differs from the symbol's}}
  %0 = ds.get_parameter @w : tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @assign_unknown(%v: tensor<4xf32>) {
  // expected-error @+1 {{'nope' is not a ds.parameter}}
  ds.assign_buffer @nope = %v : tensor<4xf32>
  return
}

// -----

func.func @assign_not_a_parameter(%v: tensor<4xf32>) {
  // expected-error @+1 {{'assign_not_a_parameter' is not a ds.parameter}}
  ds.assign_buffer @assign_not_a_parameter = %v : tensor<4xf32>
  return
}

// -----

ds.parameter @w trainable : tensor<4xf32>
func.func @assign_trainable(%v: tensor<4xf32>) {
  // expected-error @+1 {{'w' is a trainable parameter; only buffers can be assigned}}
  ds.assign_buffer @w = %v : tensor<4xf32>
  return
}

// -----

ds.parameter @running_mean : tensor<4xf32>
func.func @assign_type_mismatch(%v: tensor<5xf32>) {
  // expected-error @+1 {{value type 'tensor<5xf32>' differs from the buffer's 'tensor<4xf32>'}}
  ds.assign_buffer @running_mean = %v : tensor<5xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Constants and conversions
//===----------------------------------------------------------------------===//

func.func @constant_type_mismatch() {
  // expected-error @+1 {{failed to verify that all of {value, result} have same type}}
  %0 = "ds.constant"() <{value = dense<1.0> : tensor<2xf32>}> : () -> tensor<3xf32>
  return
}

// -----

func.func @convert_shape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{changes the shape [2, 3] to [3, 2]}}
  %0 = ds.convert %x : tensor<2x3xf32> -> tensor<3x2xf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

func.func @unary_type(%x: tensor<2xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "ds.exp"(%x) : (tensor<2xf32>) -> tensor<2xf16>
  return
}

// -----

func.func @unary_int(%x: tensor<2xi32>) {
  // expected-error @+1 {{floating-point}}
  %0 = ds.relu %x : tensor<2xi32>
  return
}

// -----

func.func @binary_element_type(%a: tensor<2xf32>, %b: tensor<2xf16>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'f16'}}
  %0 = ds.add %a, %b : tensor<2xf32>, tensor<2xf16> -> tensor<2xf32>
  return
}

// -----

func.func @binary_result_element_type(%a: tensor<2xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'bf16'}}
  %0 = ds.mul %a, %b : tensor<2xf32>, tensor<2xf32> -> tensor<2xbf16>
  return
}

// -----

func.func @binary_broadcast(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) {
  // expected-error @+1 {{shapes [2, 3] and [4, 3] do not broadcast: dimension 0 is 2 vs 4}}
  %0 = ds.sub %a, %b : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @binary_result_shape(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{result shape [3] does not match the inferred shape [2, 3]}}
  %0 = ds.div %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<3xf32>
  return
}

// -----

func.func @cmp_element_types(%a: tensor<2xf32>, %b: tensor<2xi64>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'i64'}}
  %0 = ds.cmp lt, %a, %b : tensor<2xf32>, tensor<2xi64> -> tensor<2xi1>
  return
}

// -----

func.func @cmp_broadcast(%a: tensor<2xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{shapes [2] and [3] do not broadcast}}
  %0 = ds.cmp eq, %a, %b : tensor<2xf32>, tensor<3xf32> -> tensor<3xi1>
  return
}

// -----

func.func @cmp_result_shape(%a: tensor<2x1xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{result shape [2, 1] does not match the inferred shape [2, 3]}}
  %0 = ds.cmp ne, %a, %b : tensor<2x1xf32>, tensor<3xf32> -> tensor<2x1xi1>
  return
}

// -----

func.func @cmp_result_not_bool(%a: tensor<2xf32>) {
  // expected-error @+1 {{1-bit signless integer}}
  %0 = ds.cmp eq, %a, %a : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  return
}

// -----

func.func @where_cond_not_bool(%c: tensor<2xi8>, %a: tensor<2xf32>) {
  // expected-error @+1 {{1-bit signless integer}}
  %0 = ds.where %c, %a, %a : (tensor<2xi8>, tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @where_element_types(%c: tensor<2xi1>, %a: tensor<2xf32>, %b: tensor<2xf16>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'f16'}}
  %0 = ds.where %c, %a, %b : (tensor<2xi1>, tensor<2xf32>, tensor<2xf16>) -> tensor<2xf32>
  return
}

// -----

func.func @where_values_broadcast(%c: tensor<2xi1>, %a: tensor<2xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{shapes [2] and [3] do not broadcast}}
  %0 = ds.where %c, %a, %b : (tensor<2xi1>, tensor<2xf32>, tensor<3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @where_cond_broadcast(%c: tensor<4x1xi1>, %a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{shapes [4, 1] and [2, 3] do not broadcast: dimension 0 is 4 vs 2}}
  %0 = ds.where %c, %a, %b : (tensor<4x1xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @where_result_shape(%c: tensor<4x1x1xi1>, %a: tensor<2x3xf32>, %b: tensor<f32>) {
  // expected-error @+1 {{result shape [2, 3] does not match the inferred shape [4, 2, 3]}}
  %0 = ds.where %c, %a, %b : (tensor<4x1x1xi1>, tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @dropout_zero(%x: tensor<2xf32>) {
  // expected-error @+1 {{p must be in (0, 1), got 0.000000e+00}}
  %0 = ds.dropout %x p = 0.0 : tensor<2xf32>
  return
}

// -----

func.func @dropout_one(%x: tensor<2xf32>) {
  // expected-error @+1 {{p must be in (0, 1), got 1.000000e+00}}
  %0 = ds.dropout %x p = 1.0 : tensor<2xf32>
  return
}

// -----

func.func @dropout_negative(%x: tensor<2xf32>) {
  // expected-error @+1 {{p must be in (0, 1), got -5.000000e-01}}
  %0 = ds.dropout %x p = -0.5 : tensor<2xf32>
  return
}

// -----

func.func @dropout_nan(%x: tensor<2xf32>) {
  // expected-error @+1 {{p must be in (0, 1), got nan}}
  %0 = ds.dropout %x p = 0x7FF8000000000000 : tensor<2xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Reductions and softmax
//===----------------------------------------------------------------------===//

func.func @reduce_element_type(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'f64'}}
  %0 = ds.sum %x dims = [0] : tensor<2x3xf32> -> tensor<3xf64>
  return
}

// -----

func.func @reduce_dim_too_large(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{reduction dimension 2 is out of range for rank 2}}
  %0 = ds.mean %x dims = [2] : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @reduce_dim_negative(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{reduction dimension -1 is out of range for rank 2}}
  %0 = ds.amax %x dims = [-1] : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

func.func @reduce_dim_twice(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{reduction dimension 1 appears twice}}
  %0 = ds.sum %x dims = [1, 0, 1] : tensor<2x3xf32> -> tensor<f32>
  return
}

// -----

func.func @reduce_result_shape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{result shape [2] does not match the inferred shape [2, 1]}}
  %0 = ds.sum %x dims = [1] keepdim : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

func.func @reduce_result_shape_nokeepdim(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{result shape [1, 3] does not match the inferred shape [3]}}
  %0 = ds.mean %x dims = [0] : tensor<2x3xf32> -> tensor<1x3xf32>
  return
}

// -----

func.func @softmax_dim(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %0 = ds.softmax %x dim = 2 : tensor<2x3xf32>
  return
}

// -----

func.func @log_softmax_dim(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{dim -1 is out of range for rank 2}}
  %0 = ds.log_softmax %x dim = -1 : tensor<2x3xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// layer_norm
//===----------------------------------------------------------------------===//

func.func @layer_norm_not_trailing(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{normalized_shape [3] is not the trailing dimensions of the input [2, 3, 4]}}
  %0 = ds.layer_norm %x normalized_shape = [3] eps = 1.0e-5 : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @layer_norm_empty(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{normalized_shape [] is not the trailing dimensions}}
  %0 = ds.layer_norm %x normalized_shape = [] eps = 1.0e-5 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_too_long(%x: tensor<3xf32>) {
  // expected-error @+1 {{normalized_shape [2, 3] is not the trailing dimensions of the input [3]}}
  %0 = ds.layer_norm %x normalized_shape = [2, 3] eps = 1.0e-5 : (tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @layer_norm_result_type(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{result type must equal the input type}}
  %0 = ds.layer_norm %x normalized_shape = [3] eps = 1.0e-5 : (tensor<2x3xf32>) -> tensor<2x3xf16>
  return
}

// -----

func.func @layer_norm_eps_zero(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{eps must be > 0, got 0.000000e+00}}
  %0 = ds.layer_norm %x normalized_shape = [3] eps = 0.0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_eps_negative(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{eps must be > 0, got -1.000000e+00}}
  %0 = ds.layer_norm %x normalized_shape = [3] eps = -1.0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_weight_element_type(%x: tensor<2x3xf32>, %w: tensor<3xf16>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'f16'}}
  %0 = ds.layer_norm %x weight %w normalized_shape = [3] eps = 1.0e-5 : (tensor<2x3xf32>, tensor<3xf16>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_bias_element_type(%x: tensor<2x3xf32>, %b: tensor<3xbf16>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'bf16'}}
  %0 = ds.layer_norm %x bias %b normalized_shape = [3] eps = 1.0e-5 : (tensor<2x3xf32>, tensor<3xbf16>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_weight_shape(%x: tensor<2x3xf32>, %w: tensor<2x3xf32>) {
  // expected-error @+1 {{layer_norm weight must be [3], got [2, 3]}}
  %0 = ds.layer_norm %x weight %w normalized_shape = [3] eps = 1.0e-5 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_bias_shape(%x: tensor<2x3xf32>, %w: tensor<3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{layer_norm bias must be [3], got [4]}}
  %0 = ds.layer_norm %x weight %w bias %b normalized_shape = [3] eps = 1.0e-5 : (tensor<2x3xf32>, tensor<3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// batch_norm
//===----------------------------------------------------------------------===//

func.func @batch_norm_rank(%x: tensor<8xf32>) {
  // expected-error @+1 {{batch_norm input must have rank >= 2 ([N, C, ...]), got [8]}}
  %r, %m, %v = ds.batch_norm %x eps = 1.0e-5 : (tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @batch_norm_result_type(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{result type must equal the input type}}
  %r, %m, %v = ds.batch_norm %x eps = 1.0e-5 : (tensor<2x8xf32>) -> (tensor<2x4xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @batch_norm_mean_shape(%x: tensor<2x8x3x3xf32>) {
  // expected-error @+1 {{mean and var must be [8]}}
  %r, %m, %v = ds.batch_norm %x eps = 1.0e-5 : (tensor<2x8x3x3xf32>) -> (tensor<2x8x3x3xf32>, tensor<2xf32>, tensor<8xf32>)
  return
}

// -----

func.func @batch_norm_var_shape(%x: tensor<2x8x3x3xf32>) {
  // expected-error @+1 {{mean and var must be [8]}}
  %r, %m, %v = ds.batch_norm %x eps = 1.0e-5 : (tensor<2x8x3x3xf32>) -> (tensor<2x8x3x3xf32>, tensor<8xf32>, tensor<1x8xf32>)
  return
}

// -----

func.func @batch_norm_eps(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{eps must be > 0, got 0.000000e+00}}
  %r, %m, %v = ds.batch_norm %x eps = 0.0 : (tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @batch_norm_weight_element_type(%x: tensor<2x8xf32>, %w: tensor<8xf16>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'f16'}}
  %r, %m, %v = ds.batch_norm %x weight %w eps = 1.0e-5 : (tensor<2x8xf32>, tensor<8xf16>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @batch_norm_weight_shape(%x: tensor<2x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{batch_norm weight must be [8], got [4]}}
  %r, %m, %v = ds.batch_norm %x weight %w eps = 1.0e-5 : (tensor<2x8xf32>, tensor<4xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @batch_norm_bias_shape(%x: tensor<2x8xf32>, %b: tensor<8x1xf32>) {
  // expected-error @+1 {{batch_norm bias must be [8], got [8, 1]}}
  %r, %m, %v = ds.batch_norm %x bias %b eps = 1.0e-5 : (tensor<2x8xf32>, tensor<8x1xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @batch_norm_inference_rank(%x: tensor<f32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{batch_norm input must have rank >= 2 ([N, C, ...]), got []}}
  %0 = ds.batch_norm_inference %x stats %s, %s eps = 1.0e-5 : (tensor<f32>, tensor<8xf32>, tensor<8xf32>) -> tensor<f32>
  return
}

// -----

func.func @batch_norm_inference_result_type(%x: tensor<2x8xf32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{result type must equal the input type}}
  %0 = ds.batch_norm_inference %x stats %s, %s eps = 1.0e-5 : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf16>
  return
}

// -----

func.func @batch_norm_inference_running_mean(%x: tensor<2x8xf32>, %rm: tensor<4xf32>, %rv: tensor<8xf32>) {
  // expected-error @+1 {{running_mean and running_var must be [8], got [4]}}
  %0 = ds.batch_norm_inference %x stats %rm, %rv eps = 1.0e-5 : (tensor<2x8xf32>, tensor<4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @batch_norm_inference_running_var(%x: tensor<2x8xf32>, %rm: tensor<8xf32>, %rv: tensor<16xf32>) {
  // expected-error @+1 {{running_mean and running_var must be [8], got [16]}}
  %0 = ds.batch_norm_inference %x stats %rm, %rv eps = 1.0e-5 : (tensor<2x8xf32>, tensor<8xf32>, tensor<16xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @batch_norm_inference_eps(%x: tensor<2x8xf32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{eps must be > 0, got -1.000000e-05}}
  %0 = ds.batch_norm_inference %x stats %s, %s eps = -1.0e-5 : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @batch_norm_inference_bias_element_type(%x: tensor<2x8xf32>, %s: tensor<8xf32>, %b: tensor<8xf64>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'f64'}}
  %0 = ds.batch_norm_inference %x bias %b stats %s, %s eps = 1.0e-5 : (tensor<2x8xf32>, tensor<8xf64>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @batch_norm_inference_weight_shape(%x: tensor<2x8xf32>, %s: tensor<8xf32>, %w: tensor<2xf32>) {
  // expected-error @+1 {{batch_norm weight must be [8], got [2]}}
  %0 = ds.batch_norm_inference %x weight %w stats %s, %s eps = 1.0e-5 : (tensor<2x8xf32>, tensor<2xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @batch_norm_inference_bias_shape(%x: tensor<2x8xf32>, %s: tensor<8xf32>, %b: tensor<9xf32>) {
  // expected-error @+1 {{batch_norm bias must be [8], got [9]}}
  %0 = ds.batch_norm_inference %x bias %b stats %s, %s eps = 1.0e-5 : (tensor<2x8xf32>, tensor<9xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// matmul, linear, embedding, cross_entropy
//===----------------------------------------------------------------------===//

func.func @matmul_element_type(%a: tensor<2x3xf32>, %b: tensor<3x4xf16>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'f16'}}
  %0 = ds.matmul %a, %b : tensor<2x3xf32>, tensor<3x4xf16> -> tensor<2x4xf32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<3xf32>, %b: tensor<3x4xf32>) {
  // expected-error @+1 {{matmul operands must have rank >= 2, got [3] and [3, 4]}}
  %0 = ds.matmul %a, %b : tensor<3xf32>, tensor<3x4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @matmul_rank_rhs(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{matmul operands must have rank >= 2, got [2, 3] and [3]}}
  %0 = ds.matmul %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2xf32>
  return
}

// -----

func.func @matmul_contraction(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{matmul contraction mismatch: [2, 3] x [4, 5] (3 vs 4)}}
  %0 = ds.matmul %a, %b : tensor<2x3xf32>, tensor<4x5xf32> -> tensor<2x5xf32>
  return
}

// -----

func.func @matmul_batch_broadcast(%a: tensor<2x2x3xf32>, %b: tensor<5x3x4xf32>) {
  // expected-error @+1 {{shapes [2] and [5] do not broadcast}}
  %0 = ds.matmul %a, %b : tensor<2x2x3xf32>, tensor<5x3x4xf32> -> tensor<2x2x4xf32>
  return
}

// -----

func.func @matmul_result_shape(%a: tensor<7x2x3xf32>, %b: tensor<3x4xf32>) {
  // expected-error @+1 {{result shape [2, 4] does not match the inferred shape [7, 2, 4]}}
  %0 = ds.matmul %a, %b : tensor<7x2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @linear_element_type(%x: tensor<2x3xf32>, %w: tensor<4x3xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'f16'}}
  %0 = ds.linear %x, %w, %b : (tensor<2x3xf32>, tensor<4x3xf32>, tensor<4xf16>) -> tensor<2x4xf32>
  return
}

// -----

func.func @linear_weight_rank(%x: tensor<2x3xf32>, %w: tensor<3xf32>) {
  // expected-error @+1 {{linear weight must be 2-D [out, in], got [3]}}
  %0 = ds.linear %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @linear_input_rank(%x: tensor<f32>, %w: tensor<4x1xf32>) {
  // expected-error @+1 {{linear input must have rank >= 1}}
  %0 = ds.linear %x, %w : (tensor<f32>, tensor<4x1xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @linear_features(%x: tensor<2x3xf32>, %w: tensor<4x5xf32>) {
  // expected-error @+1 {{linear input [2, 3] has 3 features but the weight [4, 5] expects 5}}
  %0 = ds.linear %x, %w : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @linear_bias_size(%x: tensor<2x3xf32>, %w: tensor<4x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{linear bias must be [4], got [3]}}
  %0 = ds.linear %x, %w, %b : (tensor<2x3xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @linear_bias_rank(%x: tensor<2x3xf32>, %w: tensor<4x3xf32>, %b: tensor<1x4xf32>) {
  // expected-error @+1 {{linear bias must be [4], got [1, 4]}}
  %0 = ds.linear %x, %w, %b : (tensor<2x3xf32>, tensor<4x3xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @linear_result_shape(%x: tensor<2x3xf32>, %w: tensor<4x3xf32>) {
  // expected-error @+1 {{result shape [2, 3] does not match the inferred shape [2, 4]}}
  %0 = ds.linear %x, %w : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @embedding_element_type(%w: tensor<10x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'f16'}}
  %0 = ds.embedding %w[%i] : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xf16>
  return
}

// -----

func.func @embedding_weight_rank(%w: tensor<10x4x2xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{embedding weight must be 2-D [num, dim], got [10, 4, 2]}}
  %0 = ds.embedding %w[%i] : (tensor<10x4x2xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  return
}

// -----

func.func @embedding_result_shape(%w: tensor<10x4xf32>, %i: tensor<2x3xi32>) {
  // expected-error @+1 {{result shape [6, 4] does not match the inferred shape [2, 3, 4]}}
  %0 = ds.embedding %w[%i] : (tensor<10x4xf32>, tensor<2x3xi32>) -> tensor<6x4xf32>
  return
}

// -----

func.func @embedding_float_indices(%w: tensor<10x4xf32>, %i: tensor<3xf32>) {
  // expected-error @+1 {{64-bit signless integer or 32-bit signless integer}}
  %0 = ds.embedding %w[%i] : (tensor<10x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @cross_entropy_element_type(%l: tensor<4x10xf32>, %t: tensor<4xi64>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'f16'}}
  %0 = ds.cross_entropy %l, %t : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f16>
  return
}

// -----

func.func @cross_entropy_label_smoothing_high(%l: tensor<4x10xf32>, %t: tensor<4xi64>) {
  // expected-error @+1 {{label_smoothing must be in [0, 1], got 1.500000e+00}}
  %0 = ds.cross_entropy %l, %t {label_smoothing = 1.5 : f64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_label_smoothing_negative(%l: tensor<4x10xf32>, %t: tensor<4xi64>) {
  // expected-error @+1 {{label_smoothing must be in [0, 1], got -2.500000e-01}}
  %0 = ds.cross_entropy %l, %t {label_smoothing = -0.25 : f64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_1d_target(%l: tensor<10xf32>, %t: tensor<1xi64>) {
  // expected-error @+1 {{cross_entropy of logits [10] needs a scalar target, got [1]}}
  %0 = ds.cross_entropy %l, %t : (tensor<10xf32>, tensor<1xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_logits_rank(%l: tensor<2x4x10xf32>, %t: tensor<2x4xi64>) {
  // expected-error @+1 {{cross_entropy logits must be [N, C] or [C], got [2, 4, 10] (reshape extra dimensions into N)}}
  %0 = ds.cross_entropy %l, %t : (tensor<2x4x10xf32>, tensor<2x4xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_scalar_logits(%l: tensor<f32>, %t: tensor<i64>) {
  // expected-error @+1 {{cross_entropy logits must be [N, C] or [C], got []}}
  %0 = ds.cross_entropy %l, %t : (tensor<f32>, tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_target_size(%l: tensor<4x10xf32>, %t: tensor<5xi64>) {
  // expected-error @+1 {{cross_entropy target must be [4] for logits [4, 10], got [5]}}
  %0 = ds.cross_entropy %l, %t : (tensor<4x10xf32>, tensor<5xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_target_rank(%l: tensor<4x10xf32>, %t: tensor<4x1xi64>) {
  // expected-error @+1 {{cross_entropy target must be [4] for logits [4, 10], got [4, 1]}}
  %0 = ds.cross_entropy %l, %t : (tensor<4x10xf32>, tensor<4x1xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_result_none(%l: tensor<4x10xf32>, %t: tensor<4xi64>) {
  // expected-error @+1 {{result shape [] does not match the inferred shape [4]}}
  %0 = ds.cross_entropy %l, %t {reduction = #ds<reduction none>} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_result_mean(%l: tensor<4x10xf32>, %t: tensor<4xi64>) {
  // expected-error @+1 {{result shape [4] does not match the inferred shape []}}
  %0 = ds.cross_entropy %l, %t : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Shape and layout
//===----------------------------------------------------------------------===//

func.func @reshape_element_type(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'i32'}}
  %0 = ds.reshape %x : tensor<2x3xf32> -> tensor<6xi32>
  return
}

// -----

func.func @reshape_count(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{cannot reshape [2, 3] (6 elements) to [7] (7 elements)}}
  %0 = ds.reshape %x : tensor<2x3xf32> -> tensor<7xf32>
  return
}

// -----

func.func @transpose_element_type(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'f16'}}
  %0 = ds.transpose %x perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf16>
  return
}

// -----

func.func @transpose_perm_size(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{permutation has 3 entries for rank 2}}
  %0 = ds.transpose %x perm = [1, 0, 2] : tensor<2x3xf32> -> tensor<3x2xf32>
  return
}

// -----

func.func @transpose_duplicate(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{[0, 0] is not a permutation of [0, 2)}}
  %0 = ds.transpose %x perm = [0, 0] : tensor<2x3xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @transpose_out_of_range(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{[2, 0] is not a permutation of [0, 2)}}
  %0 = ds.transpose %x perm = [2, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  return
}

// -----

func.func @transpose_negative(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{[-1, 0] is not a permutation of [0, 2)}}
  %0 = ds.transpose %x perm = [-1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  return
}

// -----

func.func @transpose_result_shape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{result shape [2, 3] does not match the inferred shape [3, 2]}}
  %0 = ds.transpose %x perm = [1, 0] : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @broadcast_to_element_type(%x: tensor<3xf32>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'f64'}}
  %0 = ds.broadcast_to %x : tensor<3xf32> -> tensor<2x3xf64>
  return
}

// -----

func.func @broadcast_to_lower_rank(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{cannot broadcast [2, 3] to the lower-rank [3]}}
  %0 = ds.broadcast_to %x : tensor<2x3xf32> -> tensor<3xf32>
  return
}

// -----

func.func @broadcast_to_dim(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{cannot broadcast [2, 3] to [4, 2, 4]: dimension 1 is 3, not 1 or 4}}
  %0 = ds.broadcast_to %x : tensor<2x3xf32> -> tensor<4x2x4xf32>
  return
}

// -----

func.func @slice_element_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'f16'}}
  %0 = ds.slice %x dim = 0 [0 : 2] : tensor<4xf32> -> tensor<2xf16>
  return
}

// -----

func.func @slice_dim(%x: tensor<4x5xf32>) {
  // expected-error @+1 {{slice dimension 2 is out of range for rank 2}}
  %0 = ds.slice %x dim = 2 [0 : 2] : tensor<4x5xf32> -> tensor<4x2xf32>
  return
}

// -----

func.func @slice_dim_negative(%x: tensor<4x5xf32>) {
  // expected-error @+1 {{slice dimension -1 is out of range for rank 2}}
  %0 = ds.slice %x dim = -1 [0 : 2] : tensor<4x5xf32> -> tensor<4x2xf32>
  return
}

// -----

func.func @slice_step(%x: tensor<4xf32>) {
  // expected-error @+1 {{slice step must be >= 1, got 0}}
  %0 = ds.slice %x dim = 0 [0 : 4 : 0] : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @slice_end(%x: tensor<4xf32>) {
  // expected-error @+1 {{slice [2:5] is out of range for dimension 0 of size 4}}
  %0 = ds.slice %x dim = 0 [2 : 5] : tensor<4xf32> -> tensor<3xf32>
  return
}

// -----

func.func @slice_start_negative(%x: tensor<4xf32>) {
  // expected-error @+1 {{slice [-1:2] is out of range for dimension 0 of size 4}}
  %0 = ds.slice %x dim = 0 [-1 : 2] : tensor<4xf32> -> tensor<3xf32>
  return
}

// -----

func.func @slice_start_after_end(%x: tensor<4xf32>) {
  // expected-error @+1 {{slice [3:1] is out of range for dimension 0 of size 4}}
  %0 = ds.slice %x dim = 0 [3 : 1] : tensor<4xf32> -> tensor<0xf32>
  return
}

// -----

func.func @slice_result_shape(%x: tensor<2x5xf32>) {
  // expected-error @+1 {{result shape [2, 2] does not match the inferred shape [2, 3]}}
  %0 = ds.slice %x dim = 1 [0 : 5 : 2] : tensor<2x5xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @concat_empty() {
  // expected-error @+1 {{concat needs at least one input}}
  %0 = ds.concat dim = 0 : () -> tensor<2xf32>
  return
}

// -----

func.func @concat_element_type(%a: tensor<2xf32>, %b: tensor<2xf16>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'f16'}}
  %0 = ds.concat %a, %b dim = 0 : (tensor<2xf32>, tensor<2xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @concat_dim(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) {
  // expected-error @+1 {{concat dimension 2 is out of range for rank 2}}
  %0 = ds.concat %a, %b dim = 2 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_dim_negative(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{concat dimension -1 is out of range for rank 2}}
  %0 = ds.concat %a dim = -1 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @concat_rank(%a: tensor<2x3xf32>, %b: tensor<2x3x1xf32>) {
  // expected-error @+1 {{concat inputs have different ranks: [2, 3] and [2, 3, 1]}}
  %0 = ds.concat %a, %b dim = 0 : (tensor<2x3xf32>, tensor<2x3x1xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_other_dim(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+1 {{concat inputs [2, 3] and [2, 4] differ in dimension 1}}
  %0 = ds.concat %a, %b dim = 0 : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_result_shape(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+1 {{result shape [2, 8] does not match the inferred shape [2, 7]}}
  %0 = ds.concat %a, %b dim = 1 : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// conv2d
//===----------------------------------------------------------------------===//

func.func @conv2d_element_type(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf16>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'f16'}}
  %0 = ds.conv2d %x, %w stride = [1, 1] padding = [0, 0] dilation = [1, 1] : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf16>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv2d_input_rank(%x: tensor<4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+1 {{conv2d input must be [N, C, H, W], got [4, 8, 8]}}
  %0 = ds.conv2d %x, %w stride = [1, 1] padding = [0, 0] dilation = [1, 1] : (tensor<4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<6x6x6xf32>
  return
}

// -----

func.func @conv2d_weight_rank(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3xf32>) {
  // expected-error @+1 {{conv2d weight must be [O, C/groups, KH, KW], got [6, 4, 3]}}
  %0 = ds.conv2d %x, %w stride = [1, 1] padding = [0, 0] dilation = [1, 1] : (tensor<1x4x8x8xf32>, tensor<6x4x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv2d_groups_zero(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+1 {{conv2d groups 0 must divide input channels 4 and output channels 6}}
  %0 = ds.conv2d %x, %w stride = [1, 1] padding = [0, 0] dilation = [1, 1] {groups = 0 : i64} : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv2d_groups_input_channels(%x: tensor<1x4x8x8xf32>, %w: tensor<6x1x3x3xf32>) {
  // expected-error @+1 {{conv2d groups 3 must divide input channels 4 and output channels 6}}
  %0 = ds.conv2d %x, %w stride = [1, 1] padding = [0, 0] dilation = [1, 1] {groups = 3 : i64} : (tensor<1x4x8x8xf32>, tensor<6x1x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv2d_groups_output_channels(%x: tensor<1x4x8x8xf32>, %w: tensor<6x1x3x3xf32>) {
  // expected-error @+1 {{conv2d groups 4 must divide input channels 4 and output channels 6}}
  %0 = ds.conv2d %x, %w stride = [1, 1] padding = [0, 0] dilation = [1, 1] {groups = 4 : i64} : (tensor<1x4x8x8xf32>, tensor<6x1x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv2d_channels(%x: tensor<1x4x8x8xf32>, %w: tensor<6x3x3x3xf32>) {
  // expected-error @+1 {{conv2d input [1, 4, 8, 8] has 4 channels but the weight [6, 3, 3, 3] expects 3}}
  %0 = ds.conv2d %x, %w stride = [1, 1] padding = [0, 0] dilation = [1, 1] : (tensor<1x4x8x8xf32>, tensor<6x3x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv2d_channels_grouped(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+1 {{has 4 channels but the weight [6, 4, 3, 3] expects 8}}
  %0 = ds.conv2d %x, %w stride = [1, 1] padding = [0, 0] dilation = [1, 1] {groups = 2 : i64} : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv2d_bias(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{conv2d bias must be [6], got [4]}}
  %0 = ds.conv2d %x, %w, %b stride = [1, 1] padding = [0, 0] dilation = [1, 1] : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>, tensor<4xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv2d_bias_element_type(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>, %b: tensor<6xbf16>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'bf16'}}
  %0 = ds.conv2d %x, %w, %b stride = [1, 1] padding = [0, 0] dilation = [1, 1] : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>, tensor<6xbf16>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv2d_stride(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+1 {{conv2d needs stride >= 1, dilation >= 1 and padding >= 0}}
  %0 = ds.conv2d %x, %w stride = [1, 0] padding = [0, 0] dilation = [1, 1] : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv2d_dilation(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+1 {{conv2d needs stride >= 1, dilation >= 1 and padding >= 0}}
  %0 = ds.conv2d %x, %w stride = [1, 1] padding = [0, 0] dilation = [0, 1] : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv2d_padding(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+1 {{conv2d needs stride >= 1, dilation >= 1 and padding >= 0}}
  %0 = ds.conv2d %x, %w stride = [1, 1] padding = [0, -1] dilation = [1, 1] : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv2d_kernel_too_large(%x: tensor<1x4x4x4xf32>, %w: tensor<6x4x5x5xf32>) {
  // expected-error @+1 {{conv2d kernel [5, 5] (dilated) is larger than the padded input [4, 4]}}
  %0 = ds.conv2d %x, %w stride = [1, 1] padding = [0, 0] dilation = [1, 1] : (tensor<1x4x4x4xf32>, tensor<6x4x5x5xf32>) -> tensor<1x6x1x1xf32>
  return
}

// -----

func.func @conv2d_dilated_kernel_too_large(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+1 {{conv2d kernel [3, 3] (dilated) is larger than the padded input [8, 8]}}
  %0 = ds.conv2d %x, %w stride = [1, 1] padding = [0, 0] dilation = [1, 4] : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x1xf32>
  return
}

// -----

func.func @conv2d_result_shape(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+1 {{result shape [1, 6, 8, 8] does not match the inferred shape [1, 6, 3, 3]}}
  %0 = ds.conv2d %x, %w stride = [2, 2] padding = [0, 0] dilation = [1, 1] : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x8x8xf32>
  return
}

// -----

func.func @conv2d_stride_count(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+1 {{with exactly 2 elements}}
  %0 = ds.conv2d %x, %w stride = [1] padding = [0, 0] dilation = [1, 1] : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

func.func @max_pool_element_type(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'f16'}}
  %0 = ds.max_pool2d %x kernel = [2, 2] stride = [2, 2] padding = [0, 0] dilation = [1, 1] : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf16>
  return
}

// -----

func.func @max_pool_rank(%x: tensor<4x8x8xf32>) {
  // expected-error @+1 {{pool2d input must be [N, C, H, W], got [4, 8, 8]}}
  %0 = ds.max_pool2d %x kernel = [2, 2] stride = [2, 2] padding = [0, 0] dilation = [1, 1] : tensor<4x8x8xf32> -> tensor<4x4x4xf32>
  return
}

// -----

func.func @max_pool_kernel(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{pool2d needs kernel, stride and dilation >= 1}}
  %0 = ds.max_pool2d %x kernel = [0, 2] stride = [2, 2] padding = [0, 0] dilation = [1, 1] : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  return
}

// -----

func.func @max_pool_stride(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{pool2d needs kernel, stride and dilation >= 1}}
  %0 = ds.max_pool2d %x kernel = [2, 2] stride = [2, -1] padding = [0, 0] dilation = [1, 1] : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  return
}

// -----

func.func @max_pool_dilation(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{pool2d needs kernel, stride and dilation >= 1}}
  %0 = ds.max_pool2d %x kernel = [2, 2] stride = [2, 2] padding = [0, 0] dilation = [1, 0] : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  return
}

// -----

func.func @max_pool_padding_large(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{pool2d padding 2 must be in [0, kernel/2 = 1]}}
  %0 = ds.max_pool2d %x kernel = [3, 3] stride = [2, 2] padding = [2, 0] dilation = [1, 1] : tensor<1x4x8x8xf32> -> tensor<1x4x5x3xf32>
  return
}

// -----

func.func @max_pool_padding_negative(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{pool2d padding -1 must be in [0, kernel/2 = 1]}}
  %0 = ds.max_pool2d %x kernel = [3, 3] stride = [2, 2] padding = [0, -1] dilation = [1, 1] : tensor<1x4x8x8xf32> -> tensor<1x4x3x3xf32>
  return
}

// -----

func.func @max_pool_window(%x: tensor<1x4x2x8xf32>) {
  // expected-error @+1 {{pool2d window is larger than the padded input [2, 8]}}
  %0 = ds.max_pool2d %x kernel = [3, 3] stride = [1, 1] padding = [0, 0] dilation = [1, 1] : tensor<1x4x2x8xf32> -> tensor<1x4x1x6xf32>
  return
}

// -----

func.func @max_pool_dilated_window(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{pool2d window is larger than the padded input [8, 8]}}
  %0 = ds.max_pool2d %x kernel = [3, 3] stride = [1, 1] padding = [0, 0] dilation = [1, 5] : tensor<1x4x8x8xf32> -> tensor<1x4x6x1xf32>
  return
}

// -----

func.func @max_pool_result_shape(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{result shape [1, 4, 4, 4] does not match the inferred shape [1, 4, 3, 3]}}
  %0 = ds.max_pool2d %x kernel = [2, 2] stride = [3, 3] padding = [0, 0] dilation = [1, 1] : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  return
}

// -----

func.func @max_pool_kernel_count(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{with exactly 2 elements}}
  %0 = ds.max_pool2d %x kernel = [2, 2, 2] stride = [2, 2] padding = [0, 0] dilation = [1, 1] : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  return
}

// -----

func.func @avg_pool_element_type(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'f64'}}
  %0 = ds.avg_pool2d %x kernel = [2, 2] stride = [2, 2] padding = [0, 0] : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf64>
  return
}

// -----

func.func @avg_pool_rank(%x: tensor<1x1x4x8x8xf32>) {
  // expected-error @+1 {{pool2d input must be [N, C, H, W], got [1, 1, 4, 8, 8]}}
  %0 = ds.avg_pool2d %x kernel = [2, 2] stride = [2, 2] padding = [0, 0] : tensor<1x1x4x8x8xf32> -> tensor<1x1x4x4x4xf32>
  return
}

// -----

func.func @avg_pool_stride(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{pool2d needs kernel, stride and dilation >= 1}}
  %0 = ds.avg_pool2d %x kernel = [2, 2] stride = [0, 2] padding = [0, 0] : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  return
}

// -----

func.func @avg_pool_padding(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{pool2d padding 1 must be in [0, kernel/2 = 0]}}
  %0 = ds.avg_pool2d %x kernel = [1, 1] stride = [1, 1] padding = [1, 1] count_include_pad : tensor<1x4x8x8xf32> -> tensor<1x4x10x10xf32>
  return
}

// -----

func.func @avg_pool_window(%x: tensor<1x4x8x1xf32>) {
  // expected-error @+1 {{pool2d window is larger than the padded input [8, 1]}}
  %0 = ds.avg_pool2d %x kernel = [2, 4] stride = [2, 2] padding = [0, 1] : tensor<1x4x8x1xf32> -> tensor<1x4x4x1xf32>
  return
}

// -----

func.func @avg_pool_result_shape(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{result shape [1, 4, 4, 4] does not match the inferred shape [1, 4, 5, 5]}}
  %0 = ds.avg_pool2d %x kernel = [3, 3] stride = [2, 2] padding = [1, 1] ceil_mode : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  return
}

// -----

func.func @adaptive_pool_element_type(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'f16'}}
  %0 = ds.adaptive_avg_pool2d %x output_size = [1, 1] : tensor<1x4x8x8xf32> -> tensor<1x4x1x1xf16>
  return
}

// -----

func.func @adaptive_pool_rank(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{input must be [N, C, H, W] or [C, H, W], got [8, 8]}}
  %0 = ds.adaptive_avg_pool2d %x output_size = [1, 1] : tensor<8x8xf32> -> tensor<1x1xf32>
  return
}

// -----

func.func @adaptive_pool_output_size(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{output_size must be >= 1}}
  %0 = ds.adaptive_avg_pool2d %x output_size = [1, 0] : tensor<1x4x8x8xf32> -> tensor<1x4x1x0xf32>
  return
}

// -----

func.func @adaptive_pool_result_shape(%x: tensor<4x8x8xf32>) {
  // expected-error @+1 {{result shape [4, 2, 2] does not match the inferred shape [4, 3, 3]}}
  %0 = ds.adaptive_avg_pool2d %x output_size = [3, 3] : tensor<4x8x8xf32> -> tensor<4x2x2xf32>
  return
}

// -----

func.func @dynamic_shape(%a: tensor<?x3xf32>) -> tensor<3x?xf32> {
  // expected-error @+1 {{must be statically shaped tensor}}
  %r = ds.reshape %a : tensor<?x3xf32> -> tensor<3x?xf32>
  return %r : tensor<3x?xf32>
}

// -----

func.func @slice_huge_step(%x: tensor<4xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{result shape [2] does not match the inferred shape [1]}}
  %r = ds.slice %x dim = 0 [0 : 4 : 9223372036854775807] : tensor<4xf32> -> tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

func.func @bn_stat_types(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{element types differ}}
  %r, %m, %v = ds.batch_norm %x eps = 1.0e-5 : (tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf16>, tensor<8xbf16>)
  return %r : tensor<2x8xf32>
}

// -----

func.func @nan_eps(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{eps must be > 0, got nan}}
  %r = ds.layer_norm %x normalized_shape = [8] eps = 0x7FF8000000000000 : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}

// -----

func.func @padding_idx(%w: tensor<10x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf32> {
  // expected-error @+1 {{padding_idx 100 is not a row of the 10-row weight}}
  %r = ds.embedding %w[%i] {padding_idx = 100 : i64} : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  return %r : tensor<3x4xf32>
}

// -----

ds.parameter @buf : tensor<4xf32>
// expected-error @+1 {{'buf' is not a trainable ds.parameter}}
ds.state @"buf@grad" of @buf role grad : tensor<4xf32>

// -----

ds.parameter @w trainable : tensor<4xf32>
func.func @f(%v: tensor<2xf32>) {
  // expected-error @+1 {{value type 'tensor<2xf32>' differs from the symbol's 'tensor<4xf32>'}}
  ds.assign @w = %v : tensor<2xf32>
  return
}

// -----

func.func @f(%v: tensor<4xf32>) {
  // expected-error @+1 {{'nope' is not a ds.parameter, ds.state or ds.flat_buffer}}
  ds.assign @nope = %v : tensor<4xf32>
  return
}

// -----

func.func @f() -> tensor<4xf32> {
  // expected-error @+1 {{p must be in (0, 1), got 1}}
  %m = ds.dropout_mask p = 1.0 : tensor<4xf32>
  return %m : tensor<4xf32>
}

// -----

func.func @f(%s: tensor<2x3xf32>, %d: tensor<2x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+1 {{the slice [2 :: 2] of 3 elements does not fit dim 1 of size 5}}
  %r = ds.insert_slice %s into %d dim = 1 [2 : 2] : tensor<2x3xf32> into tensor<2x5xf32>
  return %r : tensor<2x5xf32>
}

// -----

func.func @f(%y: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %r = ds.softmax_grad %y, %y dim = 2 : tensor<2x3xf32>
  return %r : tensor<2x3xf32>
}

// -----

func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{dweight has shape [2], expected [3]}}
  %a, %b, %c = ds.layer_norm_grad %x, %x normalized_shape = [3] eps = 1.0e-05 : (tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2xf32>, tensor<3xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>, %dy: tensor<4x5xf32>) {
  // expected-error @+1 {{input [2, 3] and result_grad [4, 5] must share their leading dims}}
  %a, %b = ds.linear_grad_weight %x, %dy : (tensor<2x3xf32>, tensor<4x5xf32>) -> (tensor<5x3xf32>, tensor<5xf32>)
  return
}

// -----

func.func @f(%dy: tensor<2x4xf32>, %i: tensor<3xi64>) -> tensor<10x4xf32> {
  // expected-error @+1 {{result_grad has shape [2, 4], expected [3, 4]}}
  %r = ds.embedding_grad %dy[%i] : (tensor<2x4xf32>, tensor<3xi64>) -> tensor<10x4xf32>
  return %r : tensor<10x4xf32>
}

// -----

module {
  ds.parameter @w trainable : tensor<4xf32>
  // expected-error @+1 {{member @nope is not a ds.parameter or ds.state}}
  ds.flat_buffer @zero.params role params members [@w, @nope] : tensor<16xf32>
}

// -----

module {
  ds.parameter @w trainable : tensor<4xf32>
  // expected-error @+1 {{member @w is listed twice}}
  ds.flat_buffer @zero.params role params members [@w, @w] : tensor<16xf32>
}

// -----

module {
  ds.parameter @h trainable : tensor<4xf16>
  // expected-error @+1 {{member @h has element type 'f16', the buffer 'f32'}}
  ds.flat_buffer @zero.params role params members [@h] : tensor<16xf32>
}

// -----

module {
  ds.parameter @w trainable : tensor<20xf32>
  // expected-error @+1 {{members hold 20 elements, more than the buffer's 16}}
  ds.flat_buffer @zero.params role params members [@w] : tensor<16xf32>
}

// -----

// expected-error @+1 {{ZeRO stage 7 is not 0, 1, 2 or 3}}
module attributes {ds.zero = #ds.zero<stage = 7>} {
}

// -----

// expected-error @+1 {{'ds.zero' must be a #ds.zero on a builtin.module}}
module attributes {ds.zero = 2 : i64} {
}

// -----

// expected-error @+1 {{'ds.pipeline' must be a #ds.pipeline on a builtin.module}}
module attributes {ds.pipeline = {stages = 2 : i64}} {
}

// -----

// expected-error @+1 {{pipeline stages (0) and virtual_stages (1) must be >= 1}}
module attributes {ds.pipeline = #ds.pipeline<stages = 0, virtual_stages = 1>} {
}

// -----

// expected-error @+1 {{a scheduled pipeline needs micro_batches >= 1}}
module attributes {ds.pipeline = #ds.pipeline<stages = 2, virtual_stages = 1, schedule = "1f1b">} {
}

// -----

// expected-error @+1 {{micro_batches and phase_flops come with the schedule (ds-pipeline sets them together)}}
module attributes {ds.pipeline = #ds.pipeline<stages = 2, virtual_stages = 1, micro_batches = 4>} {
}

// -----

// expected-error @+1 {{phase_flops needs 4 entries (a forward and a backward per chunk)}}
module attributes {ds.pipeline = #ds.pipeline<stages = 2, virtual_stages = 1, schedule = "1f1b", micro_batches = 4, phase_flops = [1, 2]>} {
}

// -----

// expected-error @+1 {{role 'grad' needs `of` (only loss_scale and found_inf belong to no parameter)}}
ds.state @g role grad : tensor<4xf32>

// -----

// expected-error @+1 {{'loss_scale' must be a tensor<f32> scalar, not 'tensor<2xf32>'}}
ds.state @loss_scale role loss_scale : tensor<2xf32>

// -----

//===----------------------------------------------------------------------===//
// ds.parallel_copy / parallel_sum / parallel_max / mesh_coordinate (DSOps.cpp)
//===----------------------------------------------------------------------===//

func.func @parallel_no_grid(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ds.parallel_copy' op 'mesh' is not a shard.grid}}
  %y = ds.parallel_copy %x on @mesh grid_axes = [0] : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

module {
  shard.grid @mesh(shape = 2x2)
  func.func @parallel_bad_axis(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'ds.parallel_sum' op grid axis 2 is not a distinct axis of @mesh}}
    %y = ds.parallel_sum %x on @mesh grid_axes = [2] : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

module {
  shard.grid @mesh(shape = 2x2)
  func.func @coordinate_bad_axis() -> tensor<i64> {
    // expected-error @+1 {{'ds.mesh_coordinate' op grid axis 5 is not a distinct axis of @mesh}}
    %r = ds.mesh_coordinate on @mesh grid_axis = 5 : tensor<i64>
    return %r : tensor<i64>
  }
}

// -----

// Roles are dsrt.h's (DSRT_SLOT_ROLES): a state has a state's, a flat buffer a flat buffer's.
ds.parameter @w trainable : tensor<4xf32>
// expected-error @+1 {{role 'params' is not a state's (a ds.parameter is a parameter or a buffer; params, grads and params_sharded are ds.flat_buffer roles)}}
ds.state @s of @w role params : tensor<4xf32>

// -----

ds.parameter @w trainable : tensor<4xf32>
// expected-error @+1 {{role 'grad' is not a flat buffer's (params, grads or params_sharded)}}
ds.flat_buffer @f role grad members [@w] : tensor<16xf32>

// -----

ds.parameter @w trainable : tensor<4xf32>
// expected-error @+2 {{expected ::mlir::ds::SlotRole to be one of: parameter, buffer, grad, exp_avg, exp_avg_sq, momentum_buffer, master, loss_scale, found_inf, param_shard, grad_shard, params, grads, params_sharded}}
// expected-error @+1 {{failed to parse DS_SlotRoleAttr parameter 'value'}}
ds.state @s of @w role moment : tensor<4xf32>

// -----

func.func @cumsum_of_booleans(%x: tensor<2x3xi1>) {
  // expected-error @+1 {{'ds.cumsum' op sums booleans (convert them to i64 first, as torch.cumsum does)}}
  %0 = ds.cumsum %x dim = 1 : tensor<2x3xi1>
  return
}

// -----

func.func @cumsum_dim_too_large(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'ds.cumsum' op dim 2 is out of range for rank 2}}
  %0 = ds.cumsum %x dim = 2 : tensor<2x3xf32>
  return
}

// -----

func.func @attention_rank(%q: tensor<4x8x16xf32>, %k: tensor<2x2x6x16xf32>, %v: tensor<2x2x6x8xf32>) {
  // expected-error @+1 {{'ds.attention' op needs query, key and value of rank 4 ([batch, heads, length, width]), got [4, 8, 16], [2, 2, 6, 16], [2, 2, 6, 8]}}
  %0:2 = ds.attention %q, %k, %v scale = 0.25 : (tensor<4x8x16xf32>, tensor<2x2x6x16xf32>, tensor<2x2x6x8xf32>) -> (tensor<4x8x8xf32>, tensor<4x8xf32>)
  return
}

// -----

func.func @attention_heads(%q: tensor<2x3x8x16xf32>, %k: tensor<2x2x6x16xf32>, %v: tensor<2x2x6x8xf32>) {
  // expected-error @+1 {{'ds.attention' op 3 query heads over 2 key/value heads (grouped-query attention needs a divisor)}}
  %0:2 = ds.attention %q, %k, %v scale = 0.25 : (tensor<2x3x8x16xf32>, tensor<2x2x6x16xf32>, tensor<2x2x6x8xf32>) -> (tensor<2x3x8x8xf32>, tensor<2x3x8xf32>)
  return
}

// -----

func.func @attention_width(%q: tensor<2x4x8x12xf32>, %k: tensor<2x2x6x16xf32>, %v: tensor<2x2x6x8xf32>) {
  // expected-error @+1 {{'ds.attention' op query width 12 differs from the key's 16}}
  %0:2 = ds.attention %q, %k, %v scale = 0.25 : (tensor<2x4x8x12xf32>, tensor<2x2x6x16xf32>, tensor<2x2x6x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_lse(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x6x16xf32>, %v: tensor<2x2x6x8xf32>) {
  // expected-error @+1 {{'ds.attention' op lse 'tensor<2x4x8xbf16>' is not f32 of shape [2, 4, 8]}}
  %0:2 = ds.attention %q, %k, %v scale = 0.25 : (tensor<2x4x8x16xf32>, tensor<2x2x6x16xf32>, tensor<2x2x6x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8xbf16>)
  return
}

// -----

func.func @attention_zero_scale(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x6x16xf32>, %v: tensor<2x2x6x8xf32>) {
  // expected-error @+1 {{'ds.attention' op scale must be nonzero}}
  %0:2 = ds.attention %q, %k, %v scale = 0.0 : (tensor<2x4x8x16xf32>, tensor<2x2x6x16xf32>, tensor<2x2x6x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_mask_shape(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x6x16xf32>, %v: tensor<2x2x6x8xf32>, %m: tensor<2x3x8x6xi1>) {
  // expected-error @+1 {{'ds.attention' op mask 'tensor<2x3x8x6xi1>' is not a bool or query-typed tensor of rank 4 that broadcasts to the scores [2, 4, 8, 6]}}
  %0:2 = ds.attention %q, %k, %v mask %m scale = 0.25 : (tensor<2x4x8x16xf32>, tensor<2x2x6x16xf32>, tensor<2x2x6x8xf32>, tensor<2x3x8x6xi1>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_mask_and_causal(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x6x16xf32>, %v: tensor<2x2x6x8xf32>, %m: tensor<2x1x8x6xi1>) {
  // expected-error @+1 {{'ds.attention' op has both a mask and causal}}
  %0:2 = ds.attention %q, %k, %v mask %m scale = 0.25 causal : (tensor<2x4x8x16xf32>, tensor<2x2x6x16xf32>, tensor<2x2x6x8xf32>, tensor<2x1x8x6xi1>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_grad_dk(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x6x16xf32>, %v: tensor<2x2x6x8xf32>, %o: tensor<2x4x8x8xf32>, %l: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'ds.attention_grad' op dk has shape [2, 4, 6, 16], expected [2, 2, 6, 16]}}
  %0:3 = ds.attention_grad %q, %k, %v result %o, %l grad %o scale = 0.25 : (tensor<2x4x8x16xf32>, tensor<2x2x6x16xf32>, tensor<2x2x6x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8x8xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x2x6x8xf32>)
  return
}

// -----

func.func @linear_cross_entropy_workspace(%x: tensor<5x4xf32>, %w: tensor<6x4xf32>, %t: tensor<5xi64>) {
  // expected-error @+1 {{'ds.linear_cross_entropy' op workspace must be f32 [19]}}
  %0:2 = ds.linear_cross_entropy %x, %w target %t tiles = 2 : (tensor<5x4xf32>, tensor<6x4xf32>, tensor<5xi64>) -> (tensor<f32>, tensor<18xf32>)
  return
}

// -----

func.func @linear_cross_entropy_target(%x: tensor<5x4xf32>, %w: tensor<6x4xf32>, %t: tensor<4xi64>) {
  // expected-error @+1 {{'ds.linear_cross_entropy' op target [4] is not [5]}}
  %0:2 = ds.linear_cross_entropy %x, %w target %t tiles = 2 : (tensor<5x4xf32>, tensor<6x4xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<19xf32>)
  return
}

// -----

func.func @ring_attention_bf16(%q: tensor<1x2x4x2xbf16>, %k: tensor<1x1x4x2xbf16>) {
  // expected-error @+1 {{'ds.ring_attention' op computes in f32 only, got 'tensor<1x2x4x2xbf16>'}}
  %0:3 = ds.ring_attention %q, %k, %k scale = 0.5 causal on @mesh grid_axes = [1] : (tensor<1x2x4x2xbf16>, tensor<1x1x4x2xbf16>, tensor<1x1x4x2xbf16>) -> (tensor<1x2x4x2xbf16>, tensor<1x2x4xf32>, tensor<72xf32>)
  return
}

// -----

func.func @ring_attention_striped_not_causal(%q: tensor<1x2x4x2xf32>, %k: tensor<1x1x4x2xf32>) {
  // expected-error @+1 {{'ds.ring_attention' op is striped but not causal (striped is a causal layout)}}
  %0:3 = ds.ring_attention %q, %k, %k scale = 0.5 striped on @mesh grid_axes = [1] : (tensor<1x2x4x2xf32>, tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>, tensor<72xf32>)
  return
}

// -----

func.func @ring_attention_no_axes(%q: tensor<1x2x4x2xf32>, %k: tensor<1x1x4x2xf32>) {
  // expected-error @+1 {{'ds.ring_attention' op needs the grid axes of its ring}}
  %0:3 = ds.ring_attention %q, %k, %k scale = 0.5 on @mesh grid_axes = [] : (tensor<1x2x4x2xf32>, tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>, tensor<72xf32>)
  return
}

// -----

func.func @ring_attention_workspace(%q: tensor<1x2x4x2xf32>, %k: tensor<1x1x4x2xf32>) {
  // expected-error @+1 {{'ds.ring_attention' op workspace must be 'tensor<72xf32>'}}
  %0:3 = ds.ring_attention %q, %k, %k scale = 0.5 on @mesh grid_axes = [1] : (tensor<1x2x4x2xf32>, tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>, tensor<70xf32>)
  return
}

// -----

func.func @ring_attention_grad_workspace(%q: tensor<1x2x4x2xf32>, %k: tensor<1x1x4x2xf32>, %l: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'ds.ring_attention_grad' op workspace must be 'tensor<96xf32>'}}
  %0:4 = ds.ring_attention_grad %q, %k, %k result %q, %l grad %q scale = 0.5 causal on @mesh grid_axes = [1] : (tensor<1x2x4x2xf32>, tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>, tensor<95xf32>)
  return
}

// -----

func.func @top_k_k(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{'ds.top_k' op k = 5 must be in [1, 4]}}
  %v, %i = ds.top_k %x k = 5 : (tensor<8x4xf32>) -> (tensor<8x5xf32>, tensor<8x5xi64>)
  return
}

// -----

func.func @top_k_shape(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{'ds.top_k' op}}
  %v, %i = ds.top_k %x k = 2 : (tensor<8x4xf32>) -> (tensor<8x3xf32>, tensor<8x2xi64>)
  return
}

// -----

func.func @top_k_indices(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{'ds.top_k' op indices must be i64}}
  %v, %i = ds.top_k %x k = 2 : (tensor<8x4xf32>) -> (tensor<8x2xf32>, tensor<8x2xi32>)
  return
}

// -----

func.func @expert_linear_width(%x: tensor<6x8xf32>, %w: tensor<4x10x9xf32>, %ids: tensor<6xi64>) {
  // expected-error @+1 {{'ds.expert_linear' op input [6, 8] has 8 features, the weight [4, 10, 9] takes 9}}
  %y = ds.expert_linear %x, %w[%ids] : (tensor<6x8xf32>, tensor<4x10x9xf32>, tensor<6xi64>) -> tensor<6x10xf32>
  return
}

// -----

func.func @expert_linear_ids(%x: tensor<6x8xf32>, %w: tensor<4x10x8xf32>, %ids: tensor<5xi64>) {
  // expected-error @+1 {{'ds.expert_linear' op expert_linear takes input [N, in], weight [E, out, in] and ids [N], got [6, 8], [4, 10, 8] and [5]}}
  %y = ds.expert_linear %x, %w[%ids] : (tensor<6x8xf32>, tensor<4x10x8xf32>, tensor<5xi64>) -> tensor<6x10xf32>
  return
}

// -----

func.func @expert_linear_grad_weight(%x: tensor<6x8xf32>, %dy: tensor<6x9xf32>, %ids: tensor<6xi64>) {
  // expected-error @+1 {{'ds.expert_linear_grad_weight' op}}
  %dw = ds.expert_linear_grad_weight %x, %dy[%ids] : (tensor<6x8xf32>, tensor<6x9xf32>, tensor<6xi64>) -> tensor<4x10x8xf32>
  return
}

// -----

func.func @route_no_grid(%ids: tensor<6xi64>) {
  // expected-error @+1 {{'ds.expert_route' op names @none, which is not a shard.grid}}
  %p, %l = ds.expert_route %ids experts = 4 on @none grid_axes = [0] : (tensor<6xi64>) -> (tensor<10xi64>, tensor<12xi64>)
  return
}

// -----

module {
  shard.grid @g(shape = 2x2)
  func.func @route_no_axes(%ids: tensor<6xi64>) {
    // expected-error @+1 {{'ds.expert_route' op needs the grid axes of its group}}
    %p, %l = ds.expert_route %ids experts = 4 on @g grid_axes = [] : (tensor<6xi64>) -> (tensor<10xi64>, tensor<12xi64>)
    return
  }
}

// -----

module {
  shard.grid @g(shape = 2x2)
  func.func @route_bad_axis(%ids: tensor<6xi64>) {
    // expected-error @+1 {{'ds.expert_route' op grid axis 2 is not a static axis of @g}}
    %p, %l = ds.expert_route %ids experts = 4 on @g grid_axes = [2] : (tensor<6xi64>) -> (tensor<10xi64>, tensor<12xi64>)
    return
  }
}

// -----

module {
  shard.grid @g(shape = 2x2)
  func.func @route_uneven(%ids: tensor<6xi64>) {
    // expected-error @+1 {{'ds.expert_route' op 3 experts do not split evenly over the group's 2 ranks}}
    %p, %l = ds.expert_route %ids experts = 3 on @g grid_axes = [0] : (tensor<6xi64>) -> (tensor<10xi64>, tensor<12xi64>)
    return
  }
}

// -----

module {
  shard.grid @g(shape = 2x2)
  func.func @route_ids_rank(%ids: tensor<6x1xi64>) {
    // expected-error @+1 {{'ds.expert_route' op expert_ids must be [N], got 'tensor<6x1xi64>'}}
    %p, %l = ds.expert_route %ids experts = 4 on @g grid_axes = [0] : (tensor<6x1xi64>) -> (tensor<10xi64>, tensor<12xi64>)
    return
  }
}

// -----

module {
  shard.grid @g(shape = 2x2)
  func.func @route_plan(%ids: tensor<6xi64>) {
    // expected-error @+1 {{'ds.expert_route' op plan must be i64 [rows + 2 x 2], got 'tensor<10xi32>'}}
    %p, %l = ds.expert_route %ids experts = 4 on @g grid_axes = [0] : (tensor<6xi64>) -> (tensor<10xi32>, tensor<12xi64>)
    return
  }
}

// -----

module {
  shard.grid @g(shape = 2x2)
  func.func @route_plan_rows(%ids: tensor<6xi64>) {
    // expected-error @+1 {{'ds.expert_route' op plan routes 5 rows, not the 6 ids}}
    %p, %l = ds.expert_route %ids experts = 4 on @g grid_axes = [0] : (tensor<6xi64>) -> (tensor<9xi64>, tensor<12xi64>)
    return
  }
}

// -----

module {
  shard.grid @g(shape = 2x2)
  func.func @route_local(%ids: tensor<6xi64>) {
    // expected-error @+1 {{'ds.expert_route' op local_ids must have between 1 and 24 rows (6 x 4 ranks, the dropless worst case), got 25}}
    %p, %l = ds.expert_route %ids experts = 4 on @g grid_axes = [0, 1] : (tensor<6xi64>) -> (tensor<14xi64>, tensor<25xi64>)
    return
  }
}

// -----

module {
  shard.grid @g(shape = 2x2)
  func.func @dispatch_rows(%x: tensor<5x8xf32>, %p: tensor<10xi64>) {
    // expected-error @+1 {{'ds.expert_dispatch' op input must have the plan's 6 rows, got 'tensor<5x8xf32>'}}
    %r = ds.expert_dispatch %x along %p on @g grid_axes = [0] : (tensor<5x8xf32>, tensor<10xi64>) -> tensor<12x8xf32>
    return
  }
}

// -----

module {
  shard.grid @g(shape = 2x2)
  func.func @dispatch_result(%x: tensor<6x8xf32>, %p: tensor<10xi64>) {
    // expected-error @+1 {{'ds.expert_dispatch' op result must have between 1 and 12 rows (6 x 2 ranks, the dropless worst case), got 13}}
    %r = ds.expert_dispatch %x along %p on @g grid_axes = [0] : (tensor<6x8xf32>, tensor<10xi64>) -> tensor<13x8xf32>
    return
  }
}

// -----

module {
  shard.grid @g(shape = 2x2)
  func.func @combine_result(%y: tensor<12x8xf32>, %p: tensor<10xi64>) {
    // expected-error @+1 {{'ds.expert_combine' op input has shape [12, 8], expected [12, 4]}}
    %r = ds.expert_combine %y along %p on @g grid_axes = [0] : (tensor<12x8xf32>, tensor<10xi64>) -> tensor<6x4xf32>
    return
  }
}

// -----

module {
  shard.grid @g(shape = 2x2)
  func.func @combine_rows(%y: tensor<12x8xf32>, %p: tensor<10xi64>) {
    // expected-error @+1 {{'ds.expert_combine' op result must have the plan's 6 rows, got 'tensor<5x8xf32>'}}
    %r = ds.expert_combine %y along %p on @g grid_axes = [0] : (tensor<12x8xf32>, tensor<10xi64>) -> tensor<5x8xf32>
    return
  }
}

// -----

func.func @capacity_choices(%ids: tensor<6xi64>) {
  // expected-error @+1 {{'ds.expert_capacity' op choices = 4 must be >= 1 and divide the 6 rows}}
  %r = ds.expert_capacity %ids experts = 4 choices = 4 capacity = 2 : tensor<6xi64>
  return
}

// -----

func.func @capacity_negative(%ids: tensor<6xi64>) {
  // expected-error @+1 {{'ds.expert_capacity' op capacity = -1 must be >= 0}}
  %r = ds.expert_capacity %ids experts = 4 choices = 2 capacity = -1 : tensor<6xi64>
  return
}

// -----

func.func @capacity_rank(%ids: tensor<3x2xi64>) {
  // expected-error @+1 {{'ds.expert_capacity' op expert_ids must be [N], got 'tensor<3x2xi64>'}}
  %r = ds.expert_capacity %ids experts = 4 choices = 2 capacity = 2 : tensor<3x2xi64>
  return
}

// -----

func.func @capacity_experts(%ids: tensor<6xi64>) {
  // expected-error @+1 {{'ds.expert_capacity' op experts = 0 must be >= 1}}
  %r = ds.expert_capacity %ids experts = 0 choices = 2 capacity = 2 : tensor<6xi64>
  return
}

// -----

func.func @swiglu_odd(%x: tensor<6x7xf32>) {
  // expected-error @+1 {{'ds.swiglu' op swiglu takes the gate and the up projection side by side, a last dimension of 2F values, got [6, 7]}}
  %r = ds.swiglu %x : (tensor<6x7xf32>) -> tensor<6x3xf32>
  return
}

// -----

func.func @swiglu_rows(%x: tensor<6x8xf32>, %ids: tensor<5xi64>) {
  // expected-error @+1 {{'ds.swiglu' op swiglu's rows [R] go with an input [R, 2F], got [5] and [6, 8]}}
  %r = ds.swiglu %x rows[%ids] : (tensor<6x8xf32>, tensor<5xi64>) -> tensor<6x4xf32>
  return
}

// -----

func.func @swiglu_result(%x: tensor<6x8xf32>) {
  // expected-error @+1 {{'ds.swiglu' op result shape [6, 8] does not match the inferred shape [6, 4]}}
  %r = ds.swiglu %x : (tensor<6x8xf32>) -> tensor<6x8xf32>
  return
}

// -----

func.func @swiglu_grad_dy(%x: tensor<6x8xf32>, %dy: tensor<6x8xf32>) {
  // expected-error @+1 {{'ds.swiglu_grad' op result_grad has shape [6, 8], expected [6, 4]}}
  %r = ds.swiglu_grad %x, %dy : (tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
  return
}

// -----

func.func @swiglu_grad_result(%x: tensor<6x8xf32>, %dy: tensor<6x4xf32>) {
  // expected-error @+1 {{'ds.swiglu_grad' op result has shape [6, 4], expected [6, 8]}}
  %r = ds.swiglu_grad %x, %dy : (tensor<6x8xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  return
}

// -----

// expected-error @+1 {{'ds.mixed_precision' is a unit attribute on a builtin.module}}
module attributes {ds.mixed_precision = 1 : i64} {
}

// -----

func.func @model_cast_elsewhere(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ds.model_cast' is a unit attribute of ds.convert}}
  %y = ds.neg %x {ds.model_cast} : tensor<4xf32>
  return %y : tensor<4xf32>
}

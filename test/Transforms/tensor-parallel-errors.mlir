// RUN: ds-opt %s --ds-tensor-parallel=autotp-size=4 --split-input-file --verify-diagnostics

// Two heads do not divide over 4 ranks: the attention stays replicated, with a remark naming
// the linear and the cause.
module {
  ds.parameter @c_attn.weight trainable : tensor<24x8xf32>
  ds.parameter @c_proj.weight trainable : tensor<8x8xf32>
  func.func @forward(%x: tensor<2x4x8xf32>) -> tensor<f32> {
    %w = ds.get_parameter @c_attn.weight : tensor<24x8xf32>
    // expected-remark @below {{ds-tensor-parallel: 'c_attn.weight' stays replicated: 'ds.reshape' regroups the split dimension so that a rank's part is not a block of whole rows (a head count that does not divide by the tp size)}}
    %qkv = ds.linear %x, %w : (tensor<2x4x8xf32>, tensor<24x8xf32>) -> tensor<2x4x24xf32>
    %q0 = ds.slice %qkv dim = 2[0 : 8] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
    %k0 = ds.slice %qkv dim = 2[8 : 16] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
    %v0 = ds.slice %qkv dim = 2[16 : 24] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
    %q1 = ds.reshape %q0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %q = ds.transpose %q1 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %k1 = ds.reshape %k0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %k = ds.transpose %k1 perm = [0, 2, 3, 1] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %v1 = ds.reshape %v0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %v = ds.transpose %v1 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %a = ds.matmul %q, %k : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
    %o = ds.matmul %a, %v : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
    %o1 = ds.transpose %o perm = [0, 2, 1, 3] : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
    %o2 = ds.reshape %o1 : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
    %wp = ds.get_parameter @c_proj.weight : tensor<8x8xf32>
    // expected-remark @below {{ds-tensor-parallel: 'c_proj.weight' stays replicated: 'ds.reshape' regroups the split dimension so that a rank's part is not a block of whole rows (a head count that does not divide by the tp size)}}
    %y = ds.linear %o2, %wp : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %s = ds.sum %y dims = [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A hidden size that does not divide by the tp size.
module {
  ds.parameter @fc1.weight trainable : tensor<6x4xf32>
  ds.parameter @fc2.weight trainable : tensor<4x6xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w1 = ds.get_parameter @fc1.weight : tensor<6x4xf32>
    // expected-remark @below {{ds-tensor-parallel: 'fc1.weight' stays replicated: 'fc1.weight' has 6 output features, which do not divide by tp = 4}}
    %h = ds.linear %x, %w1 : (tensor<2x4xf32>, tensor<6x4xf32>) -> tensor<2x6xf32>
    %g = ds.relu %h : tensor<2x6xf32>
    %w2 = ds.get_parameter @fc2.weight : tensor<4x6xf32>
    // expected-remark @below {{ds-tensor-parallel: 'fc2.weight' stays replicated: 'fc1.weight' has 6 output features, which do not divide by tp = 4}}
    %y = ds.linear %g, %w2 : (tensor<2x6xf32>, tensor<4x6xf32>) -> tensor<2x4xf32>
    %s = ds.sum %y dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A normalization over the hidden units needs all of them.
module {
  ds.parameter @fc1.weight trainable : tensor<8x4xf32>
  ds.parameter @fc2.weight trainable : tensor<4x8xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w1 = ds.get_parameter @fc1.weight : tensor<8x4xf32>
    // expected-remark @below {{ds-tensor-parallel: 'fc1.weight' stays replicated: 'ds.softmax' normalizes along the split dimension}}
    %h = ds.linear %x, %w1 : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %g = ds.softmax %h dim = 1 : tensor<2x8xf32>
    %w2 = ds.get_parameter @fc2.weight : tensor<4x8xf32>
    // expected-remark @below {{ds-tensor-parallel: 'fc2.weight' stays replicated: 'ds.softmax' normalizes along the split dimension}}
    %y = ds.linear %g, %w2 : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    %s = ds.sum %y dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A hidden value also used outside the region (the whole of it is needed there).
module {
  ds.parameter @fc1.weight trainable : tensor<8x4xf32>
  ds.parameter @fc2.weight trainable : tensor<4x8xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w1 = ds.get_parameter @fc1.weight : tensor<8x4xf32>
    %h = ds.linear %x, %w1 : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %w2 = ds.get_parameter @fc2.weight : tensor<4x8xf32>
    // expected-remark @below {{ds-tensor-parallel: 'fc2.weight' stays replicated: the output of 'fc1.weight' is also used outside the region}}
    %y = ds.linear %h, %w2 : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    %s = ds.sum %y dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
    %t = ds.sum %h dims = [0, 1] : tensor<2x8xf32> -> tensor<f32>
    %u = ds.add %s, %t : tensor<f32>, tensor<f32> -> tensor<f32>
    return %u : tensor<f32>
  }
}

// -----

// A vocabulary that does not divide by the tp size stays whole.
module {
  // expected-remark @below {{ds-tensor-parallel: 'wte' stays replicated: its vocabulary of 6 rows does not divide by tp = 4}}
  ds.parameter @wte trainable : tensor<6x4xf32>
  func.func @forward(%idx: tensor<2xi64>) -> tensor<f32> {
    %w = ds.get_parameter @wte : tensor<6x4xf32>
    %e = ds.embedding %w[%idx] : (tensor<6x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
    %s = ds.sum %e dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// Label smoothing is not combined over vocabulary parts (yet): the head stays whole.
module {
  // expected-remark @below {{ds-tensor-parallel: 'head' stays replicated: its cross-entropy has label smoothing}}
  ds.parameter @head trainable : tensor<8x4xf32>
  func.func @forward(%x: tensor<6x4xf32>, %t: tensor<6xi64>) -> tensor<f32> {
    %w = ds.get_parameter @head : tensor<8x4xf32>
    %l = ds.linear %x, %w : (tensor<6x4xf32>, tensor<8x4xf32>) -> tensor<6x8xf32>
    %loss = ds.cross_entropy %l, %t {label_smoothing = 1.000000e-01 : f64} : (tensor<6x8xf32>, tensor<6xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// The mesh decides the tp size.
// expected-error @below {{ds-tensor-parallel: autotp-size 4 disagrees with the module's mesh dp=1 x tp=2 (drop the option; the mesh decides)}}
module attributes {ds.mesh = #ds.mesh<axes = ["dp", "tp"], shape = [1, 2]>} {
}

// -----

// A gated MLP after a residual (Llama's): the gate and up projections, tried first as a
// region's end, reach the residual's add, which has uses outside; the down projection's
// region then takes them as its entries. They split, so no remark says they stay replicated;
// fc0 stays whole, its output read by the residual's add outside any region.
module {
  ds.parameter @fc0.weight trainable : tensor<8x8xf32>
  ds.parameter @gate.weight trainable : tensor<16x8xf32>
  ds.parameter @up.weight trainable : tensor<16x8xf32>
  ds.parameter @down.weight trainable : tensor<8x16xf32>
  func.func @forward(%x: tensor<2x8xf32>) -> tensor<f32> {
    %w0 = ds.get_parameter @fc0.weight : tensor<8x8xf32>
    // expected-remark @below {{ds-tensor-parallel: 'fc0.weight' stays replicated: 'ds.add' in the region has a use outside it}}
    %h0 = ds.linear %x, %w0 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %r = ds.add %h0, %x : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
    %wg = ds.get_parameter @gate.weight : tensor<16x8xf32>
    %g = ds.linear %r, %wg : (tensor<2x8xf32>, tensor<16x8xf32>) -> tensor<2x16xf32>
    %wu = ds.get_parameter @up.weight : tensor<16x8xf32>
    %u = ds.linear %r, %wu : (tensor<2x8xf32>, tensor<16x8xf32>) -> tensor<2x16xf32>
    %a = ds.relu %g : tensor<2x16xf32>
    %m = ds.mul %a, %u : tensor<2x16xf32>, tensor<2x16xf32> -> tensor<2x16xf32>
    %wd = ds.get_parameter @down.weight : tensor<8x16xf32>
    %d = ds.linear %m, %wd : (tensor<2x16xf32>, tensor<8x16xf32>) -> tensor<2x8xf32>
    %y = ds.add %r, %d : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
    %s = ds.sum %y dims = [0, 1] : tensor<2x8xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A concat that joins a part with a whole tensor (here a learned prefix of hidden units)
// needs every unit.
module {
  ds.parameter @prefix : tensor<2x4xf32>
  ds.parameter @fc1.weight trainable : tensor<8x4xf32>
  ds.parameter @fc2.weight trainable : tensor<4x12xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w1 = ds.get_parameter @fc1.weight : tensor<8x4xf32>
    // expected-remark @below {{ds-tensor-parallel: 'fc1.weight' stays replicated: 'ds.concat' joins a part with a whole tensor}}
    %h = ds.linear %x, %w1 : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %p = ds.get_parameter @prefix : tensor<2x4xf32>
    %c = ds.concat %p, %h dim = 1 : (tensor<2x4xf32>, tensor<2x8xf32>) -> tensor<2x12xf32>
    %w2 = ds.get_parameter @fc2.weight : tensor<4x12xf32>
    // expected-remark @below {{ds-tensor-parallel: 'fc2.weight' stays replicated: 'ds.concat' joins a part with a whole tensor}}
    %y = ds.linear %c, %w2 : (tensor<2x12xf32>, tensor<4x12xf32>) -> tensor<2x4xf32>
    %s = ds.sum %y dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A concat along the split dimension (two hidden parts side by side) would interleave the
// ranks' parts.
module {
  ds.parameter @fc1.weight trainable : tensor<8x4xf32>
  ds.parameter @fc2.weight trainable : tensor<4x16xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w1 = ds.get_parameter @fc1.weight : tensor<8x4xf32>
    // expected-remark @below {{ds-tensor-parallel: 'fc1.weight' stays replicated: 'ds.concat' joins along the split dimension}}
    %h = ds.linear %x, %w1 : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %g = ds.relu %h : tensor<2x8xf32>
    %c = ds.concat %h, %g dim = 1 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x16xf32>
    %w2 = ds.get_parameter @fc2.weight : tensor<4x16xf32>
    // expected-remark @below {{ds-tensor-parallel: 'fc2.weight' stays replicated: 'ds.concat' joins along the split dimension}}
    %y = ds.linear %c, %w2 : (tensor<2x16xf32>, tensor<4x16xf32>) -> tensor<2x4xf32>
    %s = ds.sum %y dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// An LM head whose logits reach the loss through an op that needs all of them (a softmax
// over the vocabulary, then a product with a whole tensor) keeps its table whole, saying why.
module {
  // expected-remark @below {{ds-tensor-parallel: 'wte' stays replicated: its logits reach the loss through ops other than reshapes and ops on each logit alone}}
  ds.parameter @wte trainable : tensor<8x4xf32>
  func.func @forward(%idx: tensor<6xi64>, %t: tensor<6x8xf32>) -> tensor<f32> {
    %w = ds.get_parameter @wte : tensor<8x4xf32>
    %e = ds.embedding %w[%idx] : (tensor<8x4xf32>, tensor<6xi64>) -> tensor<6x4xf32>
    %l = ds.linear %e, %w : (tensor<6x4xf32>, tensor<8x4xf32>) -> tensor<6x8xf32>
    %p = ds.softmax %l dim = 1 : tensor<6x8xf32>
    %m = ds.mul %p, %t : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
    %s = ds.sum %m dims = [0, 1] : tensor<6x8xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

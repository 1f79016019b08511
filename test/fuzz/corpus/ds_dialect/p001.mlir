// Training state and gradient ops.
ds.parameter @w trainable : tensor<2x3xf32>
ds.state @"w@grad" of @w role "grad" : tensor<2x3xf32>
ds.state @loss_scale role "loss_scale" : tensor<f32>
func.func @train_ops(%x: tensor<2x3xf32>, %lw: tensor<3xf32>, %s: tensor<2x2xf32>) {
  %m = ds.dropout_mask p = 0.5 : tensor<2x3xf32>
  %g = ds.gelu_grad %x, %m approximate = tanh : tensor<2x3xf32>
  %sg = ds.softmax_grad %x, %g dim = 1 log : tensor<2x3xf32>
  %dx, %dw, %db = ds.layer_norm_grad %x, %sg weight %lw normalized_shape = [3] eps = 1.0e-05 : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>)
  %lwg, %lbg = ds.linear_grad_weight %x, %dx : (tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<3x3xf32>, tensor<3xf32>)
  %i = ds.insert_slice %s into %x dim = 1 [0 : 2] : tensor<2x2xf32> into tensor<2x3xf32>
  ds.assign @"w@grad" = %i : tensor<2x3xf32>
  return
}

// ZeRO's flat buffers and shard states (ds-zero), in a module of their own.
module attributes {ds.zero_stage = 1 : i64} {
  ds.parameter @w trainable : tensor<6xf32>
  ds.parameter @b trainable : tensor<3xf32>
  ds.flat_buffer @zero.params role "params" members [@w, @b] : tensor<32xf32>
  ds.state @"zero.params@exp_avg" of @zero.params role "exp_avg" : tensor<16xf32>
}

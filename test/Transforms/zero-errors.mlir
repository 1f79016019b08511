// RUN: ds-opt %s --ds-zero="stage=3 data-parallel-size=2" --verify-diagnostics

// ZeRO partitions f32 parameters only (mixed precision is not implemented).
module {
  // expected-error @below {{ds-zero: stage 3 partitions f32 parameters only; 'h' is 'f16'}}
  ds.parameter @h trainable : tensor<4xf16>
  ds.state @"h@grad" of @h role "grad" : tensor<4xf16>
  func.func @micro_step(%x: tensor<4xf16>) -> tensor<f32> {
    %h = ds.get_parameter @h : tensor<4xf16>
    %g = ds.mul %x, %h : tensor<4xf16>, tensor<4xf16> -> tensor<4xf16>
    %o = ds.get_parameter @"h@grad" : tensor<4xf16>
    %n = ds.add %o, %g : tensor<4xf16>, tensor<4xf16> -> tensor<4xf16>
    ds.assign @"h@grad" = %n : tensor<4xf16>
    %c = ds.convert %x : tensor<4xf16> -> tensor<4xf32>
    %s = ds.sum %c dims = [0] : tensor<4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

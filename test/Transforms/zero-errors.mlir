// RUN: ds-opt %s --ds-zero="stage=3 data-parallel-size=2" --verify-diagnostics

// ZeRO partitions one flat buffer per dtype: the trainable parameters share one float type
// (f32, or bf16/f16 after ds-mixed-precision).
module {
  // expected-error @below {{ds-zero: stage 3 partitions trainable parameters of one float type; 'w' is 'f32' and others are 'f16' (make them one type)}}
  ds.parameter @w trainable : tensor<4xf32>
  ds.parameter @h trainable : tensor<4xf16>
  ds.state @"w@grad" of @w role grad : tensor<4xf32>
  ds.state @"h@grad" of @h role grad : tensor<4xf16>
  func.func @micro_step(%x: tensor<4xf16>) -> tensor<f32> {
    %h = ds.get_parameter @h : tensor<4xf16>
    %g = ds.mul %x, %h : tensor<4xf16>, tensor<4xf16> -> tensor<4xf16>
    %o = ds.get_parameter @"h@grad" : tensor<4xf16>
    %n = ds.add %o, %g : tensor<4xf16>, tensor<4xf16> -> tensor<4xf16>
    ds.assign @"h@grad" = %n : tensor<4xf16>
    %c = ds.convert %x : tensor<4xf16> -> tensor<4xf32>
    %w = ds.get_parameter @w : tensor<4xf32>
    %m = ds.mul %c, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    %wo = ds.get_parameter @"w@grad" : tensor<4xf32>
    %wn = ds.add %wo, %m : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    ds.assign @"w@grad" = %wn : tensor<4xf32>
    %s = ds.sum %c dims = [0] : tensor<4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

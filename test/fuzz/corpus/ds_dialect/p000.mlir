// Every op of the ds dialect, with its optional parts present and absent, survives
// print -> parse in both the custom and the generic form.

module attributes {ds.mesh = #ds.mesh<axes = ["dp", "tp"], shape = [2, 2]>} {
  ds.parameter @"fc.weight" trainable : tensor<8x4xf32> aliases ["head.weight", "tied.weight"] sharding #ds.sharding<[["tp"], []]>
  ds.parameter @fc.bias trainable : tensor<8xf32>
  ds.parameter @bn.running_mean : tensor<8xf32>
  ds.parameter @bn.running_var : tensor<8xf32> aliases ["bn.var_alias"]
  ds.parameter @big trainable : tensor<4x8xf32> sharding #ds.sharding<[["dp", "tp"], []]>
  ds.parameter @sharded_buffer : tensor<8xf32> sharding #ds.sharding<[["dp"]]>
  ds.parameter @"0.quoted name" : tensor<i64> {note = 1 : i64}

  func.func @state(%v: tensor<8xf32> {ds.input_name = "v"}) -> (tensor<8x4xf32>, tensor<i64>) {
    %w = ds.get_parameter @"fc.weight" : tensor<8x4xf32>
    %q = ds.get_parameter @"0.quoted name" : tensor<i64>
    ds.assign_buffer @bn.running_mean = %v : tensor<8xf32>
    return %w, %q : tensor<8x4xf32>, tensor<i64>
  }

  func.func @constant_convert() -> (tensor<2xf16>, tensor<f32>, tensor<3xi64>) {
    %c = ds.constant dense<[1.0, 2.0]> : tensor<2xf32>
    %s = ds.constant dense<0.5> : tensor<f32>
    %i = ds.constant dense<[0, 1, 2]> : tensor<3xi64>
    %h = ds.convert %c : tensor<2xf32> -> tensor<2xf16>
    return %h, %s, %i : tensor<2xf16>, tensor<f32>, tensor<3xi64>
  }

  func.func @unary(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = ds.neg %x : tensor<2x3xf32>
    %1 = ds.exp %0 : tensor<2x3xf32>
    %2 = ds.log %1 : tensor<2x3xf32>
    %3 = ds.sqrt %2 : tensor<2x3xf32>
    %4 = ds.rsqrt %3 : tensor<2x3xf32>
    %5 = ds.tanh %4 : tensor<2x3xf32>
    %6 = ds.sigmoid %5 : tensor<2x3xf32>
    %7 = ds.relu %6 : tensor<2x3xf32>
    %8 = ds.gelu %7 : tensor<2x3xf32>
    %9 = ds.gelu %8 approximate = tanh : tensor<2x3xf32>
    // The default approximation is elided when printed.
    %10 = ds.gelu %9 approximate = none : tensor<2x3xf32>
    return %10 : tensor<2x3xf32>
  }

  func.func @binary(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
    %0 = ds.add %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
    %1 = ds.sub %0, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
    %2 = ds.mul %1, %a : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    %3 = ds.div %2, %a : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    %4 = ds.pow %3, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
    %5 = ds.maximum %4, %a : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    %6 = ds.minimum %5, %a : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    return %6 : tensor<2x3xf32>
  }

  func.func @cmp_where_dropout(%a: tensor<2x3xf32>, %s: tensor<f32>, %i: tensor<3xi64>) -> (tensor<2x3xf32>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<3xi1>) {
    %eq = ds.cmp eq, %a, %s : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
    %ne = ds.cmp ne, %a, %a : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xi1>
    %lt = ds.cmp lt, %s, %a : tensor<f32>, tensor<2x3xf32> -> tensor<2x3xi1>
    %le = ds.cmp le, %a, %s : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
    %gt = ds.cmp gt, %a, %s : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
    %ge = ds.cmp ge, %i, %i : tensor<3xi64>, tensor<3xi64> -> tensor<3xi1>
    %w = ds.where %eq, %s, %a : (tensor<2x3xi1>, tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %d = ds.dropout %w p = 0.1 : tensor<2x3xf32>
    return %d, %ne, %lt, %le, %gt, %ge : tensor<2x3xf32>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<3xi1>
  }

  func.func @reduce(%x: tensor<2x3x4xf32>) -> (tensor<3xf32>, tensor<2x1x4xf32>, tensor<f32>, tensor<1x1x1xf32>, tensor<2x3x4xf32>) {
    %0 = ds.sum %x dims = [0, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
    %1 = ds.mean %x dims = [1] keepdim : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
    %2 = ds.amax %x dims = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
    %3 = ds.amax %x dims = [2, 0, 1] keepdim : tensor<2x3x4xf32> -> tensor<1x1x1xf32>
    %4 = ds.sum %x dims = [] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
    return %0, %1, %2, %3, %4 : tensor<3xf32>, tensor<2x1x4xf32>, tensor<f32>, tensor<1x1x1xf32>, tensor<2x3x4xf32>
  }

  func.func @softmax(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = ds.softmax %x dim = 1 : tensor<2x3xf32>
    %1 = ds.log_softmax %0 dim = 0 : tensor<2x3xf32>
    return %1 : tensor<2x3xf32>
  }

  func.func @layer_norm(%x: tensor<2x3x4xf32>, %w: tensor<3x4xf32>, %b: tensor<3x4xf32>) -> tensor<2x3x4xf32> {
    %0 = ds.layer_norm %x weight %w bias %b normalized_shape = [3, 4] eps = 1.0e-5 : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
    %1 = ds.layer_norm %0 weight %w normalized_shape = [3, 4] eps = 1.0e-5 : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
    %2 = ds.layer_norm %1 bias %b normalized_shape = [3, 4] eps = 1.0e-5 : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
    %3 = ds.layer_norm %2 normalized_shape = [4] eps = 0.125 : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
    return %3 : tensor<2x3x4xf32>
  }

  func.func @batch_norm(%x: tensor<2x8x4x4xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>, %rm: tensor<8xf32>, %rv: tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x8xf32>) {
    %r, %m, %v = ds.batch_norm %x weight %w bias %b eps = 1.0e-5 : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
    %r2, %m2, %v2 = ds.batch_norm %r eps = 1.0e-5 : (tensor<2x8x4x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
    %r3, %m3, %v3 = ds.batch_norm %r2 weight %w eps = 1.0e-5 : (tensor<2x8x4x4xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
    %i0 = ds.batch_norm_inference %r3 weight %w bias %b stats %rm, %rv eps = 1.0e-5 : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x4x4xf32>
    %i1 = ds.batch_norm_inference %i0 stats %rm, %rv eps = 1.0e-5 : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x4x4xf32>
    %i2 = ds.batch_norm_inference %i1 bias %b stats %rm, %rv eps = 1.0e-5 : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x4x4xf32>
    // Rank-2 input [N, C].
    %flat = ds.reshape %rm : tensor<8xf32> -> tensor<1x8xf32>
    %bc = ds.broadcast_to %flat : tensor<1x8xf32> -> tensor<2x8xf32>
    %i3 = ds.batch_norm_inference %bc weight %w stats %rm, %rv eps = 1.0e-3 : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    return %i2, %m, %v, %i3 : tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x8xf32>
  }

  func.func @contractions(%a: tensor<5x2x3xf32>, %b: tensor<3x4xf32>, %w: tensor<6x3xf32>, %bias: tensor<6xf32>) -> (tensor<5x2x4xf32>, tensor<5x2x6xf32>, tensor<5x2x6xf32>, tensor<6xf32>) {
    %0 = ds.matmul %a, %b : tensor<5x2x3xf32>, tensor<3x4xf32> -> tensor<5x2x4xf32>
    %1 = ds.linear %a, %w, %bias : (tensor<5x2x3xf32>, tensor<6x3xf32>, tensor<6xf32>) -> tensor<5x2x6xf32>
    %2 = ds.linear %a, %w : (tensor<5x2x3xf32>, tensor<6x3xf32>) -> tensor<5x2x6xf32>
    %col = ds.slice %b dim = 1 [0 : 1] : tensor<3x4xf32> -> tensor<3x1xf32>
    %vec = ds.reshape %col : tensor<3x1xf32> -> tensor<3xf32>
    %3 = ds.linear %vec, %w, %bias : (tensor<3xf32>, tensor<6x3xf32>, tensor<6xf32>) -> tensor<6xf32>
    return %0, %1, %2, %3 : tensor<5x2x4xf32>, tensor<5x2x6xf32>, tensor<5x2x6xf32>, tensor<6xf32>
  }

  func.func @embedding(%w: tensor<10x4xf32>, %i: tensor<2x3xi64>, %j: tensor<5xi32>) -> (tensor<2x3x4xf32>, tensor<5x4xf32>) {
    %0 = ds.embedding %w[%i] : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    %1 = ds.embedding %w[%j] {padding_idx = 0 : i64} : (tensor<10x4xf32>, tensor<5xi32>) -> tensor<5x4xf32>
    return %0, %1 : tensor<2x3x4xf32>, tensor<5x4xf32>
  }

  func.func @cross_entropy(%l: tensor<4x10xf32>, %t: tensor<4xi64>, %l1: tensor<10xf32>, %t1: tensor<i32>) -> (tensor<f32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) {
    %0 = ds.cross_entropy %l, %t : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    %1 = ds.cross_entropy %l, %t {ignore_index = 0 : i64, reduction = #ds<reduction none>, label_smoothing = 0.1 : f64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<4xf32>
    %2 = ds.cross_entropy %l, %t {reduction = #ds<reduction sum>, label_smoothing = 1.0 : f64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    // Attributes equal to their defaults are elided when printed.
    %3 = ds.cross_entropy %l, %t {ignore_index = -100 : i64, reduction = #ds<reduction mean>, label_smoothing = 0.0 : f64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    %4 = ds.cross_entropy %l1, %t1 : (tensor<10xf32>, tensor<i32>) -> tensor<f32>
    return %0, %1, %2, %3, %4 : tensor<f32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>
  }

  func.func @layout(%x: tensor<2x3x4xf32>, %y: tensor<2x5x4xf32>, %z: tensor<3x1xf32>) -> (tensor<6x4xf32>, tensor<4x2x3xf32>, tensor<2x3x4xf32>, tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<2x1x4xf32>, tensor<2x13x4xf32>, tensor<2x3x4xf32>) {
    %0 = ds.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
    %1 = ds.transpose %x perm = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
    %2 = ds.broadcast_to %z : tensor<3x1xf32> -> tensor<2x3x4xf32>
    %3 = ds.slice %x dim = 1 [0 : 3 : 2] : tensor<2x3x4xf32> -> tensor<2x2x4xf32>
    // A step of 1 is the default and is elided.
    %4 = ds.slice %x dim = 1 [1 : 3 : 1] : tensor<2x3x4xf32> -> tensor<2x2x4xf32>
    %5 = ds.slice %x dim = 1 [2 : 3] : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
    %6 = ds.concat %x, %y, %5, %4, %3 dim = 1 : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x1x4xf32>, tensor<2x2x4xf32>, tensor<2x2x4xf32>) -> tensor<2x13x4xf32>
    %7 = ds.concat %x dim = 0 : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
    return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<6x4xf32>, tensor<4x2x3xf32>, tensor<2x3x4xf32>, tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<2x1x4xf32>, tensor<2x13x4xf32>, tensor<2x3x4xf32>
  }

  func.func @conv_pool(%x: tensor<1x4x8x8xf32>, %w: tensor<6x2x3x3xf32>, %b: tensor<6xf32>, %w1: tensor<6x4x1x1xf32>) -> (tensor<1x6x2x2xf32>, tensor<1x6x4x4xf32>, tensor<1x6x3x3xf32>, tensor<1x6x4x4xf32>, tensor<1x6x4x4xf32>, tensor<1x6x2x2xf32>, tensor<1x4x1x1xf32>, tensor<6x3x2xf32>, tensor<1x6x8x8xf32>) {
    %0 = ds.conv2d %x, %w, %b stride = [1, 1] padding = [1, 1] dilation = [1, 1] {groups = 2 : i64} : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<1x6x8x8xf32>
    %1 = ds.conv2d %x, %w stride = [2, 2] padding = [0, 0] dilation = [2, 2] {groups = 2 : i64} : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x2x2xf32>
    // groups = 1 is the default and is elided.
    %2 = ds.conv2d %x, %w1, %b stride = [1, 1] padding = [0, 0] dilation = [1, 1] {groups = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<6x4x1x1xf32>, tensor<6xf32>) -> tensor<1x6x8x8xf32>
    %3 = ds.max_pool2d %0 kernel = [3, 3] stride = [2, 2] padding = [1, 1] dilation = [1, 1] : tensor<1x6x8x8xf32> -> tensor<1x6x4x4xf32>
    %4 = ds.max_pool2d %0 kernel = [2, 2] stride = [3, 3] padding = [0, 0] dilation = [1, 1] ceil_mode : tensor<1x6x8x8xf32> -> tensor<1x6x3x3xf32>
    %5 = ds.avg_pool2d %0 kernel = [2, 2] stride = [2, 2] padding = [0, 0] : tensor<1x6x8x8xf32> -> tensor<1x6x4x4xf32>
    %6 = ds.avg_pool2d %0 kernel = [3, 3] stride = [2, 2] padding = [1, 1] ceil_mode count_include_pad : tensor<1x6x8x8xf32> -> tensor<1x6x5x5xf32>
    %7 = ds.avg_pool2d %0 kernel = [3, 3] stride = [2, 2] padding = [1, 1] count_include_pad : tensor<1x6x8x8xf32> -> tensor<1x6x4x4xf32>
    %8 = ds.avg_pool2d %0 kernel = [2, 2] stride = [2, 2] padding = [1, 1] ceil_mode : tensor<1x6x8x8xf32> -> tensor<1x6x5x5xf32>
    %9 = ds.adaptive_avg_pool2d %6 output_size = [2, 2] : tensor<1x6x5x5xf32> -> tensor<1x6x2x2xf32>
    %10 = ds.adaptive_avg_pool2d %x output_size = [1, 1] : tensor<1x4x8x8xf32> -> tensor<1x4x1x1xf32>
    %r3 = ds.reshape %8 : tensor<1x6x5x5xf32> -> tensor<6x5x5xf32>
    %11 = ds.adaptive_avg_pool2d %r3 output_size = [3, 2] : tensor<6x5x5xf32> -> tensor<6x3x2xf32>
    return %1, %3, %4, %5, %7, %9, %10, %11, %2 : tensor<1x6x2x2xf32>, tensor<1x6x4x4xf32>, tensor<1x6x3x3xf32>, tensor<1x6x4x4xf32>, tensor<1x6x4x4xf32>, tensor<1x6x2x2xf32>, tensor<1x4x1x1xf32>, tensor<6x3x2xf32>, tensor<1x6x8x8xf32>
  }
}

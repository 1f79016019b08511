// RUN: ds-opt %s | ds-opt | FileCheck %s
// RUN: ds-opt %s --mlir-print-op-generic | ds-opt | FileCheck %s

// Every op of the ds dialect, with its optional parts present and absent, survives
// print -> parse in both the custom and the generic form.

// CHECK: module attributes {ds.mesh = #ds.mesh<axes = ["dp", "tp"], shape = [2, 2]>}
module attributes {ds.mesh = #ds.mesh<axes = ["dp", "tp"], shape = [2, 2]>} {
  // CHECK: ds.parameter @fc.weight trainable : tensor<8x4xf32> aliases ["head.weight", "tied.weight"] sharding <{{\[\["tp"\], \[\]\]}}>
  ds.parameter @"fc.weight" trainable : tensor<8x4xf32> aliases ["head.weight", "tied.weight"] sharding #ds.sharding<[["tp"], []]>
  // CHECK: ds.parameter @fc.bias trainable : tensor<8xf32>{{$}}
  ds.parameter @fc.bias trainable : tensor<8xf32>
  // CHECK: ds.parameter @bn.running_mean : tensor<8xf32>{{$}}
  ds.parameter @bn.running_mean : tensor<8xf32>
  // CHECK: ds.parameter @bn.running_var : tensor<8xf32> aliases ["bn.var_alias"]{{$}}
  ds.parameter @bn.running_var : tensor<8xf32> aliases ["bn.var_alias"]
  // CHECK: ds.parameter @big trainable : tensor<4x8xf32> sharding <{{\[\["dp", "tp"\], \[\]\]}}>
  ds.parameter @big trainable : tensor<4x8xf32> sharding #ds.sharding<[["dp", "tp"], []]>
  // CHECK: ds.parameter @sharded_buffer : tensor<8xf32> sharding <{{\[\["dp"\]\]}}>
  ds.parameter @sharded_buffer : tensor<8xf32> sharding #ds.sharding<[["dp"]]>
  // CHECK: ds.parameter @"0.quoted name" : tensor<i64> {note = 1 : i64}
  ds.parameter @"0.quoted name" : tensor<i64> {note = 1 : i64}

  // CHECK-LABEL: func.func @state(
  // CHECK-SAME: %[[V:[^:]+]]: tensor<8xf32> {ds.input_name = "v"}
  func.func @state(%v: tensor<8xf32> {ds.input_name = "v"}) -> (tensor<8x4xf32>, tensor<i64>) {
    // CHECK: %[[W:.+]] = ds.get_parameter @fc.weight : tensor<8x4xf32>
    %w = ds.get_parameter @"fc.weight" : tensor<8x4xf32>
    // CHECK: %[[Q:.+]] = ds.get_parameter @"0.quoted name" : tensor<i64>
    %q = ds.get_parameter @"0.quoted name" : tensor<i64>
    // CHECK: ds.assign_buffer @bn.running_mean = %[[V]] : tensor<8xf32>
    ds.assign_buffer @bn.running_mean = %v : tensor<8xf32>
    // CHECK: return %[[W]], %[[Q]]
    return %w, %q : tensor<8x4xf32>, tensor<i64>
  }

  // CHECK-LABEL: func.func @constant_convert(
  func.func @constant_convert() -> (tensor<2xf16>, tensor<f32>, tensor<3xi64>) {
    // CHECK: %[[C:.+]] = ds.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
    %c = ds.constant dense<[1.0, 2.0]> : tensor<2xf32>
    // CHECK: %[[S:.+]] = ds.constant dense<5.000000e-01> : tensor<f32>
    %s = ds.constant dense<0.5> : tensor<f32>
    // CHECK: %[[I:.+]] = ds.constant dense<[0, 1, 2]> : tensor<3xi64>
    %i = ds.constant dense<[0, 1, 2]> : tensor<3xi64>
    // CHECK: %[[H:.+]] = ds.convert %[[C]] : tensor<2xf32> -> tensor<2xf16>
    %h = ds.convert %c : tensor<2xf32> -> tensor<2xf16>
    // CHECK: return %[[H]], %[[S]], %[[I]]
    return %h, %s, %i : tensor<2xf16>, tensor<f32>, tensor<3xi64>
  }

  // CHECK-LABEL: func.func @unary(
  // CHECK-SAME: %[[X:[^:]+]]: tensor<2x3xf32>
  func.func @unary(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
    // CHECK: %[[NEG:.+]] = ds.neg %[[X]] : tensor<2x3xf32>
    %0 = ds.neg %x : tensor<2x3xf32>
    // CHECK: %[[EXP:.+]] = ds.exp %[[NEG]] : tensor<2x3xf32>
    %1 = ds.exp %0 : tensor<2x3xf32>
    // CHECK: %[[LOG:.+]] = ds.log %[[EXP]] : tensor<2x3xf32>
    %2 = ds.log %1 : tensor<2x3xf32>
    // CHECK: %[[SQRT:.+]] = ds.sqrt %[[LOG]] : tensor<2x3xf32>
    %3 = ds.sqrt %2 : tensor<2x3xf32>
    // CHECK: %[[RSQRT:.+]] = ds.rsqrt %[[SQRT]] : tensor<2x3xf32>
    %4 = ds.rsqrt %3 : tensor<2x3xf32>
    // CHECK: %[[TANH:.+]] = ds.tanh %[[RSQRT]] : tensor<2x3xf32>
    %5 = ds.tanh %4 : tensor<2x3xf32>
    // CHECK: %[[SIG:.+]] = ds.sigmoid %[[TANH]] : tensor<2x3xf32>
    %6 = ds.sigmoid %5 : tensor<2x3xf32>
    // CHECK: %[[RELU:.+]] = ds.relu %[[SIG]] : tensor<2x3xf32>
    %7 = ds.relu %6 : tensor<2x3xf32>
    // CHECK: %[[G0:.+]] = ds.gelu %[[RELU]] : tensor<2x3xf32>
    %8 = ds.gelu %7 : tensor<2x3xf32>
    // CHECK: %[[G1:.+]] = ds.gelu %[[G0]] approximate = tanh : tensor<2x3xf32>
    %9 = ds.gelu %8 approximate = tanh : tensor<2x3xf32>
    // The default approximation is elided when printed.
    // CHECK: %[[G2:.+]] = ds.gelu %[[G1]] : tensor<2x3xf32>
    %10 = ds.gelu %9 approximate = none : tensor<2x3xf32>
    // CHECK: return %[[G2]]
    return %10 : tensor<2x3xf32>
  }

  // CHECK-LABEL: func.func @binary(
  // CHECK-SAME: %[[A:[^:]+]]: tensor<2x3xf32>, %[[B:[^:]+]]: tensor<3xf32>
  func.func @binary(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
    // CHECK: %[[ADD:.+]] = ds.add %[[A]], %[[B]] : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
    %0 = ds.add %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
    // CHECK: %[[SUB:.+]] = ds.sub %[[ADD]], %[[B]] : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
    %1 = ds.sub %0, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
    // CHECK: %[[MUL:.+]] = ds.mul %[[SUB]], %[[A]] : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    %2 = ds.mul %1, %a : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    // CHECK: %[[DIV:.+]] = ds.div %[[MUL]], %[[A]] : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    %3 = ds.div %2, %a : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    // CHECK: %[[POW:.+]] = ds.pow %[[DIV]], %[[B]] : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
    %4 = ds.pow %3, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
    // CHECK: %[[MAX:.+]] = ds.maximum %[[POW]], %[[A]] : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    %5 = ds.maximum %4, %a : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    // CHECK: %[[MIN:.+]] = ds.minimum %[[MAX]], %[[A]] : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    %6 = ds.minimum %5, %a : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    // CHECK: return %[[MIN]]
    return %6 : tensor<2x3xf32>
  }

  // CHECK-LABEL: func.func @cmp_where_dropout(
  // CHECK-SAME: %[[A:[^:]+]]: tensor<2x3xf32>, %[[S:[^:]+]]: tensor<f32>, %[[I:[^:]+]]: tensor<3xi64>
  func.func @cmp_where_dropout(%a: tensor<2x3xf32>, %s: tensor<f32>, %i: tensor<3xi64>) -> (tensor<2x3xf32>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<3xi1>) {
    // CHECK: %[[EQ:.+]] = ds.cmp eq, %[[A]], %[[S]] : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
    %eq = ds.cmp eq, %a, %s : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
    // CHECK: %[[NE:.+]] = ds.cmp ne, %[[A]], %[[A]] : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xi1>
    %ne = ds.cmp ne, %a, %a : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xi1>
    // CHECK: %[[LT:.+]] = ds.cmp lt, %[[S]], %[[A]] : tensor<f32>, tensor<2x3xf32> -> tensor<2x3xi1>
    %lt = ds.cmp lt, %s, %a : tensor<f32>, tensor<2x3xf32> -> tensor<2x3xi1>
    // CHECK: %[[LE:.+]] = ds.cmp le, %[[A]], %[[S]] : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
    %le = ds.cmp le, %a, %s : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
    // CHECK: %[[GT:.+]] = ds.cmp gt, %[[A]], %[[S]] : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
    %gt = ds.cmp gt, %a, %s : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
    // CHECK: %[[GE:.+]] = ds.cmp ge, %[[I]], %[[I]] : tensor<3xi64>, tensor<3xi64> -> tensor<3xi1>
    %ge = ds.cmp ge, %i, %i : tensor<3xi64>, tensor<3xi64> -> tensor<3xi1>
    // CHECK: %[[W:.+]] = ds.where %[[EQ]], %[[S]], %[[A]] : (tensor<2x3xi1>, tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %w = ds.where %eq, %s, %a : (tensor<2x3xi1>, tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    // CHECK: %[[D:.+]] = ds.dropout %[[W]] p = 1.000000e-01 : tensor<2x3xf32>
    %d = ds.dropout %w p = 0.1 : tensor<2x3xf32>
    // CHECK: return %[[D]], %[[NE]], %[[LT]], %[[LE]], %[[GT]], %[[GE]]
    return %d, %ne, %lt, %le, %gt, %ge : tensor<2x3xf32>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<3xi1>
  }

  // CHECK-LABEL: func.func @reduce(
  // CHECK-SAME: %[[X:[^:]+]]: tensor<2x3x4xf32>
  func.func @reduce(%x: tensor<2x3x4xf32>) -> (tensor<3xf32>, tensor<2x1x4xf32>, tensor<f32>, tensor<1x1x1xf32>, tensor<2x3x4xf32>) {
    // CHECK: %[[SUM:.+]] = ds.sum %[[X]] dims = [0, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
    %0 = ds.sum %x dims = [0, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
    // CHECK: %[[MEAN:.+]] = ds.mean %[[X]] dims = [1] keepdim : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
    %1 = ds.mean %x dims = [1] keepdim : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
    // CHECK: %[[AMAX:.+]] = ds.amax %[[X]] dims = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
    %2 = ds.amax %x dims = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
    // CHECK: %[[AMAXK:.+]] = ds.amax %[[X]] dims = [2, 0, 1] keepdim : tensor<2x3x4xf32> -> tensor<1x1x1xf32>
    %3 = ds.amax %x dims = [2, 0, 1] keepdim : tensor<2x3x4xf32> -> tensor<1x1x1xf32>
    // CHECK: %[[NONE:.+]] = ds.sum %[[X]] dims = [] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
    %4 = ds.sum %x dims = [] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
    // CHECK: return %[[SUM]], %[[MEAN]], %[[AMAX]], %[[AMAXK]], %[[NONE]]
    return %0, %1, %2, %3, %4 : tensor<3xf32>, tensor<2x1x4xf32>, tensor<f32>, tensor<1x1x1xf32>, tensor<2x3x4xf32>
  }

  // CHECK-LABEL: func.func @cumsum(
  // CHECK-SAME: %[[X:[^:]+]]: tensor<2x3xf32>, %[[M:[^:]+]]: tensor<2x3xi64>
  func.func @cumsum(%x: tensor<2x3xf32>, %m: tensor<2x3xi64>) -> (tensor<2x3xf32>, tensor<2x3xi64>) {
    // CHECK: %[[C:.+]] = ds.cumsum %[[X]] dim = 1 reverse : tensor<2x3xf32>
    %0 = ds.cumsum %x dim = 1 reverse : tensor<2x3xf32>
    // CHECK: %[[P:.+]] = ds.cumsum %[[M]] dim = 0 : tensor<2x3xi64>
    %1 = ds.cumsum %m dim = 0 : tensor<2x3xi64>
    return %0, %1 : tensor<2x3xf32>, tensor<2x3xi64>
  }

  // CHECK-LABEL: func.func @attention(
  func.func @attention(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x6x16xf32>, %v: tensor<2x2x6x8xf32>, %m: tensor<2x1x8x6xi1>, %dy: tensor<2x4x8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) {
    // CHECK: %{{.+}}, %{{.+}} = ds.attention %{{.+}}, %{{.+}}, %{{.+}} scale = 2.500000e-01 causal : (tensor<2x4x8x16xf32>, tensor<2x2x6x16xf32>, tensor<2x2x6x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8xf32>)
    %0:2 = ds.attention %q, %k, %v scale = 0.25 causal : (tensor<2x4x8x16xf32>, tensor<2x2x6x16xf32>, tensor<2x2x6x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8xf32>)
    // CHECK: ds.attention %{{.+}}, %{{.+}}, %{{.+}} mask %{{.+}} scale = 2.500000e-01 :
    %1:2 = ds.attention %q, %k, %v mask %m scale = 0.25 : (tensor<2x4x8x16xf32>, tensor<2x2x6x16xf32>, tensor<2x2x6x8xf32>, tensor<2x1x8x6xi1>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8xf32>)
    // CHECK: ds.attention_grad %{{.+}}, %{{.+}}, %{{.+}} mask %{{.+}} result %{{.+}}, %{{.+}} grad %{{.+}} scale = 2.500000e-01 :
    %2:3 = ds.attention_grad %q, %k, %v mask %m result %1#0, %1#1 grad %dy scale = 0.25 : (tensor<2x4x8x16xf32>, tensor<2x2x6x16xf32>, tensor<2x2x6x8xf32>, tensor<2x1x8x6xi1>, tensor<2x4x8x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8x8xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x2x6x16xf32>, tensor<2x2x6x8xf32>)
    return %0#0, %1#0, %2#0 : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>
  }

  // CHECK-LABEL: func.func @experts(
  func.func @experts(%r: tensor<6x4xf32>, %x: tensor<6x8xf32>, %w: tensor<4x10x8xf32>, %wt: tensor<4x8x10xf32>, %ids: tensor<6xi32>, %dy: tensor<6x10xf32>, %y3: tensor<2x3x10xf32>) -> (tensor<6x2xf32>, tensor<6x10xf32>, tensor<6x10xf32>, tensor<4x10x8xf32>, tensor<4x8x10xf32>) {
    // CHECK: %{{.+}}, %{{.+}} = ds.top_k %{{.+}} k = 2 : (tensor<6x4xf32>) -> (tensor<6x2xf32>, tensor<6x2xi64>)
    %v, %i = ds.top_k %r k = 2 : (tensor<6x4xf32>) -> (tensor<6x2xf32>, tensor<6x2xi64>)
    // CHECK: ds.top_k %{{.+}} k = 2 smallest : (tensor<6x2xi64>) -> (tensor<6x2xi64>, tensor<6x2xi64>)
    %sv, %si = ds.top_k %i k = 2 smallest : (tensor<6x2xi64>) -> (tensor<6x2xi64>, tensor<6x2xi64>)
    // CHECK: ds.expert_linear %{{.+}}, %{{.+}}[%{{.+}}] : (tensor<6x8xf32>, tensor<4x10x8xf32>, tensor<6xi32>) -> tensor<6x10xf32>
    %y = ds.expert_linear %x, %w[%ids] : (tensor<6x8xf32>, tensor<4x10x8xf32>, tensor<6xi32>) -> tensor<6x10xf32>
    // CHECK: ds.expert_linear %{{.+}}, %{{.+}}[%{{.+}}] transposed :
    %yt = ds.expert_linear %x, %wt[%ids] transposed : (tensor<6x8xf32>, tensor<4x8x10xf32>, tensor<6xi32>) -> tensor<6x10xf32>
    // CHECK: ds.expert_linear_grad_weight %{{.+}}, %{{.+}}[%{{.+}}] : (tensor<6x8xf32>, tensor<6x10xf32>, tensor<6xi32>) -> tensor<4x10x8xf32>
    %dw = ds.expert_linear_grad_weight %x, %dy[%ids] : (tensor<6x8xf32>, tensor<6x10xf32>, tensor<6xi32>) -> tensor<4x10x8xf32>
    // CHECK: ds.expert_linear_grad_weight %{{.+}}, %{{.+}}[%{{.+}}] transposed :
    %dwt = ds.expert_linear_grad_weight %x, %dy[%ids] transposed : (tensor<6x8xf32>, tensor<6x10xf32>, tensor<6xi32>) -> tensor<4x8x10xf32>
    // CHECK: ds.expert_capacity %{{.+}} experts = 4 choices = 2 capacity = 1 : tensor<6xi32>
    %kept = ds.expert_capacity %ids experts = 4 choices = 2 capacity = 1 : tensor<6xi32>
    // CHECK: ds.swiglu %{{.+}} rows[%{{.+}}] : (tensor<6x10xf32>, tensor<6xi32>) -> tensor<6x5xf32>
    %act = ds.swiglu %y rows[%ids] : (tensor<6x10xf32>, tensor<6xi32>) -> tensor<6x5xf32>
    // CHECK: ds.swiglu %{{.+}} : (tensor<2x3x10xf32>) -> tensor<2x3x5xf32>
    %act3 = ds.swiglu %y3 : (tensor<2x3x10xf32>) -> tensor<2x3x5xf32>
    // CHECK: ds.swiglu_grad %{{.+}}, %{{.+}} rows[%{{.+}}] : (tensor<6x10xf32>, tensor<6x5xf32>, tensor<6xi32>) -> tensor<6x10xf32>
    %dact = ds.swiglu_grad %y, %act rows[%ids] : (tensor<6x10xf32>, tensor<6x5xf32>, tensor<6xi32>) -> tensor<6x10xf32>
    return %v, %y, %yt, %dw, %dwt : tensor<6x2xf32>, tensor<6x10xf32>, tensor<6x10xf32>, tensor<4x10x8xf32>, tensor<4x8x10xf32>
  }

  // CHECK-LABEL: func.func @linear_cross_entropy(
  func.func @linear_cross_entropy(%x: tensor<5x4xf32>, %w: tensor<6x4xf32>, %b: tensor<6xf32>, %t: tensor<5xi64>, %dy: tensor<f32>) -> (tensor<f32>, tensor<5x4xf32>) {
    // CHECK: ds.linear_cross_entropy %{{.+}}, %{{.+}}, %{{.+}} target %{{.+}} tiles = 2 {label_smoothing = 1.000000e-01 : f64} : (tensor<5x4xf32>, tensor<6x4xf32>, tensor<6xf32>, tensor<5xi64>) -> (tensor<f32>, tensor<19xf32>)
    %0:2 = ds.linear_cross_entropy %x, %w, %b target %t tiles = 2 {label_smoothing = 0.1 : f64} : (tensor<5x4xf32>, tensor<6x4xf32>, tensor<6xf32>, tensor<5xi64>) -> (tensor<f32>, tensor<19xf32>)
    // CHECK: ds.linear_cross_entropy_grad %{{.+}}, %{{.+}} target %{{.+}} grad %{{.+}} tiles = 2 :
    %1:4 = ds.linear_cross_entropy_grad %x, %w target %t grad %dy tiles = 2 : (tensor<5x4xf32>, tensor<6x4xf32>, tensor<5xi64>, tensor<f32>) -> (tensor<5x4xf32>, tensor<6x4xf32>, tensor<6xf32>, tensor<66xf32>)
    return %0#0, %1#0 : tensor<f32>, tensor<5x4xf32>
  }

  // CHECK-LABEL: func.func @softmax(
  // CHECK-SAME: %[[X:[^:]+]]: tensor<2x3xf32>
  func.func @softmax(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
    // CHECK: %[[SM:.+]] = ds.softmax %[[X]] dim = 1 : tensor<2x3xf32>
    %0 = ds.softmax %x dim = 1 : tensor<2x3xf32>
    // CHECK: %[[LSM:.+]] = ds.log_softmax %[[SM]] dim = 0 : tensor<2x3xf32>
    %1 = ds.log_softmax %0 dim = 0 : tensor<2x3xf32>
    // CHECK: return %[[LSM]]
    return %1 : tensor<2x3xf32>
  }

  // CHECK-LABEL: func.func @layer_norm(
  // CHECK-SAME: %[[X:[^:]+]]: tensor<2x3x4xf32>, %[[W:[^:]+]]: tensor<3x4xf32>, %[[B:[^:]+]]: tensor<3x4xf32>
  func.func @layer_norm(%x: tensor<2x3x4xf32>, %w: tensor<3x4xf32>, %b: tensor<3x4xf32>) -> tensor<2x3x4xf32> {
    // CHECK: %[[L0:.+]] = ds.layer_norm %[[X]] weight %[[W]] bias %[[B]] normalized_shape = [3, 4] eps = 1.000000e-05 : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
    %0 = ds.layer_norm %x weight %w bias %b normalized_shape = [3, 4] eps = 1.0e-5 : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
    // CHECK: %[[L1:.+]] = ds.layer_norm %[[L0]] weight %[[W]] normalized_shape = [3, 4] eps = 1.000000e-05 : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
    %1 = ds.layer_norm %0 weight %w normalized_shape = [3, 4] eps = 1.0e-5 : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
    // CHECK: %[[L2:.+]] = ds.layer_norm %[[L1]] bias %[[B]] normalized_shape = [3, 4] eps = 1.000000e-05 : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
    %2 = ds.layer_norm %1 bias %b normalized_shape = [3, 4] eps = 1.0e-5 : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
    // CHECK: %[[L3:.+]] = ds.layer_norm %[[L2]] normalized_shape = [4] eps = 1.250000e-01 : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
    %3 = ds.layer_norm %2 normalized_shape = [4] eps = 0.125 : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
    // CHECK: return %[[L3]]
    return %3 : tensor<2x3x4xf32>
  }

  // CHECK-LABEL: func.func @batch_norm(
  // CHECK-SAME: %[[X:[^:]+]]: tensor<2x8x4x4xf32>, %[[W:[^:]+]]: tensor<8xf32>, %[[B:[^:]+]]: tensor<8xf32>, %[[RM:[^:]+]]: tensor<8xf32>, %[[RV:[^:]+]]: tensor<8xf32>
  func.func @batch_norm(%x: tensor<2x8x4x4xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>, %rm: tensor<8xf32>, %rv: tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x8xf32>) {
    // CHECK: %[[R:[^,]+]], %[[M:[^,]+]], %[[V:[^,]+]] = ds.batch_norm %[[X]] weight %[[W]] bias %[[B]] eps = 1.000000e-05 : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
    %r, %m, %v = ds.batch_norm %x weight %w bias %b eps = 1.0e-5 : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
    // CHECK: %[[R2:[^,]+]], %{{[^,]+}}, %{{[^,]+}} = ds.batch_norm %[[R]] eps = 1.000000e-05 : (tensor<2x8x4x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
    %r2, %m2, %v2 = ds.batch_norm %r eps = 1.0e-5 : (tensor<2x8x4x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
    // CHECK: %[[R3:[^,]+]], %{{[^,]+}}, %{{[^,]+}} = ds.batch_norm %[[R2]] weight %[[W]] eps = 1.000000e-05 : (tensor<2x8x4x4xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
    %r3, %m3, %v3 = ds.batch_norm %r2 weight %w eps = 1.0e-5 : (tensor<2x8x4x4xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
    // CHECK: %[[I0:.+]] = ds.batch_norm_inference %[[R3]] weight %[[W]] bias %[[B]] stats %[[RM]], %[[RV]] eps = 1.000000e-05 : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x4x4xf32>
    %i0 = ds.batch_norm_inference %r3 weight %w bias %b stats %rm, %rv eps = 1.0e-5 : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x4x4xf32>
    // CHECK: %[[I1:.+]] = ds.batch_norm_inference %[[I0]] stats %[[RM]], %[[RV]] eps = 1.000000e-05 : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x4x4xf32>
    %i1 = ds.batch_norm_inference %i0 stats %rm, %rv eps = 1.0e-5 : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x4x4xf32>
    // CHECK: %[[I2:.+]] = ds.batch_norm_inference %[[I1]] bias %[[B]] stats %[[RM]], %[[RV]] eps = 1.000000e-05 : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x4x4xf32>
    %i2 = ds.batch_norm_inference %i1 bias %b stats %rm, %rv eps = 1.0e-5 : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x4x4xf32>
    // Rank-2 input [N, C].
    // CHECK: %[[FLAT:.+]] = ds.reshape %[[RM]] : tensor<8xf32> -> tensor<1x8xf32>
    %flat = ds.reshape %rm : tensor<8xf32> -> tensor<1x8xf32>
    // CHECK: %[[BC:.+]] = ds.broadcast_to %[[FLAT]] : tensor<1x8xf32> -> tensor<2x8xf32>
    %bc = ds.broadcast_to %flat : tensor<1x8xf32> -> tensor<2x8xf32>
    // CHECK: %[[I3:.+]] = ds.batch_norm_inference %[[BC]] weight %[[W]] stats %[[RM]], %[[RV]] eps = 1.000000e-03 : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    %i3 = ds.batch_norm_inference %bc weight %w stats %rm, %rv eps = 1.0e-3 : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    // CHECK: return %[[I2]], %[[M]], %[[V]], %[[I3]]
    return %i2, %m, %v, %i3 : tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x8xf32>
  }

  // CHECK-LABEL: func.func @contractions(
  // CHECK-SAME: %[[A:[^:]+]]: tensor<5x2x3xf32>, %[[B:[^:]+]]: tensor<3x4xf32>, %[[W:[^:]+]]: tensor<6x3xf32>, %[[BIAS:[^:]+]]: tensor<6xf32>
  func.func @contractions(%a: tensor<5x2x3xf32>, %b: tensor<3x4xf32>, %w: tensor<6x3xf32>, %bias: tensor<6xf32>) -> (tensor<5x2x4xf32>, tensor<5x2x6xf32>, tensor<5x2x6xf32>, tensor<6xf32>) {
    // CHECK: %[[MM:.+]] = ds.matmul %[[A]], %[[B]] : tensor<5x2x3xf32>, tensor<3x4xf32> -> tensor<5x2x4xf32>
    %0 = ds.matmul %a, %b : tensor<5x2x3xf32>, tensor<3x4xf32> -> tensor<5x2x4xf32>
    // CHECK: %[[LB:.+]] = ds.linear %[[A]], %[[W]], %[[BIAS]] : (tensor<5x2x3xf32>, tensor<6x3xf32>, tensor<6xf32>) -> tensor<5x2x6xf32>
    %1 = ds.linear %a, %w, %bias : (tensor<5x2x3xf32>, tensor<6x3xf32>, tensor<6xf32>) -> tensor<5x2x6xf32>
    // CHECK: %[[LN:.+]] = ds.linear %[[A]], %[[W]] : (tensor<5x2x3xf32>, tensor<6x3xf32>) -> tensor<5x2x6xf32>
    %2 = ds.linear %a, %w : (tensor<5x2x3xf32>, tensor<6x3xf32>) -> tensor<5x2x6xf32>
    // CHECK: %[[V:.+]] = ds.slice %[[B]] dim = 1[0 : 1] : tensor<3x4xf32> -> tensor<3x1xf32>
    %col = ds.slice %b dim = 1 [0 : 1] : tensor<3x4xf32> -> tensor<3x1xf32>
    // CHECK: %[[V1:.+]] = ds.reshape %[[V]] : tensor<3x1xf32> -> tensor<3xf32>
    %vec = ds.reshape %col : tensor<3x1xf32> -> tensor<3xf32>
    // CHECK: %[[L1D:.+]] = ds.linear %[[V1]], %[[W]], %[[BIAS]] : (tensor<3xf32>, tensor<6x3xf32>, tensor<6xf32>) -> tensor<6xf32>
    %3 = ds.linear %vec, %w, %bias : (tensor<3xf32>, tensor<6x3xf32>, tensor<6xf32>) -> tensor<6xf32>
    // CHECK: return %[[MM]], %[[LB]], %[[LN]], %[[L1D]]
    return %0, %1, %2, %3 : tensor<5x2x4xf32>, tensor<5x2x6xf32>, tensor<5x2x6xf32>, tensor<6xf32>
  }

  // CHECK-LABEL: func.func @embedding(
  // CHECK-SAME: %[[W:[^:]+]]: tensor<10x4xf32>, %[[I:[^:]+]]: tensor<2x3xi64>, %[[J:[^:]+]]: tensor<5xi32>
  func.func @embedding(%w: tensor<10x4xf32>, %i: tensor<2x3xi64>, %j: tensor<5xi32>) -> (tensor<2x3x4xf32>, tensor<5x4xf32>) {
    // CHECK: %[[E0:.+]] = ds.embedding %[[W]][%[[I]]] : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    %0 = ds.embedding %w[%i] : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    // CHECK: %[[E1:.+]] = ds.embedding %[[W]][%[[J]]] {padding_idx = 0 : i64} : (tensor<10x4xf32>, tensor<5xi32>) -> tensor<5x4xf32>
    %1 = ds.embedding %w[%j] {padding_idx = 0 : i64} : (tensor<10x4xf32>, tensor<5xi32>) -> tensor<5x4xf32>
    // CHECK: return %[[E0]], %[[E1]]
    return %0, %1 : tensor<2x3x4xf32>, tensor<5x4xf32>
  }

  // CHECK-LABEL: func.func @cross_entropy(
  // CHECK-SAME: %[[L:[^:]+]]: tensor<4x10xf32>, %[[T:[^:]+]]: tensor<4xi64>, %[[L1:[^:]+]]: tensor<10xf32>, %[[T1:[^:]+]]: tensor<i32>
  func.func @cross_entropy(%l: tensor<4x10xf32>, %t: tensor<4xi64>, %l1: tensor<10xf32>, %t1: tensor<i32>) -> (tensor<f32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) {
    // CHECK: %[[CE0:.+]] = ds.cross_entropy %[[L]], %[[T]] : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    %0 = ds.cross_entropy %l, %t : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    // CHECK: %[[CE1:.+]] = ds.cross_entropy %[[L]], %[[T]] {ignore_index = 0 : i64, label_smoothing = 1.000000e-01 : f64, reduction = #ds<reduction none>} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<4xf32>
    %1 = ds.cross_entropy %l, %t {ignore_index = 0 : i64, reduction = #ds<reduction none>, label_smoothing = 0.1 : f64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<4xf32>
    // CHECK: %[[CE2:.+]] = ds.cross_entropy %[[L]], %[[T]] {label_smoothing = 1.000000e+00 : f64, reduction = #ds<reduction sum>} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    %2 = ds.cross_entropy %l, %t {reduction = #ds<reduction sum>, label_smoothing = 1.0 : f64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    // Attributes equal to their defaults are elided when printed.
    // CHECK: %[[CE3:.+]] = ds.cross_entropy %[[L]], %[[T]] : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    %3 = ds.cross_entropy %l, %t {ignore_index = -100 : i64, reduction = #ds<reduction mean>, label_smoothing = 0.0 : f64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    // CHECK: %[[CE4:.+]] = ds.cross_entropy %[[L1]], %[[T1]] : (tensor<10xf32>, tensor<i32>) -> tensor<f32>
    %4 = ds.cross_entropy %l1, %t1 : (tensor<10xf32>, tensor<i32>) -> tensor<f32>
    // CHECK: return %[[CE0]], %[[CE1]], %[[CE2]], %[[CE3]], %[[CE4]]
    return %0, %1, %2, %3, %4 : tensor<f32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>
  }

  // CHECK-LABEL: func.func @layout(
  // CHECK-SAME: %[[X:[^:]+]]: tensor<2x3x4xf32>, %[[Y:[^:]+]]: tensor<2x5x4xf32>, %[[Z:[^:]+]]: tensor<3x1xf32>
  func.func @layout(%x: tensor<2x3x4xf32>, %y: tensor<2x5x4xf32>, %z: tensor<3x1xf32>) -> (tensor<6x4xf32>, tensor<4x2x3xf32>, tensor<2x3x4xf32>, tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<2x1x4xf32>, tensor<2x13x4xf32>, tensor<2x3x4xf32>) {
    // CHECK: %[[RS:.+]] = ds.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
    %0 = ds.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
    // CHECK: %[[TR:.+]] = ds.transpose %[[X]] perm = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
    %1 = ds.transpose %x perm = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
    // CHECK: %[[BT:.+]] = ds.broadcast_to %[[Z]] : tensor<3x1xf32> -> tensor<2x3x4xf32>
    %2 = ds.broadcast_to %z : tensor<3x1xf32> -> tensor<2x3x4xf32>
    // CHECK: %[[SL0:.+]] = ds.slice %[[X]] dim = 1[0 : 3 : 2] : tensor<2x3x4xf32> -> tensor<2x2x4xf32>
    %3 = ds.slice %x dim = 1 [0 : 3 : 2] : tensor<2x3x4xf32> -> tensor<2x2x4xf32>
    // A step of 1 is the default and is elided.
    // CHECK: %[[SL1:.+]] = ds.slice %[[X]] dim = 1[1 : 3] : tensor<2x3x4xf32> -> tensor<2x2x4xf32>
    %4 = ds.slice %x dim = 1 [1 : 3 : 1] : tensor<2x3x4xf32> -> tensor<2x2x4xf32>
    // CHECK: %[[SL2:.+]] = ds.slice %[[X]] dim = 1[2 : 3] : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
    %5 = ds.slice %x dim = 1 [2 : 3] : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
    // CHECK: %[[CC:.+]] = ds.concat %[[X]], %[[Y]], %[[SL2]], %[[SL1]], %[[SL0]] dim = 1 : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x1x4xf32>, tensor<2x2x4xf32>, tensor<2x2x4xf32>) -> tensor<2x13x4xf32>
    %6 = ds.concat %x, %y, %5, %4, %3 dim = 1 : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x1x4xf32>, tensor<2x2x4xf32>, tensor<2x2x4xf32>) -> tensor<2x13x4xf32>
    // CHECK: %[[C1:.+]] = ds.concat %[[X]] dim = 0 : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
    %7 = ds.concat %x dim = 0 : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
    // CHECK: return %[[RS]], %[[TR]], %[[BT]], %[[SL0]], %[[SL1]], %[[SL2]], %[[CC]], %[[C1]]
    return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<6x4xf32>, tensor<4x2x3xf32>, tensor<2x3x4xf32>, tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<2x1x4xf32>, tensor<2x13x4xf32>, tensor<2x3x4xf32>
  }

  // CHECK-LABEL: func.func @conv_pool(
  // CHECK-SAME: %[[X:[^:]+]]: tensor<1x4x8x8xf32>, %[[W:[^:]+]]: tensor<6x2x3x3xf32>, %[[B:[^:]+]]: tensor<6xf32>, %[[W1:[^:]+]]: tensor<6x4x1x1xf32>
  func.func @conv_pool(%x: tensor<1x4x8x8xf32>, %w: tensor<6x2x3x3xf32>, %b: tensor<6xf32>, %w1: tensor<6x4x1x1xf32>) -> (tensor<1x6x2x2xf32>, tensor<1x6x4x4xf32>, tensor<1x6x3x3xf32>, tensor<1x6x4x4xf32>, tensor<1x6x4x4xf32>, tensor<1x6x2x2xf32>, tensor<1x4x1x1xf32>, tensor<6x3x2xf32>, tensor<1x6x8x8xf32>) {
    // CHECK: %[[C0:.+]] = ds.conv2d %[[X]], %[[W]], %[[B]] stride = [1, 1] padding = [1, 1] dilation = [1, 1] {groups = 2 : i64} : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<1x6x8x8xf32>
    %0 = ds.conv2d %x, %w, %b stride = [1, 1] padding = [1, 1] dilation = [1, 1] {groups = 2 : i64} : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<1x6x8x8xf32>
    // CHECK: %[[C1:.+]] = ds.conv2d %[[X]], %[[W]] stride = [2, 2] padding = [0, 0] dilation = [2, 2] {groups = 2 : i64} : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x2x2xf32>
    %1 = ds.conv2d %x, %w stride = [2, 2] padding = [0, 0] dilation = [2, 2] {groups = 2 : i64} : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x2x2xf32>
    // groups = 1 is the default and is elided.
    // CHECK: %[[C2:.+]] = ds.conv2d %[[X]], %[[W1]], %[[B]] stride = [1, 1] padding = [0, 0] dilation = [1, 1] : (tensor<1x4x8x8xf32>, tensor<6x4x1x1xf32>, tensor<6xf32>) -> tensor<1x6x8x8xf32>
    %2 = ds.conv2d %x, %w1, %b stride = [1, 1] padding = [0, 0] dilation = [1, 1] {groups = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<6x4x1x1xf32>, tensor<6xf32>) -> tensor<1x6x8x8xf32>
    // CHECK: %[[MP0:.+]] = ds.max_pool2d %[[C0]] kernel = [3, 3] stride = [2, 2] padding = [1, 1] dilation = [1, 1] : tensor<1x6x8x8xf32> -> tensor<1x6x4x4xf32>
    %3 = ds.max_pool2d %0 kernel = [3, 3] stride = [2, 2] padding = [1, 1] dilation = [1, 1] : tensor<1x6x8x8xf32> -> tensor<1x6x4x4xf32>
    // CHECK: %[[MP1:.+]] = ds.max_pool2d %[[C0]] kernel = [2, 2] stride = [3, 3] padding = [0, 0] dilation = [1, 1] ceil_mode : tensor<1x6x8x8xf32> -> tensor<1x6x3x3xf32>
    %4 = ds.max_pool2d %0 kernel = [2, 2] stride = [3, 3] padding = [0, 0] dilation = [1, 1] ceil_mode : tensor<1x6x8x8xf32> -> tensor<1x6x3x3xf32>
    // CHECK: %[[AP0:.+]] = ds.avg_pool2d %[[C0]] kernel = [2, 2] stride = [2, 2] padding = [0, 0] : tensor<1x6x8x8xf32> -> tensor<1x6x4x4xf32>
    %5 = ds.avg_pool2d %0 kernel = [2, 2] stride = [2, 2] padding = [0, 0] : tensor<1x6x8x8xf32> -> tensor<1x6x4x4xf32>
    // CHECK: %[[AP1:.+]] = ds.avg_pool2d %[[C0]] kernel = [3, 3] stride = [2, 2] padding = [1, 1] ceil_mode count_include_pad : tensor<1x6x8x8xf32> -> tensor<1x6x5x5xf32>
    %6 = ds.avg_pool2d %0 kernel = [3, 3] stride = [2, 2] padding = [1, 1] ceil_mode count_include_pad : tensor<1x6x8x8xf32> -> tensor<1x6x5x5xf32>
    // CHECK: %[[AP2:.+]] = ds.avg_pool2d %[[C0]] kernel = [3, 3] stride = [2, 2] padding = [1, 1] count_include_pad : tensor<1x6x8x8xf32> -> tensor<1x6x4x4xf32>
    %7 = ds.avg_pool2d %0 kernel = [3, 3] stride = [2, 2] padding = [1, 1] count_include_pad : tensor<1x6x8x8xf32> -> tensor<1x6x4x4xf32>
    // CHECK: %[[AP3:.+]] = ds.avg_pool2d %[[C0]] kernel = [2, 2] stride = [2, 2] padding = [1, 1] ceil_mode : tensor<1x6x8x8xf32> -> tensor<1x6x5x5xf32>
    %8 = ds.avg_pool2d %0 kernel = [2, 2] stride = [2, 2] padding = [1, 1] ceil_mode : tensor<1x6x8x8xf32> -> tensor<1x6x5x5xf32>
    // CHECK: %[[AA0:.+]] = ds.adaptive_avg_pool2d %[[AP1]] output_size = [2, 2] : tensor<1x6x5x5xf32> -> tensor<1x6x2x2xf32>
    %9 = ds.adaptive_avg_pool2d %6 output_size = [2, 2] : tensor<1x6x5x5xf32> -> tensor<1x6x2x2xf32>
    // CHECK: %[[AA1:.+]] = ds.adaptive_avg_pool2d %[[X]] output_size = [1, 1] : tensor<1x4x8x8xf32> -> tensor<1x4x1x1xf32>
    %10 = ds.adaptive_avg_pool2d %x output_size = [1, 1] : tensor<1x4x8x8xf32> -> tensor<1x4x1x1xf32>
    // CHECK: %[[R3:.+]] = ds.reshape %[[AP3]] : tensor<1x6x5x5xf32> -> tensor<6x5x5xf32>
    %r3 = ds.reshape %8 : tensor<1x6x5x5xf32> -> tensor<6x5x5xf32>
    // CHECK: %[[AA2:.+]] = ds.adaptive_avg_pool2d %[[R3]] output_size = [3, 2] : tensor<6x5x5xf32> -> tensor<6x3x2xf32>
    %11 = ds.adaptive_avg_pool2d %r3 output_size = [3, 2] : tensor<6x5x5xf32> -> tensor<6x3x2xf32>
    // CHECK: return %[[C1]], %[[MP0]], %[[MP1]], %[[AP0]], %[[AP2]], %[[AA0]], %[[AA1]], %[[AA2]], %[[C2]]
    return %1, %3, %4, %5, %7, %9, %10, %11, %2 : tensor<1x6x2x2xf32>, tensor<1x6x4x4xf32>, tensor<1x6x3x3xf32>, tensor<1x6x4x4xf32>, tensor<1x6x4x4xf32>, tensor<1x6x2x2xf32>, tensor<1x4x1x1xf32>, tensor<6x3x2xf32>, tensor<1x6x8x8xf32>
  }
}

// -----

// Training state and gradient ops.
// CHECK: ds.state @"w@grad" of @w role grad : tensor<2x3xf32>
// CHECK: ds.state @loss_scale role loss_scale : tensor<f32>
// CHECK-LABEL: func.func @train_ops
// CHECK: ds.dropout_mask p = 5.000000e-01 : tensor<2x3xf32>
// CHECK: ds.gelu_grad %{{.+}}, %{{.+}} approximate = tanh : tensor<2x3xf32>
// CHECK: ds.softmax_grad %{{.+}}, %{{.+}} dim = 1 log : tensor<2x3xf32>
// CHECK: ds.layer_norm_grad %{{.+}}, %{{.+}} weight %{{.+}} normalized_shape = [3]
// CHECK: ds.linear_grad_weight
// CHECK: ds.insert_slice %{{.+}} into %{{.+}} dim = 1{{ ?}}[0 : 2] : tensor<2x2xf32> into tensor<2x3xf32>
// CHECK: ds.assign @"w@grad" = %{{.+}} : tensor<2x3xf32>
ds.parameter @w trainable : tensor<2x3xf32>
ds.state @"w@grad" of @w role grad : tensor<2x3xf32>
ds.state @loss_scale role loss_scale : tensor<f32>
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
// CHECK: ds.flat_buffer @zero.params role params members [@w, @b] : tensor<32xf32>
// CHECK: ds.state @"zero.params@exp_avg" of @zero.params role exp_avg : tensor<16xf32>
module attributes {ds.zero = #ds.zero<stage = 1>} {
  ds.parameter @w trainable : tensor<6xf32>
  ds.parameter @b trainable : tensor<3xf32>
  ds.flat_buffer @zero.params role params members [@w, @b] : tensor<32xf32>
  ds.state @"zero.params@exp_avg" of @zero.params role exp_avg : tensor<16xf32>
}

// Expert parallelism's exchange (ds-expert-parallel) over a grid's axis.
module {
  shard.grid @grid(shape = 2x2)
  // CHECK-LABEL: func.func @expert_exchange(
  func.func @expert_exchange(%x: tensor<6x8xf32>, %w: tensor<2x10x8xf32>, %ids: tensor<6xi64>) -> tensor<6x10xf32> {
    // CHECK: ds.expert_route %{{.+}} experts = 4 on @grid grid_axes = [0] : (tensor<6xi64>) -> (tensor<10xi64>, tensor<12xi64>)
    %plan, %local = ds.expert_route %ids experts = 4 on @grid grid_axes = [0] : (tensor<6xi64>) -> (tensor<10xi64>, tensor<12xi64>)
    // CHECK: ds.expert_dispatch %{{.+}} along %{{.+}} on @grid grid_axes = [0] : (tensor<6x8xf32>, tensor<10xi64>) -> tensor<12x8xf32>
    %r = ds.expert_dispatch %x along %plan on @grid grid_axes = [0] : (tensor<6x8xf32>, tensor<10xi64>) -> tensor<12x8xf32>
    %e = ds.expert_linear %r, %w[%local] : (tensor<12x8xf32>, tensor<2x10x8xf32>, tensor<12xi64>) -> tensor<12x10xf32>
    // CHECK: ds.expert_combine %{{.+}} along %{{.+}} on @grid grid_axes = [0] : (tensor<12x10xf32>, tensor<10xi64>) -> tensor<6x10xf32>
    %y = ds.expert_combine %e along %plan on @grid grid_axes = [0] : (tensor<12x10xf32>, tensor<10xi64>) -> tensor<6x10xf32>
    // A capacity bounds the rows received below the dropless 12.
    // CHECK: ds.expert_route %{{.+}} : (tensor<6xi64>) -> (tensor<10xi64>, tensor<8xi64>)
    %plan8, %local8 = ds.expert_route %ids experts = 4 on @grid grid_axes = [0] : (tensor<6xi64>) -> (tensor<10xi64>, tensor<8xi64>)
    // CHECK: ds.expert_dispatch %{{.+}} : (tensor<6x8xf32>, tensor<10xi64>) -> tensor<8x8xf32>
    %r8 = ds.expert_dispatch %x along %plan8 on @grid grid_axes = [0] : (tensor<6x8xf32>, tensor<10xi64>) -> tensor<8x8xf32>
    %e8 = ds.expert_linear %r8, %w[%local8] : (tensor<8x8xf32>, tensor<2x10x8xf32>, tensor<8xi64>) -> tensor<8x10xf32>
    // CHECK: ds.expert_combine %{{.+}} : (tensor<8x10xf32>, tensor<10xi64>) -> tensor<6x10xf32>
    %y8 = ds.expert_combine %e8 along %plan8 on @grid grid_axes = [0] : (tensor<8x10xf32>, tensor<10xi64>) -> tensor<6x10xf32>
    return %y : tensor<6x10xf32>
  }
}

// RUN: ds-opt %s --ds-autodiff --canonicalize --cse --ds-zero="stage=3 data-parallel-size=2 param-persistence-threshold=20 reduce-bucket-size=200" --ds-optimizer --canonicalize --cse --ds-offload="optimizer=cpu param=cpu" | FileCheck %s
// RUN: ds-opt %s --ds-autodiff --canonicalize --cse --ds-zero="stage=3 data-parallel-size=2 param-persistence-threshold=20 reduce-bucket-size=200" --ds-optimizer --canonicalize --cse --ds-offload="optimizer=cpu param=cpu prefetch=0" | FileCheck %s --check-prefix=PF0
// RUN: ds-opt %s --ds-autodiff --canonicalize --cse --ds-optimizer --canonicalize --cse --ds-offload="optimizer=nvme param=nvme persistence-threshold=100" | FileCheck %s --check-prefix=NVME
// RUN: ds-opt %s --ds-autodiff --canonicalize --cse --ds-optimizer --canonicalize --cse --ds-offload="optimizer=cpu" | FileCheck %s --check-prefix=OPT

// ZeRO-3 at 2 ranks with both offloads on the CPU: the parameter shards, the moments and the
// gradient shards live in host memory.
// CHECK: module attributes {{.*}}ds.offload = {optimizer = #ds<offload_device cpu>, param = #ds<offload_device cpu>}
// CHECK: ds.state @"zero.params.0@shard" of @zero.params.0 role param_shard : tensor<160xf32> {ds.memory_space = #ds<memory_space host>}
// CHECK: ds.state @"zero.params.0@exp_avg" of @zero.params.0 role exp_avg : tensor<160xf32> {ds.memory_space = #ds<memory_space host>}
// CHECK: ds.state @"zero.params.0@grad" of @zero.params.0 role grad_shard : tensor<160xf32> {ds.memory_space = #ds<memory_space host>}
// Each shard comes to the device before its all-gather, issued one consumer ahead: bucket 1's
// move before bucket 2's gather, bucket 0's before bucket 1's.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[S2:.+]] = ds.get_parameter @"zero.params.2@shard" : tensor<128xf32>
// CHECK-NEXT: %[[D2:.+]] = ds.move %[[S2]] to device : tensor<128xf32>
// CHECK-NEXT: %[[S1:.+]] = ds.get_parameter @"zero.params.1@shard" : tensor<128xf32>
// CHECK-NEXT: %[[D1:.+]] = ds.move %[[S1]] to device : tensor<128xf32>
// CHECK-NEXT: shard.all_gather %[[D2]]
// CHECK: %[[S0:.+]] = ds.get_parameter @"zero.params.0@shard" : tensor<160xf32>
// CHECK-NEXT: %[[D0:.+]] = ds.move %[[S0]] to device : tensor<160xf32>
// CHECK-NEXT: shard.all_gather %[[D1]]
// CHECK-NEXT: shard.all_gather %[[D0]]
// A reduced gradient shard streams to the host and is accumulated there.
// CHECK: %[[RS:.+]] = shard.reduce_scatter %{{.+}} : tensor<320xf32> -> tensor<160xf32>
// CHECK: %[[G:.+]] = ds.get_parameter @"zero.params.0@grad" : tensor<160xf32>
// CHECK-NEXT: %[[H:.+]] = ds.move %[[RS]] to host : tensor<160xf32>
// CHECK-NEXT: %[[A:.+]] = ds.add %[[G]], %[[H]] {ds.on_host}
// CHECK-NEXT: ds.assign @"zero.params.0@grad" = %[[A]]
// The update runs on the host over host states: nothing moves to the device.
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NOT: to device
// CHECK: ds.adamw_update {{.*}} {ds.on_host}
// CHECK-NOT: to device
// CHECK: return

// prefetch=0: each move right before its gather.
// PF0-LABEL: func.func @micro_step
// PF0: ds.get_parameter @"zero.params.2@shard"
// PF0-NEXT: ds.move
// PF0-NEXT: shard.all_gather
// PF0: ds.get_parameter @"zero.params.1@shard"
// PF0-NEXT: ds.move
// PF0-NEXT: shard.all_gather

// One rank, both on NVMe (persistence threshold 100): l0-l2 (256 elements) live on NVMe, l3
// (64) stays on the device; the gradients accumulate in host memory; the moments on NVMe.
// NVME: ds.parameter @l0.weight trainable : tensor<16x16xf32> {ds.memory_space = #ds<memory_space nvme>}
// NVME: ds.parameter @l3.weight trainable : tensor<4x16xf32>{{$}}
// NVME: ds.state @"l0.weight@grad" of @l0.weight role grad : tensor<16x16xf32> {ds.memory_space = #ds<memory_space host>}
// NVME: ds.state @"l0.weight@exp_avg" of @l0.weight role exp_avg : tensor<16x16xf32> {ds.memory_space = #ds<memory_space nvme>}
// Forward and backward each bring a parameter over (split at the loss), one consumer ahead,
// never across the loss: l2's backward copy comes after it.
// NVME-LABEL: func.func @micro_step
// NVME: %[[R0:.+]] = ds.get_parameter @l0.weight
// NVME-NEXT: %[[W0:.+]] = ds.move %[[R0]] to device
// NVME-NEXT: %[[R1:.+]] = ds.get_parameter @l1.weight
// NVME-NEXT: %[[W1:.+]] = ds.move %[[R1]] to device
// NVME-NEXT: ds.linear %arg0, %[[W0]]
// NVME: ds.get_parameter @l2.weight
// NVME-NEXT: ds.move
// NVME-NEXT: ds.linear %{{.+}}, %[[W1]]
// NVME: %[[LOSS:.+]] = ds.cross_entropy
// NVME: %[[B2:.+]] = ds.get_parameter @l2.weight
// NVME-NEXT: %[[M2:.+]] = ds.move %[[B2]] to device
// NVME-NEXT: %[[B1:.+]] = ds.get_parameter @l1.weight
// NVME-NEXT: %[[M1:.+]] = ds.move %[[B1]] to device
// NVME-NEXT: ds.matmul %{{.+}}, %[[M2]]
// NVME: ds.matmul %{{.+}}, %[[M1]]
// NVME: %[[GR:.+]] = ds.move %{{.+}} to host : tensor<16x16xf32>
// NVME-NEXT: ds.add %{{.+}}, %[[GR]] {ds.on_host}
// The update reads the next parameter's NVMe state before this one's update.
// NVME-LABEL: func.func @optimizer_step
// NVME: ds.get_parameter @"l0.weight@exp_avg_sq"
// NVME-NEXT: ds.get_parameter @l1.weight
// NVME-NEXT: ds.get_parameter @"l1.weight@exp_avg"
// NVME-NEXT: ds.get_parameter @"l1.weight@exp_avg_sq"
// NVME-NEXT: ds.adamw_update
// A device parameter (l3) goes to the host for its update and comes back.
// NVME: %[[P3:.+]] = ds.move %{{.+}} to host : tensor<4x16xf32>
// NVME: %[[NEW:.+]], %{{.+}}, %{{.+}} = ds.adamw_update %[[P3]]
// NVME: %[[BACK:.+]] = ds.move %[[NEW]] to device : tensor<4x16xf32>
// NVME-NEXT: ds.assign @l3.weight = %[[BACK]]

// The optimizer alone: the parameters stay on the device; each goes to the host update and
// its new value back.
// OPT: ds.parameter @l0.weight trainable : tensor<16x16xf32>{{$}}
// OPT-LABEL: func.func @micro_step
// OPT-NOT: to device
// OPT-LABEL: func.func @optimizer_step
// OPT: %[[P:.+]] = ds.move %{{.+}} to host : tensor<16x16xf32>
// OPT: %[[N:.+]], %{{.+}}, %{{.+}} = ds.adamw_update %[[P]]
// OPT: %[[D:.+]] = ds.move %[[N]] to device
// OPT-NEXT: ds.assign @l0.weight = %[[D]]

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

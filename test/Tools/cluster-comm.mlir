// RUN: ds-opt %s --ds-zero="stage=1 data-parallel-size=2" --ds-optimizer -o %t.step.mlir
// RUN: echo '{"name": "toy", "nodes": 1, "devices_per_node": 2, "device_memory_bytes": 1e9, "peak_flops": {"bf16": 1e12, "fp16": 1e12, "fp32": 1e11}, "memory_bandwidth_bytes_per_s": 1e10, "intra_node_bandwidth_bytes_per_s": 64, "intra_node_latency_s": 0.5, "inter_node_bandwidth_bytes_per_s": 8, "inter_node_latency_s": 2, "host_memory_bytes": 1e10, "nvme_bandwidth_bytes_per_s": 1e9}' > %t.one.json
// RUN: ds-opt %t.step.mlir --comm-report --cluster %t.one.json | FileCheck %s
// RUN: echo '{"name": "toy2", "nodes": 2, "devices_per_node": 1, "device_memory_bytes": 1e9, "peak_flops": {"bf16": 1e12, "fp16": 1e12, "fp32": 1e11}, "memory_bandwidth_bytes_per_s": 1e10, "intra_node_bandwidth_bytes_per_s": 64, "intra_node_latency_s": 0.5, "inter_node_bandwidth_bytes_per_s": 8, "inter_node_latency_s": 2, "host_memory_bytes": 1e10, "nvme_bandwidth_bytes_per_s": 1e9}' > %t.two.json
// RUN: ds-opt %t.step.mlir --comm-report --cluster %t.two.json | FileCheck %s --check-prefix=NODES
// RUN: not ds-opt %t.step.mlir --comm-report --cluster dgx-a100:0 2>&1 | FileCheck %s --check-prefix=PRESET
// RUN: echo '{"nodes": 1}' > %t.bad.json
// RUN: not ds-opt %t.step.mlir --comm-report --cluster %t.bad.json 2>&1 | FileCheck %s --check-prefix=FIELD
// RUN: not ds-opt %t.step.mlir --memory-report --cluster dgx-h100 2>&1 | FileCheck %s --check-prefix=ALONE
// RUN: echo '{"name": "small", "nodes": 1, "devices_per_node": 1, "device_memory_bytes": 1e9, "peak_flops": {"bf16": 1e12, "fp16": 1e12, "fp32": 1e11}, "memory_bandwidth_bytes_per_s": 1e10, "intra_node_bandwidth_bytes_per_s": 64, "intra_node_latency_s": 0.5, "inter_node_bandwidth_bytes_per_s": 8, "inter_node_latency_s": 2, "host_memory_bytes": 1e10, "nvme_bandwidth_bytes_per_s": 1e9}' > %t.small.json
// RUN: not ds-opt %t.step.mlir --comm-report --cluster %t.small.json 2>&1 | FileCheck %s --check-prefix=FIT

// ZeRO stage 1 at 2 ranks (the step of memory-report.mlir): a reduce-scatter and an
// all-gather of the 128-byte flat buffer. Both ranks on one node: (2-1)/2 x 128 B at 64 B/s
// plus one 0.5 s step, 1.5 s each. On a node each: 64 B at 8 B/s plus a 2 s step, 10 s each.
// CHECK: seconds: the communication model on toy (1 nodes of 2 devices
// CHECK: axis     collective                calls            bytes      seconds
// CHECK-NEXT: dp       all_gather                    1              128     1.500000
// CHECK-NEXT: dp       reduce_scatter                1              128     1.500000
// CHECK-NEXT: total                                  2              256     3.000000
// NODES: dp       all_gather                    1              128    10.000000
// NODES: total                                  2              256    20.000000
// PRESET: ds-opt: error: --cluster dgx-a100:0: the node count after ':' must be a positive integer (e.g. dgx-a100:128)
// FIELD: ds-opt: error: cluster file '{{.*}}bad.json': missing 'devices_per_node' (a cluster file has nodes, devices_per_node,
// ALONE: ds-opt: error: --cluster prices a step on the machines: give --comm-report, --plan-report or --plan with it
// FIT: error: --cluster: the step runs on 2 ranks but small has 1 devices (1 nodes of 1); give more nodes (a preset takes NAME:NODES)
// NOSTEP: --memory-report needs a training step (@micro_step and @optimizer_step): pass --config to a TorchScript input
module attributes {ds.run = #ds.run<train_batch_size = 8, micro_batch_size = 4, gradient_accumulation_steps = 1, data_parallel_size = 2, steps_per_print = 10, seed = 1234, precision = fp32, zero_stage = 1, param_persistence_threshold = 100000, optimizer = AdamW, lr = 1.0e-3, aux_lr = 1.0e-3, beta1 = 0.9, schedule = <kind = constant>, deepspeed = "{}", numbers = "{}">} {
  ds.parameter @w trainable : tensor<2x3xf32>
  ds.parameter @b trainable : tensor<3xf32>
  ds.state @"w@grad" of @w role grad : tensor<2x3xf32>
  ds.state @"b@grad" of @b role grad : tensor<3xf32>
  func.func @micro_step(%x: tensor<2x3xf32> {ds.input_name = "x"}) -> tensor<f32> {
    %s = ds.sum %x dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

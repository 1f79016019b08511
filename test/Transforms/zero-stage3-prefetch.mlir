// RUN: ds-opt %s --ds-zero="stage=3 data-parallel-size=2 param-persistence-threshold=0 reduce-bucket-size=1 prefetch-bucket-size=0 max-reuse-distance=0" | FileCheck %s --check-prefix=NONE
// RUN: ds-opt %s --ds-zero="stage=3 data-parallel-size=2 param-persistence-threshold=0 reduce-bucket-size=1 prefetch-bucket-size=32 max-reuse-distance=0" | FileCheck %s --check-prefix=ONE
// RUN: ds-opt %s --ds-zero="stage=3 data-parallel-size=2 param-persistence-threshold=0 reduce-bucket-size=1 max-live-parameters=64 max-reuse-distance=0" | FileCheck %s --check-prefix=LIVE
// RUN: ds-opt %s --ds-zero="stage=3 data-parallel-size=2 param-persistence-threshold=0 reduce-bucket-size=1" | FileCheck %s --check-prefix=DEFAULT
// RUN: ds-opt %s --ds-zero="stage=3 data-parallel-size=2 param-persistence-threshold=0 reduce-bucket-size=1 max-reuse-distance=40" | FileCheck %s --check-prefix=REUSE

// Three parameters, each in a bucket of its own (32 elements gathered, 16 per shard), used in
// the order a, b, c in forward and c, b, a in backward.

// prefetch 0: every gather is issued right before its bucket's first use.
// NONE-LABEL: func.func @micro_step
// NONE: shard.all_gather
// NONE-NEXT: ds.slice
// NONE-NEXT: ds.mul %arg0
// NONE: shard.all_gather
// NONE-NEXT: ds.slice
// NONE-NEXT: ds.mul
// NONE: shard.all_gather
// NONE-NEXT: ds.slice
// NONE-NEXT: ds.mul

// prefetch of one bucket (32 elements): bucket k + 1 is gathered before bucket k's compute.
// ONE-LABEL: func.func @micro_step
// ONE: shard.all_gather
// ONE: shard.all_gather
// ONE: ds.mul %arg0
// ONE: shard.all_gather
// ONE: ds.mul
// ONE: ds.mul
// ONE: %[[LOSS:.+]] = ds.sum

// DeepSpeed's prefetch of 5e7 elements, capped by max_live_parameters 64: with the bucket
// computed, at most 64 elements, so again one ahead.
// LIVE-LABEL: func.func @micro_step
// LIVE: shard.all_gather
// LIVE: shard.all_gather
// LIVE: ds.mul %arg0
// LIVE: shard.all_gather
// LIVE: ds.mul

// DeepSpeed's defaults (prefetch 5e7, max live 1e9, reuse distance 1e9): all three gathered
// before the first use, and none again in backward (kept alive from forward).
// DEFAULT-LABEL: func.func @micro_step
// DEFAULT-COUNT-3: shard.all_gather
// DEFAULT-NOT: shard.all_gather

// max_reuse_distance 40: c's backward use follows its forward use directly (distance 0) and b's
// only c (32 < 40): kept; a's backward use follows b's and c's (64): gathered again.
// REUSE-LABEL: func.func @micro_step
// REUSE-COUNT-3: shard.all_gather
// REUSE: ds.sum
// REUSE: shard.all_gather {{.*}} : tensor<16xf32> -> tensor<32xf32>
// REUSE-NOT: shard.all_gather
module {
  ds.parameter @a trainable : tensor<8xf32>
  ds.parameter @b trainable : tensor<8xf32>
  ds.parameter @c trainable : tensor<8xf32>
  ds.state @"a@grad" of @a role grad : tensor<8xf32>
  ds.state @"b@grad" of @b role grad : tensor<8xf32>
  ds.state @"c@grad" of @c role grad : tensor<8xf32>
  func.func @micro_step(%x: tensor<8xf32>) -> tensor<f32> {
    %a = ds.get_parameter @a : tensor<8xf32>
    %b = ds.get_parameter @b : tensor<8xf32>
    %c = ds.get_parameter @c : tensor<8xf32>
    %h1 = ds.mul %x, %a : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    %h2 = ds.mul %h1, %b : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    %h3 = ds.mul %h2, %c : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    %loss = ds.sum %h3 dims = [0] : tensor<8xf32> -> tensor<f32>
    // Backward (stand-ins that read the parameters again).
    %gc = ds.mul %c, %h2 : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    %gb = ds.mul %b, %gc : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    %ga = ds.mul %a, %gb : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    %oc = ds.get_parameter @"c@grad" : tensor<8xf32>
    %nc = ds.add %oc, %gc : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    ds.assign @"c@grad" = %nc : tensor<8xf32>
    %ob = ds.get_parameter @"b@grad" : tensor<8xf32>
    %nb = ds.add %ob, %gb : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    ds.assign @"b@grad" = %nb : tensor<8xf32>
    %oa = ds.get_parameter @"a@grad" : tensor<8xf32>
    %na = ds.add %oa, %ga : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    ds.assign @"a@grad" = %na : tensor<8xf32>
    return %loss : tensor<f32>
  }
}

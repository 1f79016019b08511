// RUN: not ds-opt %s --ds-zero="stage=5" 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: not ds-opt %s --ds-zero="stage=0 data-parallel-size=0" 2>&1 | FileCheck %s --check-prefix=SIZE
// RUN: not ds-opt %s --ds-zero="stage=2 data-parallel-size=2 reduce-bucket-size=0" 2>&1 | FileCheck %s --check-prefix=BUCKET
// RUN: not ds-opt %s --ds-zero="stage=2 data-parallel-size=2" 2>&1 | FileCheck %s --check-prefix=NOMICRO
// RUN: not ds-opt %s --ds-optimizer --ds-zero="stage=0 data-parallel-size=2" 2>&1 | FileCheck %s --check-prefix=ORDER
// RUN: not ds-opt %s --ds-zero="stage=1 data-parallel-size=2" --ds-optimizer="type=Muon" 2>&1 | FileCheck %s --check-prefix=MUON

// STAGE: error: ds-zero: stage 5 is not a ZeRO stage (0, 1, 2 or 3)
// SIZE: error: ds-zero: data-parallel-size must be >= 1
// BUCKET: error: ds-zero: reduce-bucket-size must be >= 1 element
// NOMICRO: error: ds-zero: no @micro_step; run ds-autodiff first
// ORDER: error: ds-zero: the module already has an @optimizer_step; run ds-zero before ds-optimizer
// MUON: error: ds-optimizer: Muon with ZeRO stage 1 is not implemented yet (Newton-Schulz needs whole matrices); use stage 0
module {
  ds.parameter @w trainable : tensor<2x3xf32>
  ds.state @"w@grad" of @w role grad : tensor<2x3xf32>
}

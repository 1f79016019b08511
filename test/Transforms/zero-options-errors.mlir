// RUN: not ds-opt %s --ds-zero="stage=5" 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: not ds-opt %s --ds-zero="stage=0 data-parallel-size=2" 2>&1 | FileCheck %s --check-prefix=NOOPT
// RUN: not ds-opt %s --ds-zero="stage=0 data-parallel-size=0" 2>&1 | FileCheck %s --check-prefix=SIZE

// STAGE: error: ds-zero: stage 5 is not a ZeRO stage (0, 1, 2 or 3)
// NOOPT: error: ds-zero: no @optimizer_step; run ds-optimizer first
// SIZE: error: ds-zero: data-parallel-size must be >= 1
module {
}

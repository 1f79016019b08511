// RUN: ds-opt %s --ds-zero="stage=3 data-parallel-size=2" --verify-diagnostics

// expected-error @below {{ds-zero: stage 3 is not implemented yet; use stage 0, 1 or 2}}
module {
}

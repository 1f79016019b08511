// RUN: ds-opt %s --ds-zero="stage=2 data-parallel-size=2" --verify-diagnostics

// expected-error @below {{ds-zero: stage 2 is not implemented yet; use stage 0 or 1}}
module {
}

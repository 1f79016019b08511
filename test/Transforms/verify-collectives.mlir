// RUN: ds-opt %s --ds-verify-collectives --split-input-file --verify-diagnostics

// Accepted: the same collectives on every rank, including under a rank-dependent branch that
// both sides agree on, and a loop of known trip count.
module {
  shard.grid @dp(shape = 4)
  func.func @ok(%x: tensor<4xf32>) -> tensor<4xf32> {
    %r = shard.all_reduce %x on @dp grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %i = shard.process_linear_index on @dp : index
    %c0 = arith.constant 0 : index
    %first = arith.cmpi eq, %i, %c0 : index
    %y = scf.if %first -> tensor<4xf32> {
      %a = shard.all_reduce %r on @dp grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
      scf.yield %a : tensor<4xf32>
    } else {
      %b = shard.all_reduce %r on @dp grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
      scf.yield %b : tensor<4xf32>
    }
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %z = scf.for %k = %c0 to %c3 step %c1 iter_args(%acc = %y) -> tensor<4xf32> {
      %s = shard.all_reduce %acc on @dp grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
      scf.yield %s : tensor<4xf32>
    }
    return %z : tensor<4xf32>
  }
}

// -----

// A collective that only rank 0 issues: the other ranks would wait forever.
module {
  shard.grid @dp(shape = 2)
  func.func @rank_conditional(%x: tensor<4xf32>) -> tensor<4xf32> {
    %i = shard.process_linear_index on @dp : index
    %c0 = arith.constant 0 : index
    %first = arith.cmpi eq, %i, %c0 : index
    %y = scf.if %first -> tensor<4xf32> {
      // expected-error @below {{ds-verify-collectives: in @rank_conditional, ranks 0 and 1 of the group of @dp axes [0] diverge at its collective #1: rank 0 issues shard.all_reduce tensor<4xf32> -> tensor<4xf32> at}}
      %a = shard.all_reduce %x on @dp grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
      scf.yield %a : tensor<4xf32>
    } else {
      scf.yield %x : tensor<4xf32>
    }
    return %y : tensor<4xf32>
  }
}

// -----

// Same collective, different shapes on the two sides of a rank test.
module {
  shard.grid @dp(shape = 2)
  func.func @shape(%x: tensor<4xf32>, %w: tensor<8xf32>) {
    %i = shard.process_linear_index on @dp : index
    %c0 = arith.constant 0 : index
    %second = arith.cmpi ne, %i, %c0 : index
    scf.if %second {
      // expected-error @below {{ds-verify-collectives: in @shape, ranks 0 and 1 of the group of @dp axes [0] diverge at its collective #1: rank 0 issues shard.all_reduce tensor<4xf32> -> tensor<4xf32>}}
      %b = shard.all_reduce %w on @dp grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
    } else {
      %a = shard.all_reduce %x on @dp grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    }
    return
  }
}

// -----

// Same shape, another dtype.
module {
  shard.grid @dp(shape = 2)
  func.func @dtype(%x: tensor<4xf32>, %h: tensor<4xf16>) {
    %i = shard.process_linear_index on @dp : index
    %c0 = arith.constant 0 : index
    %first = arith.cmpi eq, %i, %c0 : index
    scf.if %first {
      %a = shard.all_reduce %x on @dp grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    } else {
      // expected-error @below {{rank 0 issues shard.all_reduce tensor<4xf32> -> tensor<4xf32>}}
      %b = shard.all_reduce %h on @dp grid_axes = [0] : tensor<4xf16> -> tensor<4xf16>
    }
    return
  }
}

// -----

// The same two collectives in another order on odd ranks.
module {
  shard.grid @dp(shape = 4)
  func.func @reorder(%x: tensor<4xf32>) {
    %i = shard.process_linear_index on @dp : index
    %c2 = arith.constant 2 : index
    %r = arith.remui %i, %c2 : index
    %c0 = arith.constant 0 : index
    %even = arith.cmpi eq, %r, %c0 : index
    scf.if %even {
      %a = shard.all_reduce %x on @dp grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
      %b = shard.all_gather %x on @dp grid_axes = [0] gather_axis = 0 : tensor<4xf32> -> tensor<16xf32>
    } else {
      // expected-error @below {{ds-verify-collectives: in @reorder, ranks 0 and 1 of the group of @dp axes [0] diverge at its collective #1: rank 0 issues shard.all_reduce tensor<4xf32> -> tensor<4xf32>}}
      %b = shard.all_gather %x on @dp grid_axes = [0] gather_axis = 0 : tensor<4xf32> -> tensor<16xf32>
      %a = shard.all_reduce %x on @dp grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    }
    return
  }
}

// -----

// A data-dependent condition whose sides disagree: ranks may take different sides.
module {
  shard.grid @dp(shape = 2)
  func.func @data_dependent(%x: tensor<4xf32>, %flag: i1) {
    scf.if %flag {
      // expected-error @below {{ds-verify-collectives: shard.all_reduce tensor<4xf32> -> tensor<4xf32> at}}
      %a = shard.all_reduce %x on @dp grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    }
    return
  }
}

// -----

// A loop whose trip count is not known at compile time cannot be checked.
module {
  shard.grid @dp(shape = 2)
  func.func @loop(%x: tensor<4xf32>, %n: index) -> tensor<4xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    // expected-error @below {{ds-verify-collectives: a loop at}}
    %z = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %x) -> tensor<4xf32> {
      %s = shard.all_reduce %acc on @dp grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
      scf.yield %s : tensor<4xf32>
    }
    return %z : tensor<4xf32>
  }
}

// -----

// Other control flow around a collective cannot be checked either.
module {
  shard.grid @dp(shape = 2)
  func.func @while(%x: tensor<4xf32>, %go: i1) -> tensor<4xf32> {
    // expected-error @below {{ds-verify-collectives: collectives inside scf.while cannot be checked; use scf.if, scf.index_switch or scf.for}}
    %r = scf.while (%a = %x) : (tensor<4xf32>) -> tensor<4xf32> {
      scf.condition(%go) %a : tensor<4xf32>
    } do {
    ^bb0(%b: tensor<4xf32>):
      %s = shard.all_reduce %b on @dp grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
      scf.yield %s : tensor<4xf32>
    }
    return %r : tensor<4xf32>
  }
}

// -----

// A 2 x 2 grid (dp, tp), each group with its own queue: the ranks with dp = 0 issue their tp
// collective before their dp one, the others after. Within each group the members agree, so
// the order between groups does not matter (the runtime's queues keep them apart).
module {
  shard.grid @mesh(shape = 2x2)
  func.func @across_groups(%x: tensor<4xf32>) -> tensor<4xf32> {
    %d = shard.process_multi_index on @mesh axes = [0] : index
    %c0 = arith.constant 0 : index
    %first = arith.cmpi eq, %d, %c0 : index
    %y = scf.if %first -> tensor<4xf32> {
      %t = shard.all_reduce %x on @mesh grid_axes = [1] : tensor<4xf32> -> tensor<4xf32>
      %a = shard.all_reduce %t on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
      scf.yield %a : tensor<4xf32>
    } else {
      %a = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
      %t = shard.all_reduce %a on @mesh grid_axes = [1] : tensor<4xf32> -> tensor<4xf32>
      scf.yield %t : tensor<4xf32>
    }
    return %y : tensor<4xf32>
  }
}

// -----

// The tp ranks of one group disagree: tp index 1 skips the tp all-reduce.
module {
  shard.grid @mesh(shape = 2x2)
  func.func @within_group(%x: tensor<4xf32>) -> tensor<4xf32> {
    %t = shard.process_multi_index on @mesh axes = [1] : index
    %c0 = arith.constant 0 : index
    %first = arith.cmpi eq, %t, %c0 : index
    %y = scf.if %first -> tensor<4xf32> {
      // expected-error @below {{ds-verify-collectives: in @within_group, ranks 0 and 1 of the group of @mesh axes [1] at axis 0 = 0 diverge at its collective #1: rank 0 issues shard.all_reduce tensor<4xf32> -> tensor<4xf32>}}
      %a = shard.all_reduce %x on @mesh grid_axes = [1] : tensor<4xf32> -> tensor<4xf32>
      scf.yield %a : tensor<4xf32>
    } else {
      scf.yield %x : tensor<4xf32>
    }
    return %y : tensor<4xf32>
  }
}

//lect,7 w
  ds.parameter @"" : tensor<i64> {typenot}

// Evreoy   funce(%v: tn
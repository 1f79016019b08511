// RUN: ds-opt %s | ds-opt | FileCheck %s
// RUN: ds-opt %s --mlir-print-op-generic | ds-opt | FileCheck %s

// Generation's ops (DSGenerateOps.td): the cache as a state of role kv_cache, written by
// ds.cache_write, read by ds.paged_attention; the token chosen by ds.sample.
// CHECK: ds.state @layers.0.k_cache role kv_cache : tensor<8x2x4x16xf32>
// CHECK: ds.state @layers.0.v_cache role kv_cache : tensor<8x2x4x8xf32>
module {
  ds.state @"layers.0.k_cache" role kv_cache : tensor<8x2x4x16xf32>
  ds.state @"layers.0.v_cache" role kv_cache : tensor<8x2x4x8xf32>

  // CHECK-LABEL: func.func @decode(
  func.func @decode(%q: tensor<3x4x1x16xf32>, %k: tensor<3x2x1x16xf32>, %v: tensor<3x2x1x8xf32>,
                    %slots: tensor<3x1xi64>, %pages: tensor<3x5xi64>, %lens: tensor<3xi64>,
                    %qlens: tensor<3xi64>) -> tensor<3x4x1x8xf32> {
    %kc = ds.get_parameter @"layers.0.k_cache" : tensor<8x2x4x16xf32>
    %vc = ds.get_parameter @"layers.0.v_cache" : tensor<8x2x4x8xf32>
    // CHECK: %[[K:[^,]+]], %[[V:[^ ]+]] = ds.cache_write %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : tensor<8x2x4x16xf32>, tensor<8x2x4x8xf32>, tensor<3x2x1x16xf32>, tensor<3x2x1x8xf32>, tensor<3x1xi64>
    %kc1, %vc1 = ds.cache_write %kc, %vc, %k, %v, %slots
        : tensor<8x2x4x16xf32>, tensor<8x2x4x8xf32>, tensor<3x2x1x16xf32>,
          tensor<3x2x1x8xf32>, tensor<3x1xi64>
    ds.assign @"layers.0.k_cache" = %kc1 : tensor<8x2x4x16xf32>
    ds.assign @"layers.0.v_cache" = %vc1 : tensor<8x2x4x8xf32>
    // CHECK: ds.paged_attention %{{.+}}, %[[K]], %[[V]], %{{.+}}, %{{.+}}, %{{.+}} scale = 2.500000e-01 : (tensor<3x4x1x16xf32>, tensor<8x2x4x16xf32>, tensor<8x2x4x8xf32>, tensor<3x5xi64>, tensor<3xi64>, tensor<3xi64>) -> tensor<3x4x1x8xf32>
    %o = ds.paged_attention %q, %kc1, %vc1, %pages, %lens, %qlens scale = 0.25
        : (tensor<3x4x1x16xf32>, tensor<8x2x4x16xf32>, tensor<8x2x4x8xf32>, tensor<3x5xi64>,
           tensor<3xi64>, tensor<3xi64>) -> tensor<3x4x1x8xf32>
    return %o : tensor<3x4x1x8xf32>
  }

  // CHECK-LABEL: func.func @choose(
  func.func @choose(%logits: tensor<3x64xbf16>, %t: tensor<3xf32>, %k: tensor<3xi64>,
                    %p: tensor<3xf32>, %seeds: tensor<3xi64>, %steps: tensor<3xi64>)
      -> tensor<3xi64> {
    // CHECK: ds.sample %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : (tensor<3x64xbf16>, tensor<3xf32>, tensor<3xi64>, tensor<3xf32>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
    %tok = ds.sample %logits, %t, %k, %p, %seeds, %steps
        : (tensor<3x64xbf16>, tensor<3xf32>, tensor<3xi64>, tensor<3xf32>, tensor<3xi64>,
           tensor<3xi64>) -> tensor<3xi64>
    return %tok : tensor<3xi64>
  }
}

// RUN: ds-opt %s --ds-lower-to-runtime | FileCheck %s
// RUN: ds-opt %s --ds-lower-to-runtime | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=LLVM

// Generation's programs (@prefill, @decode) lower to `void (ctx, inputs, results)`: the
// inputs read from the caller's array as a micro-step's, the results stored into the second
// array. The caches are slots (role kv_cache): where the new cache goes back to its slot,
// dsrt_cache_write writes into the slot's own storage; where it does not, or where the program
// reads the old cache again (@prefill), into a copy.
// LLVM-DAG: define void @ds_init_slots(ptr %0)
// LLVM-DAG: define void @ds_decode(ptr %0, ptr %1, ptr %2)
// LLVM-DAG: define void @ds_prefill(ptr %0, ptr %1, ptr %2)
// LLVM-DAG: define ptr @ds_metadata()

// CHECK-LABEL: llvm.func @ds_init_slots
// CHECK-COUNT-3: llvm.call @dsrt_slot_define
// CHECK: llvm.func @ds_prefill(%{{.+}}: !llvm.ptr, %{{.+}}: !llvm.ptr, %[[OUT:.+]]: !llvm.ptr)
// CHECK: %[[KC:.+]] = llvm.call @dsrt_slot_get
// CHECK: %[[VC:.+]] = llvm.call @dsrt_slot_get
// CHECK: llvm.call @dsrt_slice
// CHECK: %[[KN:.+]] = llvm.call @dsrt_tensor_alloc
// CHECK: llvm.call @dsrt_copy(%{{.+}}, %[[KN]], %[[KC]])
// CHECK: %[[VN:.+]] = llvm.call @dsrt_tensor_alloc
// CHECK: llvm.call @dsrt_copy(%{{.+}}, %[[VN]], %[[VC]])
// CHECK: llvm.call @dsrt_cache_write(%{{.+}}, %[[KN]], %[[VN]],
// CHECK: llvm.call @dsrt_slot_set
// CHECK: llvm.call @dsrt_paged_attention
// CHECK: %[[R0:.+]] = llvm.getelementptr %[[OUT]][0]
// CHECK: llvm.store %{{.+}}, %[[R0]]
// CHECK: %[[R1:.+]] = llvm.getelementptr %[[OUT]][1]
// CHECK: llvm.store %{{.+}}, %[[R1]]
// CHECK: llvm.return
// CHECK: llvm.func @ds_decode(%{{.+}}: !llvm.ptr, %[[IN:.+]]: !llvm.ptr, %[[OUT:.+]]: !llvm.ptr)
// CHECK: llvm.getelementptr %[[IN]][0]
// CHECK: %[[KC:.+]] = llvm.call @dsrt_slot_get
// CHECK: %[[VC:.+]] = llvm.call @dsrt_slot_get
// CHECK-NOT: llvm.call @dsrt_copy
// CHECK: llvm.call @dsrt_cache_write(%arg0, %[[KD:[0-9]+]], %[[VD:[0-9]+]],
// CHECK-NOT: llvm.call @dsrt_copy
// CHECK: llvm.call @dsrt_paged_attention(%arg0, %{{[0-9]+}}, %{{[0-9]+}}, %[[KD]], %[[VD]],
// CHECK: llvm.call @dsrt_sample
// CHECK: %[[R0:.+]] = llvm.getelementptr %[[OUT]][0]
// CHECK: llvm.store %{{.+}}, %[[R0]]
// CHECK: %[[R1:.+]] = llvm.getelementptr %[[OUT]][1]
// CHECK: llvm.store %{{.+}}, %[[R1]]
// CHECK: llvm.return

// The plan: the weight 256 + the caches 2 x 2048 = 4352 persistent. @prefill: + its inputs
// (q 768, k and v 384 each, slots 48, pages 64, the lengths 2 x 16: 1680) + the key cache's
// first page 256 + the caches' copies 2 x 2048 = 10384 (the attention's result, 768, comes
// after the old value cache's storage went with its slot's new value). @decode: + its inputs (q 256, k and v 64
// each, slots 16, pages 64, the lengths 32, the five sampling parameters 80: 688) + the
// attention's result 256 + its slice 64 (a copy) = 5360, the caches written in place.
// CHECK: \22generation\22:[{\22input_bytes\22:1680,
// CHECK-SAME: \22name\22:\22prefill\22,\22peak_bytes\22:10384,
// CHECK-SAME: \22input_bytes\22:688,
// CHECK-SAME: \22name\22:\22decode\22,\22peak_bytes\22:5360,\22results\22:[{\22dims\22:[2],\22dtype\22:\22i64\22},{\22dims\22:[2,8],\22dtype\22:\22f32\22}],\22symbol\22:\22ds_decode\22
// CHECK-SAME: \22peak_bytes\22:10384,\22persistent_bytes\22:4352
module {
  ds.parameter @w : tensor<8x8xf32>
  ds.state @k_cache role kv_cache : tensor<8x2x4x8xf32>
  ds.state @v_cache role kv_cache : tensor<8x2x4x8xf32>

  // A chunk whose keys go to a copy of the key cache (not written back: kept for this call),
  // its values to a copy of the value cache too (written back, but read again for the
  // second result, which must see the cache as it was).
  func.func @prefill(%q: tensor<2x4x3x8xf32> {ds.input_name = "q"},
                     %k: tensor<2x2x3x8xf32> {ds.input_name = "k"},
                     %v: tensor<2x2x3x8xf32> {ds.input_name = "v"},
                     %slots: tensor<2x3xi64> {ds.input_name = "slots"},
                     %pages: tensor<2x4xi64> {ds.input_name = "pages"},
                     %lens: tensor<2xi64> {ds.input_name = "context_lens"},
                     %qlens: tensor<2xi64> {ds.input_name = "q_lens"})
      -> (tensor<2x4x3x8xf32>, tensor<1x2x4x8xf32>) {
    %kc = ds.get_parameter @k_cache : tensor<8x2x4x8xf32>
    %vc = ds.get_parameter @v_cache : tensor<8x2x4x8xf32>
    %before = ds.get_parameter @v_cache : tensor<8x2x4x8xf32>
    %page0 = ds.slice %before dim = 0 [0 : 1] : tensor<8x2x4x8xf32> -> tensor<1x2x4x8xf32>
    %kc1, %vc1 = ds.cache_write %kc, %vc, %k, %v, %slots
        : tensor<8x2x4x8xf32>, tensor<8x2x4x8xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x8xf32>,
          tensor<2x3xi64>
    ds.assign @v_cache = %vc1 : tensor<8x2x4x8xf32>
    %o = ds.paged_attention %q, %kc1, %vc1, %pages, %lens, %qlens scale = 0.25
        : (tensor<2x4x3x8xf32>, tensor<8x2x4x8xf32>, tensor<8x2x4x8xf32>, tensor<2x4xi64>,
           tensor<2xi64>, tensor<2xi64>) -> tensor<2x4x3x8xf32>
    return %o, %page0 : tensor<2x4x3x8xf32>, tensor<1x2x4x8xf32>
  }

  // One token per sequence: both caches written in place, the token chosen on the device.
  func.func @decode(%q: tensor<2x4x1x8xf32> {ds.input_name = "q"},
                    %k: tensor<2x2x1x8xf32> {ds.input_name = "k"},
                    %v: tensor<2x2x1x8xf32> {ds.input_name = "v"},
                    %slots: tensor<2x1xi64> {ds.input_name = "slots"},
                    %pages: tensor<2x4xi64> {ds.input_name = "pages"},
                    %lens: tensor<2xi64> {ds.input_name = "context_lens"},
                    %qlens: tensor<2xi64> {ds.input_name = "q_lens"},
                    %t: tensor<2xf32> {ds.input_name = "temperature"},
                    %topk: tensor<2xi64> {ds.input_name = "top_k"},
                    %topp: tensor<2xf32> {ds.input_name = "top_p"},
                    %seeds: tensor<2xi64> {ds.input_name = "seeds"},
                    %steps: tensor<2xi64> {ds.input_name = "steps"})
      -> (tensor<2xi64>, tensor<2x8xf32>) {
    %kc = ds.get_parameter @k_cache : tensor<8x2x4x8xf32>
    %vc = ds.get_parameter @v_cache : tensor<8x2x4x8xf32>
    %kc1, %vc1 = ds.cache_write %kc, %vc, %k, %v, %slots
        : tensor<8x2x4x8xf32>, tensor<8x2x4x8xf32>, tensor<2x2x1x8xf32>, tensor<2x2x1x8xf32>,
          tensor<2x1xi64>
    ds.assign @k_cache = %kc1 : tensor<8x2x4x8xf32>
    ds.assign @v_cache = %vc1 : tensor<8x2x4x8xf32>
    %o = ds.paged_attention %q, %kc1, %vc1, %pages, %lens, %qlens scale = 0.25
        : (tensor<2x4x1x8xf32>, tensor<8x2x4x8xf32>, tensor<8x2x4x8xf32>, tensor<2x4xi64>,
           tensor<2xi64>, tensor<2xi64>) -> tensor<2x4x1x8xf32>
    %h = ds.slice %o dim = 1 [0 : 1] : tensor<2x4x1x8xf32> -> tensor<2x1x1x8xf32>
    %r = ds.reshape %h : tensor<2x1x1x8xf32> -> tensor<2x8xf32>
    %w = ds.get_parameter @w : tensor<8x8xf32>
    %logits = ds.linear %r, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %tok = ds.sample %logits, %t, %topk, %topp, %seeds, %steps
        : (tensor<2x8xf32>, tensor<2xf32>, tensor<2xi64>, tensor<2xf32>, tensor<2xi64>,
           tensor<2xi64>) -> tensor<2xi64>
    return %tok, %logits : tensor<2xi64>, tensor<2x8xf32>
  }
}

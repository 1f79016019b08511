// RUN: not ds-opt %s --split-input-file --ds-offload="optimizer=gpu" 2>&1 | FileCheck %s --check-prefix=DEVICE
// RUN: not ds-opt %s --split-input-file --ds-offload="optimizer=cpu" 2>&1 | FileCheck %s --check-prefix=CPU
// RUN: not ds-opt %s --split-input-file --verify-each=0 --ds-offload="param=cpu" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ATTR

// The option names DeepSpeed's devices; a pipeline and a module without the training step
// are refused.
// DEVICE: for the --optimizer option: Cannot find option named 'gpu'!
// CPU: error: ds-offload needs @micro_step and @optimizer_step (run ds-autodiff and ds-optimizer first)
// CPU: error: ds-offload: offloading a pipeline's state is not implemented yet; drop zero_optimization.offload_* or pipeline.stages
module {
  ds.parameter @w trainable : tensor<4x4xf32>
  func.func @forward(%x: tensor<2x4xf32>, %y: tensor<2xi64>) -> tensor<f32> {
    %w = ds.get_parameter @w : tensor<4x4xf32>
    %h = ds.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %l = ds.cross_entropy %h, %y : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module attributes {ds.pipeline = #ds.pipeline<stages = 2, virtual_stages = 1>} {
  ds.parameter @w trainable : tensor<4x4xf32>
}

// -----

// The attributes and ds.move are verified.
// ATTR: error: 'ds.memory_space' must be a #ds<memory_space ...> (device, host or nvme)
module {
  ds.parameter @w trainable : tensor<4x4xf32> {ds.memory_space = "host"}
}

// -----

// ATTR: error: expected ::mlir::ds::MemorySpace to be one of: device, host, nvme
module {
  ds.parameter @w trainable : tensor<4x4xf32> {ds.memory_space = #ds<memory_space disk>}
}

// -----

// ATTR: error: 'ds.memory_space' belongs on a ds.parameter, ds.state or ds.flat_buffer
module {
  func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {ds.memory_space = #ds<memory_space host>} {
    return %x : tensor<4xf32>
  }
}

// -----

// ATTR: error: 'ds.move' op moves to device or host, not nvme (NVMe is reached through the states that live there)
module {
  func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
    %m = ds.move %x to nvme : tensor<4xf32>
    return %m : tensor<4xf32>
  }
}

// DeepSpeed's AutoTP layer rules override what ds-tensor-parallel finds in the graph:
// tensor_parallel.partition_config's layer_specs (regular expressions from the start of a
// parameter's name, partition_type column, row or skip, use_default_specs), or an HF
// base_model_tp_plan given as tensor_parallel.tp_plan (colwise, rowwise). The summary says what
// split and why the rest stayed whole; a rule ds cannot honour is an error naming the layer.
//
// Only layer 0 by the rules, the rest whole:
// RUN: echo '{"train_batch_size": 2, "tensor_parallel": {"autotp_size": 2, "partition_config": {"use_default_specs": false, "layer_specs": [{"patterns": [".*\\.0\\.fc1\\.weight$"], "partition_type": "column", "partition_dim": 0}, {"patterns": [".*\\.0\\.fc2\\.weight$"], "partition_type": "row"}]}}}' > %t.only0.json
// RUN: ds-opt %s --config %t.only0.json -o %t.mlir 2>&1 | FileCheck %s --check-prefix=ONLY0
// ONLY0: ds-opt: tensor parallelism over tp=2: 2 of 4 trainable parameters split
// ONLY0-NEXT:  layers.0.fc1.weight: dimension 0
// ONLY0-NEXT:  layers.0.fc2.weight: dimension 1
// ONLY0-NEXT: ds-opt: 2 stay whole on every tp rank:
// ONLY0-NEXT:  layers.1.fc1.weight, layers.1.fc2.weight: no tensor_parallel.partition_config layer spec matches it (use_default_specs is false)
//
// A skip on top of the graph's split:
// RUN: echo '{"train_batch_size": 2, "tensor_parallel": {"autotp_size": 2, "partition_config": {"layer_specs": [{"patterns": ["layers\\.1\\.fc1\\.weight"], "partition_type": "skip"}]}}}' > %t.skip.json
// RUN: ds-opt %s --config %t.skip.json -o %t.mlir 2>&1 | FileCheck %s --check-prefix=SKIP
// SKIP: ds-opt: tensor parallelism over tp=2: 2 of 4 trainable parameters split
// SKIP: layers.1.fc1.weight: tensor_parallel.partition_config keeps it whole (partition_type skip)
//
// An HF tp_plan (module names with * for the layer index) splits both pairs:
// RUN: echo '{"train_batch_size": 2, "tensor_parallel": {"autotp_size": 2, "tp_plan": {"layers.*.fc1": "colwise", "layers.*.fc2": "rowwise"}}}' > %t.plan.json
// RUN: ds-opt %s --config %t.plan.json -o %t.mlir 2>&1 | FileCheck %s --check-prefix=PLAN
// PLAN: ds-opt: tensor parallelism over tp=2: 4 of 4 trainable parameters split
// PLAN-NEXT:  layers.*.fc1.weight (2): dimension 0
// PLAN-NEXT:  layers.*.fc2.weight (2): dimension 1
//
// A rule ds cannot follow (fc1 as a row-parallel linear: nothing column-parallel before it):
// RUN: echo '{"train_batch_size": 2, "tensor_parallel": {"autotp_size": 2, "partition_config": {"layer_specs": [{"patterns": [".*fc1\\.weight$"], "partition_type": "row"}]}}}' > %t.row.json
// RUN: not ds-opt %s --config %t.row.json -o %t.mlir 2>&1 | FileCheck %s --check-prefix=ROW
// ROW: error: ds-tensor-parallel: tensor_parallel.partition_config splits 'layers.0.fc1.weight' by row, but ds cannot: no column-parallel linear starts a region that ends at it (change its partition_type, or skip it)
//
// The config's own errors and warnings:
// RUN: echo '{"train_batch_size": 2, "tensor_parallel": {"autotp_size": 2, "partition_config": {"layer_specs": [{"patterns": ["fc1["], "partition_type": "column"}]}}}' > %t.regex.json
// RUN: not ds-opt %s --config %t.regex.json -o %t.mlir 2>&1 | FileCheck %s --check-prefix=REGEX
// REGEX: 'tensor_parallel.partition_config.layer_specs[0].patterns' is not a regular expression ds can read ({{.*}}): 'fc1['
// RUN: echo '{"train_batch_size": 2, "tensor_parallel": {"autotp_size": 2, "partition_config": {"layer_specs": [{"patterns": ["fc1"], "partition_type": "colwise"}]}}}' > %t.type.json
// RUN: not ds-opt %s --config %t.type.json -o %t.mlir 2>&1 | FileCheck %s --check-prefix=TYPE
// TYPE: 'tensor_parallel.partition_config.layer_specs[0].partition_type' must be "column", "row" or "skip"
// RUN: echo '{"train_batch_size": 2, "tensor_parallel": {"autotp_size": 2, "partition_config": {"layer_specs": [{"patterns": ["fc2"], "partition_type": "row", "partition_dim": 0}]}}}' > %t.dim.json
// RUN: not ds-opt %s --config %t.dim.json -o %t.mlir 2>&1 | FileCheck %s --check-prefix=DIM
// DIM: 'tensor_parallel.partition_config.layer_specs[0].partition_dim' must be 1: ds splits a row-parallel linear's weight [out, in] along dimension 1
// RUN: echo '{"train_batch_size": 2, "tensor_parallel": {"autotp_size": 2, "partition_config": {"layer_specs": [{"patterns": ["fc1"], "partition_type": "column", "shape": [2, -1]}]}, "tp_plan": {"layers.*.fc1": "colwise"}}}' > %t.shape.json
// RUN: ds-opt %s --config %t.shape.json -o %t.mlir 2>&1 | FileCheck %s --check-prefix=SHAPE
// SHAPE-DAG: warning: {{.*}}'tensor_parallel.partition_config.layer_specs[0].shape' is not needed: ds finds a fused projection's segments in the graph (ds-opt's summary lists them)
// SHAPE-DAG: warning: {{.*}}'tensor_parallel.tp_plan' is ignored: partition_config takes precedence over it, as in DeepSpeed
// RUN: echo '{"train_batch_size": 2, "tensor_parallel": {"autotp_size": 2, "tp_plan": {"layers.*.fc1": "colwise_rep"}}}' > %t.rep.json
// RUN: not ds-opt %s --config %t.rep.json -o %t.mlir 2>&1 | FileCheck %s --check-prefix=REP
// REP: 'tensor_parallel.tp_plan.layers.*.fc1' must be "colwise" or "rowwise" (the other tp_plan styles, such as colwise_rep or sequence_parallel, are not supported, as in DeepSpeed)
// RUN: echo '{"train_batch_size": 2, "tensor_parallel": {"autotp_size": 2, "partition_config": {"layer_spec": []}}}' > %t.pckey.json
// RUN: not ds-opt %s --config %t.pckey.json -o %t.mlir 2>&1 | FileCheck %s --check-prefix=PCKEY
// PCKEY: 'tensor_parallel.partition_config.layer_spec' is not a DeepSpeed partition_config key; did you mean 'layer_specs'?
// RUN: echo '{"train_batch_size": 2, "tensor_parallel": {"autotp_size": 2, "partition_config": {"use_default_specs": "no"}}}' > %t.defaults.json
// RUN: not ds-opt %s --config %t.defaults.json -o %t.mlir 2>&1 | FileCheck %s --check-prefix=DEFAULTS
// DEFAULTS: 'tensor_parallel.partition_config.use_default_specs' must be true or false
// RUN: echo '{"train_batch_size": 2, "tensor_parallel": {"autotp_size": 2, "partition_config": {"layer_specs": [{"pattern": ["fc1"], "partition_type": "column"}]}}}' > %t.speckey.json
// RUN: not ds-opt %s --config %t.speckey.json -o %t.mlir 2>&1 | FileCheck %s --check-prefix=SPECKEY
// SPECKEY: 'tensor_parallel.partition_config.layer_specs[0].pattern' is not a DeepSpeed layer spec key; did you mean 'patterns'?
// RUN: echo '{"train_batch_size": 2, "tensor_parallel": {"autotp_size": 2, "partition_config": {"layer_specs": [{"patterns": [], "partition_type": "column"}]}}}' > %t.nopat.json
// RUN: not ds-opt %s --config %t.nopat.json -o %t.mlir 2>&1 | FileCheck %s --check-prefix=NOPAT
// NOPAT: 'tensor_parallel.partition_config.layer_specs[0].patterns' must be a non-empty list of regular expressions
// RUN: echo '{"train_batch_size": 2, "tensor_parallel": {"autotp_size": 2, "tp_plan": ["layers.*.fc1"]}}' > %t.planlist.json
// RUN: not ds-opt %s --config %t.planlist.json -o %t.mlir 2>&1 | FileCheck %s --check-prefix=PLANLIST
// PLANLIST: 'tensor_parallel.tp_plan' must be an object of module patterns, e.g. {"layers.*.self_attn.q_proj": "colwise"}
// The pass's own option, given by hand:
// RUN: not ds-opt %s --ds-tensor-parallel="autotp-size=2 layer-specs=diagonal=fc1" -o %t.mlir 2>&1 | FileCheck %s --check-prefix=ROLE
// ROLE: error: ds-tensor-parallel: layer spec 'diagonal=fc1' is not ROLE=REGEX with ROLE column, row or skip
module {
  ds.parameter @layers.0.fc1.weight trainable : tensor<8x4xf32>
  ds.parameter @layers.0.fc2.weight trainable : tensor<4x8xf32>
  ds.parameter @layers.1.fc1.weight trainable : tensor<8x4xf32>
  ds.parameter @layers.1.fc2.weight trainable : tensor<4x8xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w1 = ds.get_parameter @layers.0.fc1.weight : tensor<8x4xf32>
    %h = ds.linear %x, %w1 : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %g = ds.relu %h : tensor<2x8xf32>
    %w2 = ds.get_parameter @layers.0.fc2.weight : tensor<4x8xf32>
    %y = ds.linear %g, %w2 : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    %w3 = ds.get_parameter @layers.1.fc1.weight : tensor<8x4xf32>
    %h3 = ds.linear %y, %w3 : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %g3 = ds.relu %h3 : tensor<2x8xf32>
    %w4 = ds.get_parameter @layers.1.fc2.weight : tensor<4x8xf32>
    %z = ds.linear %g3, %w4 : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    %s = ds.sum %z dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

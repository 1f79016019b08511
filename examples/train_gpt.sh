#!/usr/bin/env bash
# The main job: import the example GPT (test/models/gpt_script.pt), build its training step from
# a DeepSpeed config, JIT-compile it and train 200 steps on a small token dataset.
# usage: bash examples/train_gpt.sh [BUILD=build] [STEPS=200]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
steps=${2:-200}
out="$here/$build/example-gpt"
mkdir -p "$out"
/usr/bin/python3 "$here/examples/gpt/make_data.py" "$out"
"$here/$build/bin/ds-opt" "$here/test/models/gpt_script.pt" \
  --input 'idx=tensor<4x16xi64>' --input 'targets=tensor<4x16xi64>' \
  --config "$here/examples/gpt/ds_config.json" -o "$out/step.mlir"
"$here/$build/bin/ds-run" "$out/step.mlir" --data "idx=$out/idx.npy" \
  --data "targets=$out/targets.npy" --steps "$steps" --log "$out/log.jsonl" \
  --save-weights "$out/trained.safetensors"
echo "training step: $out/step.mlir"
echo "log:           $out/log.jsonl"
echo "weights:       $out/trained.safetensors"

#!/usr/bin/env bash
# The main job: export the example GPT with torch.export (PyTorch 2.15 from .venv), import it,
# build its training step from a DeepSpeed config, compile it into a standalone executable, and
# train it on a small token file (nanoGPT's format), saving a checkpoint.
# usage: bash examples/train_gpt.sh [BUILD=build] [STEPS=200]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
steps=${2:-200}
out="$here/$build/example-gpt"
rm -rf "$out/checkpoint"
mkdir -p "$out"
/usr/bin/python3 "$here/examples/gpt/make_data.py" "$out/tokens.bin"
"$here/.venv/bin/python" "$here/examples/gpt/export_gpt.py" "$out/gpt.pt2"
"$here/$build/bin/ds-opt" "$out/gpt.pt2" \
  --input 'idx=tensor<4x16xi64>' --input 'targets=tensor<4x16xi64>' \
  --config "$here/examples/gpt/ds_config.json" -o "$out/step.mlir"
"$here/$build/bin/ds-compile" "$out/step.mlir" -o "$out/train"
"$out/train" --tokens "$out/tokens.bin" --seq-len 16 --steps "$steps" \
  --log "$out/log.jsonl" --save "$out/checkpoint" --save-every 100
echo "executable: $out/train"
echo "checkpoint: $(ls -d "$out"/checkpoint/step-* | tail -1)"
echo "log:        $out/log.jsonl"

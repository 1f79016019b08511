#!/usr/bin/env bash
# Prepares, here, what bench/gpu/check.sh needs on the GPU machine (which has nvcc and PyTorch
# but no LLVM, oneDNN, MPI or GoogleTest, and cannot fetch anything), in build-gpu/ (ignored;
# it travels as the device call's `carry`, about 8 MB):
#   build-gpu/googletest   Debian's GoogleTest sources (the conformance suite builds against them)
#   build-gpu/cudnn-frontend/include  the cuDNN frontend's headers (from PyPI's
#                          nvidia-cudnn-frontend, in .venv; 3 MB): cuDNN's attention on the GPU
#   build-gpu/gpt          the test GPT (test/models/gpt_script.pt, TorchScript, fp32): its
#                          step compiled with ds-compile --cpu x86-64-v3 --emit=obj, its weights,
#                          20 steps of Markov-chain tokens, the config (the PyTorch side reads
#                          the same .pt)
#   build-gpu/gpt2s        a GPT-2-small-sized model (bench/gpu/gpt2_model.py) in bf16: its step
#                          object and config; its weights are made there (500 MB do not travel)
# usage: bash bench/gpu/prepare.sh [BUILD=build]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out=build-gpu
rm -rf "$out/gpt" "$out/gpt2s" "$out/googletest" "$out/cudnn-frontend" "$out/work"
mkdir -p "$out/gpt" "$out/gpt2s" "$out/work"
cp -r /usr/src/googletest "$out/googletest"
[ -f .venv/cudnn-frontend/include/cudnn_frontend.h ] ||
  { echo "no .venv/cudnn-frontend/include/cudnn_frontend.h: run scripts/setup.sh"; exit 1; }
mkdir -p "$out/cudnn-frontend" # its headers include "../include/...": the folder keeps its name
cp -r .venv/cudnn-frontend/include "$out/cudnn-frontend/include"

# The test GPT, fp32, AdamW; 20 steps of batch 4 x 16 tokens.
cp test/models/gpt_script.pt "$out/gpt/model.pt"
cat >"$out/gpt/config.json" <<'JSON'
{"train_batch_size": 4, "train_micro_batch_size_per_gpu": 4,
 "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.9, 0.999], "eps": 1e-8,
                                           "weight_decay": 0.1}},
 "steps_per_print": 1000000}
JSON
/usr/bin/python3 bench/gpu/make_tokens.py "$out/gpt" 21 4 16 64
"$build/bin/ds-opt" "$out/gpt/model.pt" --input 'idx=tensor<4x16xi64>' \
  --input 'targets=tensor<4x16xi64>' --config "$out/gpt/config.json" -o "$out/work/gpt.mlir"
cp "$out/work/gpt.safetensors" "$out/gpt/weights.safetensors"
"$build/bin/ds-compile" "$out/work/gpt.mlir" -o "$out/gpt/step.o" --cpu x86-64-v3 --emit=obj

# GPT-2 small, bf16 (DeepSpeed's bf16: 16-bit model, fp32 masters), batch 8 x 1024 tokens.
cat >"$out/gpt2s/config.json" <<'JSON'
{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 8, "bf16": {"enabled": true},
 "optimizer": {"type": "AdamW", "params": {"lr": 6e-4, "betas": [0.9, 0.95], "eps": 1e-8,
                                           "weight_decay": 0.1}},
 "steps_per_print": 1000000}
JSON
.venv/bin/python bench/gpu/export_gpt2.py "$out/work/gpt2s.pt2" 8
"$build/bin/ds-opt" "$out/work/gpt2s.pt2" --input 'idx=tensor<8x1024xi64>' \
  --input 'targets=tensor<8x1024xi64>' --config "$out/gpt2s/config.json" \
  -o "$out/work/gpt2s.mlir"
"$build/bin/ds-compile" "$out/work/gpt2s.mlir" -o "$out/gpt2s/step.o" --cpu x86-64-v3 --emit=obj
rm -rf "$out/work"
du -sh "$out"
echo "prepared $out: run bench/gpu/check.sh there (device run, carry build-gpu)"

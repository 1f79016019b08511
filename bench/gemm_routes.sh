#!/bin/bash
# The CPU's GEMM routes side by side (bench/gemm_routes.cpp): one core's FMA and VDPBF16PS
# peaks, then oneDNN's sgemm, f32 and bf16 matmul primitives on the GPT d512 step's shapes,
# at 1 and 2 threads. Builds against the runtime's oneDNN 3.2 in .venv (scripts/setup.sh).
# usage: bash bench/gemm_routes.sh
set -euo pipefail
out=$(mktemp -d)
venv="$(cd "$(dirname "$0")/.." && pwd)/.venv"
g++ -O2 -fopenmp "$(dirname "$0")/gemm_routes.cpp" -o "$out/gemm_routes" -I"$venv/include" \
  -L"$venv/lib" -Wl,-rpath,"$venv/lib" -ldnnl
for t in 1 2; do OMP_NUM_THREADS=$t "$out/gemm_routes"; done
rm -rf "$out"

#!/bin/bash
# The CPU's GEMM routes side by side (bench/gemm_routes.cpp): one core's FMA and VDPBF16PS
# peaks, then oneDNN's sgemm, f32 and bf16 matmul primitives on the GPT d512 step's shapes,
# at 1 and 2 threads. Builds against the runtime's oneDNN 3.2 in .venv (scripts/setup.sh).
# --mkl: also MKL's cblas_sgemm (PyTorch's wheels link MKL), from PyPI's mkl wheel (~200 MB,
# downloaded into a temporary folder, run on OpenMP's GNU threads as the runtime's oneDNN).
# usage: bash bench/gemm_routes.sh [--mkl]
set -euo pipefail
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
venv="$(cd "$(dirname "$0")/.." && pwd)/.venv"
g++ -O2 -fopenmp "$(dirname "$0")/gemm_routes.cpp" -o "$out/gemm_routes" -I"$venv/include" \
  -L"$venv/lib" -Wl,-rpath,"$venv/lib" -ldnnl -ldl
if [ "${1:-}" = --mkl ]; then
  "$venv/bin/pip" download --no-deps -q mkl==2025.3.0 -d "$out"
  python3 -m zipfile -e "$out"/mkl-*.whl "$out/mkl"
  export GEMM_ROUTES_MKL="$(echo "$out"/mkl/mkl-*.data/data/lib/libmkl_rt.so.2)"
  export MKL_THREADING_LAYER=GNU
fi
for t in 1 2; do OMP_NUM_THREADS=$t "$out/gemm_routes"; done

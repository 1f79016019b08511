#!/usr/bin/env bash
# Configuring the CUDA device where the cuDNN frontend's headers are not (a directory without
# cudnn_frontend.h) stops with the fix (scripts/setup.sh, or -DDSRT_CUDNN_ATTENTION=OFF)
# instead of failing later in the compiler.
# usage: cudnn_frontend_check.sh RUNTIME_DIR WORK_DIR
set -uo pipefail
rm -rf "$2"
cmake -S "$1" -B "$2" -G Ninja -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON \
  -DCUDNN_FRONTEND_INCLUDE_DIR=/nonexistent 2>&1 | tr -s ' \n' ' '
echo

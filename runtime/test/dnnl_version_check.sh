#!/usr/bin/env bash
# Configuring the runtime against a oneDNN 2.x prefix (Debian's libdnnl-dev era) stops with the
# fix (run scripts/setup.sh), instead of failing later on the 3.x API.
# usage: dnnl_version_check.sh SOURCE_DIR WORK_DIR
set -uo pipefail
src=$1 work=$2
rm -rf "$work"
mkdir -p "$work/prefix/include/oneapi/dnnl" "$work/prefix/lib"
touch "$work/prefix/include/oneapi/dnnl/dnnl.hpp" "$work/prefix/lib/libdnnl.so"
printf '#define DNNL_VERSION_MAJOR 2\n#define DNNL_VERSION_MINOR 6\n' \
  > "$work/prefix/include/oneapi/dnnl/dnnl_version.h"
cmake -S "$src" -B "$work/build" -G Ninja -DDSRT_ENABLE_CUDA=OFF \
  -DDSRT_DNNL_ROOT="$work/prefix" -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON 2>&1 | tr -s ' \n' ' '
echo

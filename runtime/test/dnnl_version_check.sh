#!/usr/bin/env bash
# Configuring against a prefix without oneDNN 3.x stops with the fix (run scripts/setup.sh)
# instead of failing later on the 3.x API: CASE v2, the runtime alone against a oneDNN 2.x
# prefix (Debian's libdnnl-dev era); CASE missing, the whole project against a prefix with no
# oneDNN at all (a .venv made before setup.sh installed it; the runtime built alone then warns
# and uses plain loops).
# usage: dnnl_version_check.sh PROJECT_DIR WORK_DIR CASE
set -uo pipefail
src=$1 work=$2 case=$3
rm -rf "$work"
mkdir -p "$work/prefix/include/oneapi/dnnl" "$work/prefix/lib"
dir=$src
if [ "$case" = v2 ]; then
  dir=$src/runtime
  touch "$work/prefix/include/oneapi/dnnl/dnnl.hpp" "$work/prefix/lib/libdnnl.so"
  printf '#define DNNL_VERSION_MAJOR 2\n#define DNNL_VERSION_MINOR 6\n' \
    > "$work/prefix/include/oneapi/dnnl/dnnl_version.h"
fi
cmake -S "$dir" -B "$work/build" -G Ninja -DDSRT_ENABLE_CUDA=OFF \
  -DDSRT_DNNL_ROOT="$work/prefix" -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON 2>&1 | tr -s ' \n' ' '
echo

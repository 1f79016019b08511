#!/usr/bin/env bash
# The runtime alone, configured as the GPU machine configures it (cmake -S runtime: no oneDNN,
# no MPI, GoogleTest built from Debian's sources) but with CUDA off (DSRT_ENABLE_CUDA=OFF): it
# builds, reports the cuda device as not built and the CPU without oneDNN, and its device
# conformance suite refuses the unbuilt device by name and runs its cases on the CPU against
# itself.
# usage: cpu_only_build.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
rm -rf "$build"
cmake -S "$src" -B "$build" -G Ninja -DDSRT_ENABLE_CUDA=OFF \
  -DDSRT_DNNL_INCLUDE_DIR=DSRT_DNNL_INCLUDE_DIR-NOTFOUND \
  -DDSRT_DNNL_LIBRARY=DSRT_DNNL_LIBRARY-NOTFOUND \
  -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON \
  -DGTEST_SOURCE_DIR=/usr/src/googletest > "$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; exit 1; }
ninja -C "$build" > "$build.build.log" 2>&1 || { tail -50 "$build.build.log"; exit 1; }
test ! -e "$build/lib/libdsrt_cuda.so" || { echo "a CUDA plugin was built with CUDA off"; exit 1; }
report=$("$build/bin/ds-report")
echo "$report"
grep -q '^cuda: built no; unavailable: not built' <<<"$report"
grep -q '^default device: cpu$' <<<"$report"
grep -q '^cpu: built yes; without oneDNN' <<<"$report"
grep -q '^mpi: built no' <<<"$report"
out=$("$build/test/ds-runtime-conformance-tests" 2>&1) && { echo "$out"; echo "the conformance suite passed with cuda not built"; exit 1; }
grep -q '^FAIL: device cuda unavailable: .*not built' <<<"$out" || { echo "$out"; exit 1; }
DSRT_CONFORMANCE_DEVICES=cpu "$build/test/ds-runtime-conformance-tests" | tail -3
echo "cpu-only runtime: built and checked"

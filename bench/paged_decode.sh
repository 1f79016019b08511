#!/bin/bash
# Decoding's attention against the paged cache beside a copy of the same bytes
# (bench/paged_decode.cpp), at 1 and 2 threads. Needs the build (ninja -C build).
# usage: bash bench/paged_decode.sh [BUILD=build]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build=$(realpath "${1:-$root/build}")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
g++ -O2 "$root/bench/paged_decode.cpp" -o "$out/paged_decode" -I"$root/runtime/include" \
  -L"$build/lib" -Wl,-rpath,"$build/lib" -ldsrt
for t in 1 2; do echo "threads $t"; "$out/paged_decode" "$t"; done

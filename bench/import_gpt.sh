#!/usr/bin/env bash
# Times `ds-opt` importing a 24-layer GPT (d_model 1024) at micro-batch 8 x 1024 tokens: the
# whole command (load, interpret, verify, print, write 1.4 GB of safetensors). Prints a table of
# REPS runs and the median. usage: bench/import_gpt.sh [REPS=5] [BUILD=build]
set -euo pipefail
reps=${1:-5}
build=${2:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$here/bench/export_big_gpt.py" "$work/gpt24.pt"
ls -l "$work/gpt24.pt" | awk '{printf "archive: %.2f GB\n", $5/1e9}'
args=(--input 'idx=tensor<8x1024xi64>' --input 'targets=tensor<8x1024xi64>' -o "$work/gpt24.mlir")
"$here/$build/bin/ds-opt" "$work/gpt24.pt" "${args[@]}" # warm the page cache
printf '%-4s %10s\n' run seconds
times=()
for i in $(seq 1 "$reps"); do
  start=$(date +%s.%N)
  "$here/$build/bin/ds-opt" "$work/gpt24.pt" "${args[@]}"
  end=$(date +%s.%N)
  t=$(echo "$end - $start" | bc -l)
  times+=("$t")
  printf '%-4s %10.3f\n' "$i" "$t"
done
echo "phases of one more run (DS_IMPORT_TIMING):"
DS_IMPORT_TIMING=1 "$here/$build/bin/ds-opt" "$work/gpt24.pt" "${args[@]}" 2>&1 |
  awk '/^ds-import-timing/ {printf "  %-10s %8.3f s\n", $2, $3}'
median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
printf 'median %8.3f s   (ops: %s, parameters: %s, safetensors: %s)\n' "$median" \
  "$(grep -c ' = ds\.' "$work/gpt24.mlir")" "$(grep -c 'ds.parameter' "$work/gpt24.mlir")" \
  "$(ls -l "$work/gpt24.safetensors" | awk '{printf "%.2f GB", $5/1e9}')"

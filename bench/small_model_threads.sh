#!/usr/bin/env bash
# Samples/s of the README's example GPT (4 x 16 tokens, 0.1M parameters) at 1 and 2 threads,
# with the compiled executable and with ds-run: tiny kernels where waking an idle (passive-wait)
# OpenMP thread costs more than the work. usage: bench/small_model_threads.sh [BUILD=build]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
out="$here/$build/example-gpt"
bash "$here/examples/train_gpt.sh" "$build" 1 > /dev/null
printf '%-8s %-14s %12s\n' threads tool samples/s
for t in 1 2; do
  for tool in train ds-run; do
    if [ "$tool" = train ]; then cmd=("$out/train"); else cmd=("$here/$build/bin/ds-run" "$out/step.mlir"); fi
    "${cmd[@]}" --tokens "$out/tokens.bin" --seq-len 16 --steps 200 --threads "$t" \
      --log "$out/bench.jsonl" > /dev/null
    sps=$(/usr/bin/python3 -c "import json,statistics;l=[json.loads(x)['samples_per_s'] for x in open('$out/bench.jsonl')][10:];print('%.0f'%statistics.median(l))")
    printf '%-8s %-14s %12s\n' "$t" "$tool" "$sps"
  done
done

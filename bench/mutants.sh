#!/usr/bin/env bash
# Shows that the tests can fail: applies deliberate bugs, one at a time, to a scratch copy of
# the source, rebuilds it and runs the lit tests each bug names; every bug must make at least
# one of them fail. Prints a table. Never part of the test run (about 30 minutes here).
#
#   bash bench/mutants.sh [SCRATCH]      (default SCRATCH: build-mutants/)
#
# The scratch copy is the working tree as it is (tracked and untracked files that git does not
# ignore); its build is kept between runs, so a second run rebuilds only what a bug touches.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=$(realpath -m "${1:-build-mutants}")
src=$scratch/src
# The scratch copy follows the working tree: files whose content differs are copied (so the
# build redoes what changed), files gone from the tree are removed.
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard | /usr/bin/python3 -c '
import os, shutil, sys
src = sys.argv[1]
want = {p for p in sys.stdin.read().split("\0") if p and os.path.isfile(p)}
for p in want:
    dst = os.path.join(src, p)
    if not os.path.exists(dst) or open(p, "rb").read() != open(dst, "rb").read():
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(p, dst)
for root, _, files in os.walk(src):
    for f in files:
        rel = os.path.relpath(os.path.join(root, f), src)
        if rel not in want:
            os.remove(os.path.join(root, f))
' "$src"
export CCACHE_BASEDIR=$scratch CCACHE_NOHASHDIR=1
echo "mutants: building the scratch copy in $scratch/build (log: $scratch/build.log)"
cmake -S "$src" -B "$scratch/build" -G Ninja >"$scratch/build.log" 2>&1
ninja -C "$scratch/build" >>"$scratch/build.log" 2>&1 || { tail -30 "$scratch/build.log"; exit 1; }
lit=/usr/lib/llvm-22/bin/lit

# name | file | text | replacement | tests (lit paths under test/)
mutants=$(cat <<'EOF'
drop weight decay|dialects/ds/Transforms/Optimizer.cpp|e().constant(f64, decoupled ? opt.weightDecay : 0.0)|e().constant(f64, 0.0)|e2e/optimizers.test
drop Adam's bias correction|dialects/ds/Transforms/Optimizer.cpp|bc1 = e().sub(one64, e().pow(beta1Value, step64));@@bc2 = e().sub(one64, e().pow(e().constant(f64, opt.beta2), step64));|bc1 = one64;@@bc2 = one64;|e2e/gpt-fidelity.test
clip by the squared norm|dialects/ds/Transforms/Optimizer.cpp|Value norm = e().sqrt(total);|Value norm = total;|e2e/optimizers.test
double the loss-scale window|runtime/src/driver/loss_scaler.h|window = spec.window;|window = 2 * spec.window;|e2e/mixed-precision.test
shift the data order by one sample|runtime/src/driver/data.cpp|int64_t first = io::sampleOffset(step, rank, k, p.G, p.mb, p.gas);|int64_t first = io::sampleOffset(step, rank, k, p.G, p.mb, p.gas) + 1;|e2e/gpt-fidelity.test
all-reduce with the wrong scale|dialects/ds/Transforms/Autodiff.cpp|double scale = 1.0 / double(gas * dataParallelRanks);|double scale = 1.0 / double(gas);|e2e/data-parallel.test
skip one bucket's reduce-scatter|dialects/ds/Transforms/Zero.cpp|Value reduced = shard::ReduceScatterOp::create(b, loc, shardType, dp.grid, dp.axes(), packed,|Value reduced = k == 0 ? Value(shard::AllSliceOp::create(b, loc, shardType, dp.grid, dp.axes(), packed, APInt(64, 0)).getResult()) : (Value)shard::ReduceScatterOp::create(b, loc, shardType, dp.grid, dp.axes(), packed,|e2e/zero.test
drop a tied parameter's other stage's gradient|dialects/ds/Transforms/PipelineOptimizer.cpp|sum = AddOp::create(b, loc, t, sum, part[h[i]]);|sum = i ? sum : part[h[i]];|e2e/pipeline-parallel.test
warm 1F1B up with one forward too many|dialects/ds/Transforms/Pipeline.cpp|int64_t warm = std::min(p - r - 1, m);|int64_t warm = std::min(p - r, m);|Transforms/pipeline.mlir
plan the swap file as host memory|lib/Analysis/ArenaModel.h|return {&nvmeInUse, &nvmePeak};|return {&hostInUse, &hostPeak};|e2e/offload.test
EOF
)

# Applies (or with --revert undoes) one mutant's replacements; fails when a text is missing,
# so that a mutant cannot silently stop applying after the code moves.
mutate() {
  /usr/bin/python3 - "$@" <<'EOF'
import sys
path, texts, repls, mode = sys.argv[1], sys.argv[2].split('@@'), sys.argv[3].split('@@'), sys.argv[4]
s = open(path).read()
for a, b in zip(texts, repls):
    if mode == 'revert':
        a, b = b, a
    if s.count(a) != 1:
        sys.exit('mutants: %r occurs %d times in %s' % (a, s.count(a), path))
    s = s.replace(a, b)
open(path, 'w').write(s)
EOF
}

# The named tests pass unmutated first.
all_tests=$(echo "$mutants" | cut -d'|' -f5 | tr ' ' '\n' | sort -u | sed "s|^|$scratch/build/test/|")
echo "mutants: the named tests unmutated: $(echo $all_tests | wc -w) files"
if ! $lit -q $all_tests >"$scratch/baseline.log" 2>&1; then
  tail -30 "$scratch/baseline.log"
  echo "mutants: the tests fail without a mutant; fix that first" >&2
  exit 1
fi

rows=()
missed=0
n=0
while IFS='|' read -r name file text repl tests; do
  [ -n "$name" ] || continue
  n=$((n + 1))
  log=$scratch/mutant-$n.log
  start=$(date +%s)
  mutate "$src/$file" "$text" "$repl" apply
  result= evidence=
  if ! ninja -C "$scratch/build" >"$log" 2>&1; then
    result="DOES NOT BUILD"
    missed=$((missed + 1))
  else
    paths=$(for t in $tests; do echo "$scratch/build/test/$t"; done)
    if $lit -v $paths >>"$log" 2>&1; then
      result="MISSED"
      missed=$((missed + 1))
    else
      result="caught by $(grep -o '^FAIL: ds :: [^ ]*' "$log" | sed 's/FAIL: ds :: //' | sort -u | tr '\n' ' ')"
      # The line of the failing run that says what was wrong, the most telling kind first.
      evidence=
      for pat in ' +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.e+-]+ +<-- exceeds [0-9.e+-]+' \
                 'parameter [^ ]+: relative distance [0-9.e+-]+ > [0-9.e+-]+' \
                 'fp16: [^|]*(DIFFERENT|DIFFER|DISAGREES)[^|]*' 'step 1 in PyTorch[^|]*FAIL' \
                 'dsrt: [^|]*' 'error: [A-Z0-9]+: expected[^|]*'; do
        evidence=$(grep -m1 -oE "$pat" "$log" | sed 's/^ *//' | cut -c1-70 || true)
        [ -z "$evidence" ] || break
      done
    fi
  fi
  mutate "$src/$file" "$text" "$repl" revert
  rows+=("$(printf '| %-34s | %-38s | %-32s | %-70s | %4ds |' "$name" "$file" "$result" "$evidence" $(( $(date +%s) - start )))")
  echo "mutants: $name: $result $evidence"
done <<<"$mutants"
ninja -C "$scratch/build" >/dev/null 2>&1 || true # back to the unmutated build

echo
echo "| mutant | file | result | what the test saw | time |"
echo "|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
[ "$missed" -eq 0 ] || { echo "mutants: $missed not caught" >&2; exit 1; }

#!/usr/bin/env bash
# The runtime of this tree against the runtime of an earlier commit, under the same ds-run:
# both libdsrt.so are built standalone (cmake -S runtime) and picked by LD_LIBRARY_PATH, so the
# compiled step is the same and only the runtime (kernels, channel, driver) differs. Trains the
# 800K-parameter GPT (gpt-wide) under ZeRO stages 2 and 3 at 4 ranks, RUNS times each,
# alternating, and prints each run's median step time and whether the losses are identical.
# Never part of the test run (about 3 minutes).
#
#   bash bench/runtime_ab.sh [REV=8a6e0b9] [RUNS=4] [STEPS=100]
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-8a6e0b9} runs=${2:-4} steps=${3:-100}
work=build-bench/runtime-ab
mkdir -p "$work"
work=$(realpath "$work")
rm -rf "$work/old-src" && git worktree add -f --detach "$work/old-src" "$rev" >/dev/null 2>&1
trap 'git worktree remove --force "$work/old-src" >/dev/null 2>&1 || true' EXIT
for v in old new; do
  src=$([ $v = old ] && echo "$work/old-src/runtime" || echo runtime)
  cmake -S "$src" -B "$work/rt-$v" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$work/cmake-$v.log" 2>&1
  ninja -C "$work/rt-$v" dsrt >"$work/ninja-$v.log" 2>&1
done
/usr/bin/python3 test/models/make_models.py "$work" gpt-wide >/dev/null 2>&1
/usr/bin/python3 - "$work" "$steps" <<'EOF'
import json, numpy as np, subprocess, sys
work, steps = sys.argv[1], int(sys.argv[2])
idx = np.random.RandomState(0).randint(0, 64, size=((steps + 1) * 32, 16)).astype(np.int64)
np.save(work + '/idx.npy', idx)
np.save(work + '/targets.npy', np.roll(idx, -1, axis=1))
for st in (2, 3):
    cfg = {'train_batch_size': 32, 'train_micro_batch_size_per_gpu': 4,
           'gradient_accumulation_steps': 2, 'optimizer': {'type': 'AdamW', 'params': {'lr': 1e-3}},
           'zero_optimization': {'stage': st, 'reduce_bucket_size': 100000,
                                 'stage3_param_persistence_threshold': 0,
                                 'stage3_prefetch_bucket_size': 100000,
                                 'stage3_max_reuse_distance': 0}, 'steps_per_print': 100000}
    json.dump(cfg, open('%s/cfg%d.json' % (work, st), 'w'))
    subprocess.run(['build/bin/ds-opt', work + '/gpt-wide_script.pt', '--input',
                    'idx=tensor<4x16xi64>', '--input', 'targets=tensor<4x16xi64>', '--config',
                    '%s/cfg%d.json' % (work, st), '-o', '%s/s%d.mlir' % (work, st)], check=True)
EOF
echo "| stage | runtime | median step ms per run | median of runs | final loss |"
echo "|---|---|---|---|---|"
for st in 2 3; do
  for v in old new; do : >"$work/medians-$v-$st"; done
  for i in $(seq "$runs"); do
    for v in new old; do
      LD_LIBRARY_PATH="$work/rt-$v/lib" mpirun --allow-run-as-root --oversubscribe -np 4 \
        build/bin/ds-run "$work/s$st.mlir" --data idx="$work/idx.npy" \
        --data targets="$work/targets.npy" --steps "$steps" --threads 1 \
        --log "$work/log-$v-$st-$i.jsonl" >/dev/null 2>&1
      /usr/bin/python3 -c "
import json, statistics, sys
l = [json.loads(x) for x in open(sys.argv[1])]
print('%.2f %.9g' % (statistics.median(r['step_ms'] for r in l[5:]), l[-1]['loss']))" \
        "$work/log-$v-$st-$i.jsonl" >>"$work/medians-$v-$st"
    done
  done
  for v in old new; do
    /usr/bin/python3 -c "
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
ms = [float(r[0]) for r in rows]
print('| %s | %s | %s | %.2f | %s |' % (sys.argv[2], sys.argv[3] if sys.argv[3] == 'new' else sys.argv[4],
      ' '.join('%.1f' % m for m in ms), statistics.median(ms), ' '.join(sorted(set(r[1] for r in rows)))))" \
      "$work/medians-$v-$st" "$st" "$v" "$rev"
  done
done

"""A tensor-parallel run's checkpoint read by another mesh: from a train_compare.py work
directory trained at tp > 1 (its step.mlir, config, data and the uninterrupted run's
ds.jsonl), trains half the steps again saving a checkpoint, checks that `ds-checkpoint export`
of it equals the run's own --save-weights tensor for tensor (the index's geometry of split
tensors against the runtime's gather), then resumes it at one rank (the model compiled
without tensor parallelism) and compares the second half's losses with the uninterrupted run.

usage: tp_resume.py --bin BUILD/bin --work DIR --ranks N [--rtol 1e-5]
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from train_compare import read_safetensors, run  # noqa: E402

MPIRUN = ['mpirun', '--allow-run-as-root', '--oversubscribe']


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--work', required=True)
    ap.add_argument('--ranks', type=int, required=True, help='the ranks the work dir trained on')
    ap.add_argument('--rtol', type=float, default=1e-5)
    args = ap.parse_args()
    w = lambda f: os.path.join(args.work, f)
    b = lambda t: os.path.join(args.bin, t)
    full = [json.loads(l) for l in open(w('ds.jsonl'))]
    steps, half = len(full), len(full) // 2
    data = sum([['--data', '%s=%s' % (f[:-4], w(f))] for f in sorted(os.listdir(args.work))
                if f.endswith('.npy')], [])
    ck = w('tp_ckpt')
    shutil.rmtree(ck, ignore_errors=True)
    run(MPIRUN + ['-np', str(args.ranks), b('ds-run'), w('step.mlir')] + data +
        ['--steps', str(half), '--threads', '1', '--save', ck, '--save-weights',
         w('half.safetensors'), '--log', w('half.jsonl')], w('half.log'))
    run([b('ds-checkpoint'), 'export', ck, '-o', w('offline.safetensors')], w('offline.log'))
    offline, direct = read_safetensors(w('offline.safetensors')), read_safetensors(
        w('half.safetensors'))
    same = sorted(offline) == sorted(direct) and all(
        np.array_equal(offline[k], direct[k]) for k in direct)
    index = json.load(open(os.path.join(ck, open(os.path.join(ck, 'latest')).read().strip(),
                                        'checkpoint.json')))
    unequal = sorted(t['name'] for t in index['tensors']
                     if 'segment_sizes' in t.get('split', {}) and t['kind'] == 'parameter')
    print('checkpoint at step %d: %d split tensors, with unequal segments: %s' % (
        half, sum('split' in t for t in index['tensors']), ', '.join(unequal) or 'none'))
    print('ds-checkpoint export equals --save-weights: %s' % same)
    # The same model and config at one rank, resumed.
    cfg = json.load(open(w('ds_config.json')))
    cfg.pop('tensor_parallel', None)  # the train batch stays: one data-parallel rank as before
    json.dump(cfg, open(w('one_rank.json'), 'w'))
    model = [f for f in os.listdir(args.work) if f.endswith(('.pt', '.pt2'))][0]
    inputs = [l.strip() for l in open(w([f for f in os.listdir(args.work)
                                         if f.endswith('.inputs')][0])) if l.strip()]
    run([b('ds-opt'), w(model)] + sum([['--input', i] for i in inputs], []) +
        ['--config', w('one_rank.json'), '-o', w('one_rank.mlir')], w('one_rank-opt.log'))
    run([b('ds-run'), w('one_rank.mlir')] + data +
        ['--steps', str(steps), '--threads', '1', '--resume', ck, '--log', w('resumed.jsonl')],
        w('resumed.log'))
    resumed = [json.loads(l) for l in open(w('resumed.jsonl'))]
    worst = max(abs(a['loss'] - r['loss']) / abs(a['loss']) for a, r in zip(full[half:], resumed))
    ok = same and len(resumed) == steps - half and worst <= args.rtol
    print('resumed at 1 rank after step %d: steps %d..%d, worst loss rel diff %.2e against the '
          'uninterrupted %d-rank run -> %s' % (half, half + 1, steps, worst, args.ranks,
                                              'PASS' if ok else 'FAIL'))
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()

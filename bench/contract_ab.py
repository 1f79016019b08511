#!/usr/bin/env python3
"""This tree's ds-opt and ds-run against an earlier commit's (by default 94a229e, main before
the typed compiler-runtime contract: the memory plan as an analysis, the lowering as conversion
patterns, #ds.run, ZeRO's update in one place): the compile time of `ds-opt --config` on the
d512 GPT of bench/train_gpt.py (6 layers, 8 heads, seq 128, vocab 1024, batch 16, fp32 AdamW),
the settled step time of `ds-run` on each side's own compiled step, and whether the two sides'
losses are bitwise identical. The earlier commit is built in build-bench/contract-ab (a git
worktree; cmake + ninja of ds-opt and ds-run, minutes on two cores the first time). PAIRS
processes per side, alternated; medians and their ratio. Never part of the test run.

usage: .venv/bin/python bench/contract_ab.py [--rev 94a229e] [--pairs 3] [--steps 8]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from train_gpt import export  # noqa: E402

WARM = 2  # ds-run's first step JITs; the median is over the steps after WARM


def build_old(rev, work):
    src, build = os.path.join(work, 'old-src'), os.path.join(work, 'old-build')
    stamp = os.path.join(work, 'old-rev')
    if os.path.exists(stamp) and open(stamp).read() == rev:
        return os.path.join(build, 'bin')
    at = subprocess.run(['git', '-C', src, 'rev-parse', 'HEAD'], capture_output=True,
                        text=True).stdout.strip() if os.path.isdir(src) else ''
    want = subprocess.run(['git', 'rev-parse', rev], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    if at != want:
        subprocess.run(['git', 'worktree', 'remove', '--force', src], cwd=ROOT,
                       stderr=subprocess.DEVNULL)
        subprocess.run(['git', 'worktree', 'add', '-f', '--detach', src, rev], cwd=ROOT,
                       check=True, stdout=subprocess.DEVNULL)
    # The worktree uses this checkout's .venv (LibTorch for the importer).
    venv = os.path.join(src, '.venv')
    if not os.path.exists(venv):
        os.symlink(os.path.join(ROOT, '.venv'), venv)
    print('contract_ab: building %s in %s (log: %s/build.log)' % (rev, build, work), flush=True)
    with open(os.path.join(work, 'build.log'), 'w') as log:
        subprocess.run(['cmake', '-S', src, '-B', build, '-G', 'Ninja'], check=True, stdout=log,
                       stderr=log)
        subprocess.run(['ninja', '-C', build, 'ds-opt', 'ds-run'], check=True, stdout=log,
                       stderr=log)
    open(stamp, 'w').write(rev)
    return os.path.join(build, 'bin')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--rev', default='94a229e')
    ap.add_argument('--pairs', type=int, default=3)
    ap.add_argument('--steps', type=int, default=8)
    ap.add_argument('--threads', type=int, default=2)
    args = ap.parse_args()
    work = os.path.join(ROOT, 'build-bench', 'contract-ab')
    os.makedirs(work, exist_ok=True)
    w = lambda f: os.path.join(work, f)
    bins = {'old': build_old(args.rev, work), 'new': os.path.join(ROOT, 'build', 'bin')}

    batch, seq, vocab = 16, 128, 1024
    params = export(w('gpt.pt'), 512, 6, 8, vocab=vocab, block=seq)
    rng = np.random.RandomState(0)
    toks = rng.randint(0, vocab, size=(args.steps * batch, seq)).astype(np.int64)
    np.save(w('idx.npy'), toks)
    np.save(w('targets.npy'), np.roll(toks, -1, axis=1))
    json.dump({'train_batch_size': batch, 'train_micro_batch_size_per_gpu': batch,
               'optimizer': {'type': 'AdamW', 'params': {'lr': 1e-4}},
               'steps_per_print': 1000}, open(w('cfg.json'), 'w'))
    inputs = ['--input', 'idx=tensor<%dx%dxi64>' % (batch, seq),
              '--input', 'targets=tensor<%dx%dxi64>' % (batch, seq)]

    compile_s = {'old': [], 'new': []}
    step_ms = {'old': [], 'new': []}
    losses = {}
    for pair in range(args.pairs):
        for side in ('old', 'new'):
            step = w('step-%s.mlir' % side)
            t = time.perf_counter()
            subprocess.run([os.path.join(bins[side], 'ds-opt'), w('gpt.pt')] + inputs +
                           ['--config', w('cfg.json'), '-o', step], check=True)
            compile_s[side].append(time.perf_counter() - t)
            log = w('log-%s-%d.jsonl' % (side, pair))
            subprocess.run([os.path.join(bins[side], 'ds-run'), step, '--data',
                            'idx=' + w('idx.npy'), '--data', 'targets=' + w('targets.npy'),
                            '--steps', str(args.steps), '--threads', str(args.threads),
                            '--log', log], check=True, stdout=subprocess.DEVNULL)
            lines = [json.loads(l) for l in open(log) if '"step_ms"' in l]
            step_ms[side].append(statistics.median(l['step_ms'] for l in lines[WARM:]))
            losses.setdefault(side, [l['loss'] for l in lines])

    print('d512 GPT (%d parameters, 6 layers, batch %d x seq %d, fp32 AdamW), %d threads, '
          '%d pairs alternated; old = %s, new = this tree'
          % (params, batch, seq, args.threads, args.pairs, args.rev))
    print('%-34s %10s %10s %8s' % ('', 'old', 'new', 'new/old'))
    for name, d, fmt in (('ds-opt --config (s, median)', compile_s, '%10.2f'),
                         ('ds-run step (ms, median)', step_ms, '%10.1f')):
        a, b = statistics.median(d['old']), statistics.median(d['new'])
        print(('%-34s ' + fmt + ' ' + fmt + ' %8.3f') % (name, a, b, b / a))
    same = losses['old'] == losses['new']
    print('losses over %d steps bitwise identical: %s' % (args.steps, 'yes' if same else 'NO'))
    return 0 if same else 1


if __name__ == '__main__':
    sys.exit(main())

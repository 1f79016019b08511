#!/usr/bin/python3
"""Checkpoints across expert-parallel layouts, on the work directory of a train_compare.py run
with --ep 2 (its export, inputs, data and config): a run saved with the experts split over 2
ranks resumes without expert parallelism (2 data-parallel ranks at ZeRO stage 2, and 1 rank
with twice the accumulation) and at 4 ranks as dp=2 x ep=2, and a ZeRO-2 run saved without it
and an ep4 run resume at ep2; every resumed
run's losses equal the uninterrupted expert-parallel run's within 1e-6. `ds-checkpoint export`
of the expert-parallel checkpoint equals that run's own --save-weights, the experts whole.

usage: ep_reshard.py --bin BUILD/bin --work DIR (a train_compare.py --ep 2 work directory)
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from train_compare import MPIRUN, read_safetensors, run  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--work', required=True)
    ap.add_argument('--steps', type=int, default=8)
    args = ap.parse_args()
    w = lambda f: os.path.join(args.work, f)
    b = lambda t: os.path.join(args.bin, t)
    export = [f for f in os.listdir(args.work) if f.endswith('_export.pt2')][0]
    inputs = open(w(export.replace('_export.pt2', '.inputs'))).read().split()
    data = ['--data', 'input_ids=' + w('input_ids.npy'), '--data', 'labels=' + w('labels.npy'),
            '--threads', '1']
    ep_cfg = json.load(open(w('ds_config.json')))
    assert ep_cfg['expert_parallel']['autoep_size'] == 2, 'run train_compare.py with --ep 2'
    layouts = {}

    def compile_layout(name, ranks, change):
        cfg = dict(ep_cfg)
        change(cfg)
        json.dump(cfg, open(w('cfg-%s.json' % name), 'w'))
        run([b('ds-opt'), w(export)] + sum([['--input', i] for i in inputs], []) +
            ['--config', w('cfg-%s.json' % name), '--world-size', str(ranks), '-o',
             w('step-%s.mlir' % name)], w('ds-opt-%s.log' % name))
        layouts[name] = (ranks, w('step-%s.mlir' % name))

    def no_ep(cfg):
        cfg.pop('expert_parallel')
        cfg['zero_optimization'] = {'stage': 2}

    def one_rank(cfg):
        cfg.pop('expert_parallel')
        cfg['gradient_accumulation_steps'] *= 2

    def four_ranks(cfg):
        cfg['gradient_accumulation_steps'] //= 2

    def ep4(cfg):
        four_ranks(cfg)
        cfg['expert_parallel'] = {'enabled': True, 'autoep_size': 4}

    compile_layout('ep2', 2, lambda cfg: None)
    compile_layout('dp2-zero2', 2, no_ep)
    compile_layout('one-rank', 1, one_rank)
    compile_layout('dp2-ep2', 4, four_ranks)
    compile_layout('ep4', 4, ep4)

    def train(name, log, extra):
        ranks, step = layouts[name]
        launch = MPIRUN + ['-np', str(ranks)] if ranks > 1 else []
        run(launch + [b('ds-run'), step] + data + ['--log', w(log + '.jsonl')] + extra,
            w(log + '.log'))
        return [json.loads(l)['loss'] for l in open(w(log + '.jsonl'))]

    half = args.steps // 2
    full = train('ep2', 'ep-full', ['--steps', str(args.steps)])[half:]
    ok = True
    for saved, resumed in (('ep2', 'dp2-zero2'), ('ep2', 'one-rank'), ('ep2', 'dp2-ep2'),
                           ('dp2-zero2', 'ep2'), ('ep4', 'ep2')):
        ck = w('ckpt-%s' % saved)
        shutil.rmtree(ck, ignore_errors=True)
        train(saved, 'save-%s' % saved, ['--steps', str(half), '--save', ck] +
              (['--save-weights', w('save-%s.safetensors' % saved)] if saved == 'ep2' else []))
        got = train(resumed, 'resume-%s-%s' % (saved, resumed),
                    ['--steps', str(args.steps), '--resume', ck])
        worst = max(abs(a - r) / abs(a) for a, r in zip(full, got)) if got else float('inf')
        good = len(got) == len(full) and worst <= 1e-6
        print('saved %s after step %d, resumed %s: steps %d..%d, worst loss rel diff %.2e '
              'against the uninterrupted ep2 run -> %s' % (saved, half, resumed, half + 1,
                                                          args.steps, worst,
                                                          'PASS' if good else 'FAIL'))
        ok = ok and good
    run([b('ds-checkpoint'), 'export', w('ckpt-ep2'), '-o', w('ckpt-ep2.safetensors')],
        w('export.log'))
    a, s = read_safetensors(w('ckpt-ep2.safetensors')), read_safetensors(w('save-ep2.safetensors'))
    experts = sorted(k for k in s if '.experts.' in k)
    same = set(a) == set(s) and all(np.array_equal(a[k], s[k]) for k in s)
    print('ds-checkpoint export of the ep2 checkpoint: %d tensors, experts whole (%s %s), %s '
          'the run\'s --save-weights -> %s' % (len(a), experts[0], 'x'.join(
              str(d) for d in s[experts[0]].shape), 'equal to' if same else 'DIFFERENT from',
              'PASS' if same else 'FAIL'))
    ok = ok and same
    print('-> PASS' if ok else '-> FAIL')
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()

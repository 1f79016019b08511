#!/usr/bin/python3
"""ds-compile's executable against ds-run (JIT) on the same step and data: `step`, `loss` and
`lr` must be identical in every log line (bit for bit: the same printed 9 digits from the same
floats). Also checks that the executable links no LLVM/MLIR library and runs without STEP.mlir.

  compile_compare.py --family gpt --bin BUILD/bin --work DIR [--steps 5] [--lr 1e-4]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_compare import model_path, parse_type, write_data  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--family', required=True)
    ap.add_argument('--kind', default='script')
    ap.add_argument('--bin', required=True)
    ap.add_argument('--work', required=True)
    ap.add_argument('--steps', type=int, default=5)
    ap.add_argument('--lr', type=float, default=1e-4)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    w = lambda f: os.path.join(args.work, f)
    b = lambda t: os.path.join(args.bin, t)
    pt, inputs_file = model_path(args)
    specs = [l.strip().split('=', 1) for l in open(inputs_file) if l.strip()]
    mb = parse_type(specs[0][1])[0][0]
    rng = np.random.RandomState(0)
    data = write_data(specs, args.family, args.steps * mb * 2, args.work, rng)
    json.dump({'train_batch_size': 2 * mb, 'train_micro_batch_size_per_gpu': mb,
               'optimizer': {'type': 'AdamW', 'params': {'lr': args.lr}},
               'scheduler': {'type': 'WarmupLR', 'params': {'warmup_num_steps': 3}}},
              open(w('cfg.json'), 'w'))
    run = lambda cmd: subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    run([b('ds-opt'), pt] + sum([['--input', '%s=%s' % (n, t)] for n, t in specs], []) +
        ['--config', w('cfg.json'), '-o', w('step.mlir')])
    run([b('ds-compile'), w('step.mlir'), '-o', w('train')])
    ldd = subprocess.run(['ldd', w('train')], capture_output=True, text=True).stdout
    linked = [l.split()[0] for l in ldd.splitlines() if 'LLVM' in l or 'MLIR' in l]
    common = data + ['--steps', str(args.steps), '--threads', '1']
    run([b('ds-run'), w('step.mlir')] + common + ['--log', w('jit.jsonl')])
    os.rename(w('step.mlir'), w('step.mlir.moved'))  # the executable must not need it
    try:
        run([w('train')] + common + ['--log', w('aot.jsonl')])
    finally:
        os.rename(w('step.mlir.moved'), w('step.mlir'))
    key = lambda l: (l['step'], l['loss'], l['lr'])
    jit = [key(json.loads(l)) for l in open(w('jit.jsonl'))]
    aot = [key(json.loads(l)) for l in open(w('aot.jsonl'))]
    ok = jit == aot and len(jit) == args.steps and not linked
    for a, j in zip(aot, jit):
        print('step %d  aot loss %.9g lr %.9g  jit loss %.9g lr %.9g%s'
              % (a[0], a[1], a[2], j[1], j[2], '' if a == j else '  <-- differ'))
    if linked:
        print('the executable links %s' % ', '.join(linked))
    print('%s %s: %d steps, executable vs JIT -> %s' % (args.family, args.kind, len(aot),
                                                        'IDENTICAL' if ok else 'DIFFERENT'))
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()

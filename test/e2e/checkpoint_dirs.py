#!/usr/bin/python3
"""Checkpoint directories shared with other runs (the MLP, one rank):

1. Run A saves every step up to step 100 into DIR: its newest two (99, 100) stay.
2. Run B, a new run (lr 2e-4), saves steps 1..3 into the same DIR while another live process
   holds a partial save there (its lock taken) and a dead one left another: B keeps its own
   newest two (2, 3), deletes neither of A's, leaves the live partial save alone and removes
   the dead one; `latest` names B's step 3.
3. `--resume DIR` continues B (not A): its losses equal B's uninterrupted run.
4. B continues to step 100, saving every 50: its step 100 cannot take A's name, so it is
   saved as step-00000100-<run>; A's 99 and 100 are untouched; a resume continues B again.

  checkpoint_dirs.py --bin BUILD/bin --work DIR
"""
import argparse
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, '..', 'models')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--work', required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    w = lambda f: os.path.join(args.work, f)
    b = lambda t: os.path.join(args.bin, t)
    rng = np.random.RandomState(0)
    np.save(w('x.npy'), rng.randn(110 * 8, 16).astype(np.float32))
    np.save(w('y.npy'), rng.randint(0, 4, size=110 * 8).astype(np.int64))
    steps = {}
    for name, lr in (('a', 1e-4), ('b', 2e-4)):
        json.dump({'train_batch_size': 8, 'optimizer': {'type': 'AdamW', 'params': {'lr': lr}}},
                  open(w(name + '.json'), 'w'))
        steps[name] = w(name + '.mlir')
        subprocess.run([b('ds-opt'), os.path.join(MODELS, 'mlp_script.pt'), '--input',
                        'x=tensor<8x16xf32>', '--input', 'y=tensor<8xi64>', '--config',
                        w(name + '.json'), '-o', steps[name]], check=True)
    ck = w('ck')
    shutil.rmtree(ck, ignore_errors=True)

    def ds_run(step, *flags):
        r = subprocess.run([b('ds-run'), step, '--data', 'x=' + w('x.npy'), '--data',
                            'y=' + w('y.npy'), '--threads', '1'] + list(flags),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode:
            sys.exit('ds-run %s failed: %s' % (' '.join(flags), r.stderr))

    def listing():
        return sorted(n for n in os.listdir(ck) if not n.startswith('.'))

    def losses(path):
        return {l['step']: l['loss'] for l in map(json.loads, open(path))}

    ok = True
    ds_run(steps['a'], '--steps', '100', '--save', ck, '--save-every', '1')
    print('A: %s' % ' '.join(listing()))
    # Another process's save in progress (its lock held), and a dead one's.
    live, dead = os.path.join(ck, '.partial-step-00000007-live'), os.path.join(
        ck, '.partial-step-00000007-dead')
    for p in (live, dead):
        os.makedirs(p)
        open(os.path.join(p, 'rank-00000-of-00001.safetensors'), 'w').write('x')
    lock = os.open(os.path.join(live, '.lock'), os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    open(os.path.join(dead, '.lock'), 'w').close()
    ds_run(steps['b'], '--steps', '3', '--save', ck, '--save-every', '1')
    latest = open(os.path.join(ck, 'latest')).read().strip()
    print('B: %s; latest %s; live partial kept: %s; dead partial removed: %s' %
          (' '.join(listing()), latest, os.path.isdir(live), not os.path.isdir(dead)))
    ok = ok and listing() == ['latest', 'step-00000002', 'step-00000003', 'step-00000099',
                              'step-00000100'] and latest == 'step-00000003'
    ok = ok and os.path.isdir(live) and not os.path.isdir(dead)
    os.close(lock)

    # B uninterrupted, for its losses.
    ds_run(steps['b'], '--steps', '100', '--log', w('b_full.jsonl'))
    full = losses(w('b_full.jsonl'))
    ds_run(steps['b'], '--steps', '5', '--resume', ck, '--log', w('b_resumed.jsonl'))
    got = losses(w('b_resumed.jsonl'))
    same = sorted(got) == [4, 5] and all(got[s] == full[s] for s in got)
    print('resume continues B: steps %s, equal to B uninterrupted: %s' % (sorted(got), same))
    ok = ok and same

    ds_run(steps['b'], '--steps', '100', '--resume', ck, '--save-every', '50')
    latest = open(os.path.join(ck, 'latest')).read().strip()
    index = json.load(open(os.path.join(ck, latest, 'checkpoint.json')))
    a100 = json.load(open(os.path.join(ck, 'step-00000100', 'checkpoint.json')))
    print('B at 100: %s; latest %s (step %d, previous %s); A\'s step 100 kept: %s' %
          (' '.join(listing()), latest, index['step'], index['previous'],
           a100['run'] != index['run']))
    ok = ok and latest == 'step-00000100-' + index['run'][:8] and index['step'] == 100
    ok = ok and index['previous'] == 'step-00000050' and a100['run'] != index['run']
    ok = ok and listing() == ['latest', 'step-00000050', 'step-00000099', 'step-00000100',
                              latest]
    info = subprocess.run([b('ds-checkpoint'), 'info', ck], capture_output=True, text=True).stdout
    print(info.strip().splitlines()[-1])
    ds_run(steps['b'], '--steps', '102', '--resume', ck, '--log', w('b_101.jsonl'))
    ds_run(steps['b'], '--steps', '102', '--log', w('b_full102.jsonl'))
    got, full = losses(w('b_101.jsonl')), losses(w('b_full102.jsonl'))
    same = sorted(got) == [101, 102] and all(got[s] == full[s] for s in got)
    print('resume continues B from step 100: %s' % same)
    ok = ok and same
    print('-> PASS' if ok else '-> FAIL')
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()

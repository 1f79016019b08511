#!/usr/bin/python3
"""Kills ds-run with SIGKILL at random points while it checkpoints every step, resumes each time,
and checks that every step any run logged equals the uninterrupted run bit for bit (loss and lr),
and that the last run reaches the final step. DSRT_TEST_SAVE_DELAY_MS widens each save so that
most kills land inside one. The model has dropout, so the random state is checkpointed too.

  checkpoint_kill.py --bin BUILD/bin --work DIR [--kills 5] [--steps 12]
"""
import argparse
import json
import os
import random
import shutil
import signal
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
    ap.add_argument('--kills', type=int, default=5)
    ap.add_argument('--steps', type=int, default=16)
    ap.add_argument('--seed', type=int, default=0)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    w = lambda f: os.path.join(args.work, f)
    b = lambda t: os.path.join(args.bin, t)
    rng = np.random.RandomState(0)
    toks = rng.randint(0, 64, size=(args.steps * 8, 16)).astype(np.int64)
    np.save(w('idx.npy'), toks)
    np.save(w('targets.npy'), np.roll(toks, -1, axis=1))
    json.dump({'train_batch_size': 8, 'train_micro_batch_size_per_gpu': 4,
               'optimizer': {'type': 'AdamW', 'params': {'lr': 1e-3}},
               'scheduler': {'type': 'WarmupLR', 'params': {'warmup_num_steps': 4}}},
              open(w('cfg.json'), 'w'))
    subprocess.run([b('ds-opt'), os.path.join(MODELS, 'lm_script.pt'),  # dropout 0.1
                    '--input', 'idx=tensor<4x16xi64>', '--input', 'targets=tensor<4x16xi64>',
                    '--config', w('cfg.json'), '-o', w('step.mlir')], check=True)
    base = [b('ds-run'), w('step.mlir'), '--data', 'idx=' + w('idx.npy'), '--data',
            'targets=' + w('targets.npy'), '--steps', str(args.steps), '--threads', '1']
    subprocess.run(base + ['--log', w('full.jsonl')], check=True, stdout=subprocess.DEVNULL)
    full = {l['step']: (l['loss'], l['lr']) for l in map(json.loads, open(w('full.jsonl')))}

    ck = w('ck')
    shutil.rmtree(ck, ignore_errors=True)  # a fresh run: no checkpoint from an earlier test
    random.seed(args.seed)
    env = dict(os.environ, DSRT_TEST_SAVE_DELAY_MS='40')
    logs, killed, partial_seen = [], 0, 0
    def partials():
        # A partial save by its name and inode: a resumed run may recreate the same name. One
        # that is published (renamed) between the listing and the stat is no longer partial.
        if not os.path.isdir(ck):
            return set()
        seen = set()
        for n in os.listdir(ck):
            if n.startswith('.partial-'):
                try:
                    seen.add((n, os.stat(os.path.join(ck, n)).st_ino))
                except FileNotFoundError:
                    pass
        return seen

    for attempt in range(args.kills + 1):
        # A run resumes once a checkpoint is published and named by `latest`.
        has = os.path.exists(os.path.join(ck, 'latest'))
        log = w('run%d.jsonl' % attempt)
        cmd = base + ['--save', ck, '--save-every', '1', '--log', log] + (
            ['--resume', ck] if has else [])
        before = partials()
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if attempt < args.kills:
            # Wait until this run's save is under way (a new partial directory exists), then
            # kill at a random point of it: while the rank file is written, between it and the
            # index, or around the rename and `latest`.
            deadline = time.time() + 20
            while p.poll() is None and time.time() < deadline and not (partials() - before):
                time.sleep(0.002)
            time.sleep(random.uniform(0, 0.09))
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                killed += 1
            else:
                sys.exit('run %d ended before it was killed: %s' % (attempt, p.stderr.read().decode()))
            p.wait()
            partial_seen += bool(partials() - before)
        else:
            _, err = p.communicate()
            if p.returncode != 0:
                sys.exit('the final resumed run failed: %s' % err.decode())
        logs.append(log)

    ok, last = True, 0
    for log in logs:
        if not os.path.exists(log):
            continue
        for line in open(log):
            try:
                l = json.loads(line)
            except ValueError:
                continue  # a line cut by the kill
            last = max(last, l['step'])
            if (l['loss'], l['lr']) != full[l['step']]:
                print('%s step %d: loss %.9g lr %.9g, uninterrupted %.9g %.9g'
                      % (os.path.basename(log), l['step'], l['loss'], l['lr'], *full[l['step']]))
                ok = False
    # Every attempt was killed inside a save, and some kills left their save unpublished.
    ok = ok and last == args.steps and killed == args.kills and partial_seen >= 1
    print('%d kills (%d left a partial checkpoint behind), %d runs: every logged step equals the '
          'uninterrupted run, last step %d -> %s' % (killed, partial_seen, len(logs), last,
                                                     'PASS' if ok else 'FAIL'))
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()

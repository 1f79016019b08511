#!/usr/bin/python3
"""Failures of one rank end every rank, promptly and by name (4 ranks under mpirun):

  stop     SIGSTOP rank 2 mid-run: every other rank exits non-zero within --comm-timeout + 10 s,
           each naming rank 2 as the one that did not answer.
  log      rank 0's --log cannot be opened (or written): every rank exits non-zero, rank 0 with
           its error and every other rank naming rank 0 and its message.

No process is left behind: the ranks' processes are looked up by their MPI rank and checked
(and killed, failing the test) after each case.

  rank_failures.py --bin BUILD/bin --work DIR --case stop|log|log-write
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, '..', 'models')
MPIRUN = ['mpirun', '--allow-run-as-root', '--oversubscribe']


def rank_pids(mpirun_pid):
    """{MPI rank: pid} of the processes mpirun started."""
    out = {}
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            stat = open('/proc/%s/stat' % d).read()
            ppid = int(stat.rsplit(')', 1)[1].split()[1])
            if ppid != mpirun_pid:
                continue
            env = open('/proc/%s/environ' % d, 'rb').read().split(b'\0')
        except (OSError, IndexError, ValueError):
            continue
        for e in env:
            if e.startswith(b'OMPI_COMM_WORLD_RANK='):
                out[int(e.split(b'=', 1)[1])] = int(d)
    return out


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a zombie has exited
        return open('/proc/%d/stat' % pid).read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


def leftovers(pids, grace=5.0):
    """Kills (SIGCONT + SIGKILL) any rank still alive `grace` seconds after mpirun exited;
    returns their ranks. (mpirun's SIGKILL of a stopped rank lands at once, but on a loaded
    machine the process can take a moment to be reaped.)"""
    deadline = time.time() + grace
    while time.time() < deadline and any(alive(p) for p in pids.values()):
        time.sleep(0.1)
    left = [r for r, p in pids.items() if alive(p)]
    for r in left:
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pids[r], sig)
            except OSError:
                pass
    return left


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--work', required=True)
    ap.add_argument('--case', required=True, choices=['stop', 'log', 'log-write'])
    ap.add_argument('--timeout', type=int, default=20)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    w = lambda f: os.path.join(args.work, f)
    b = lambda t: os.path.join(args.bin, t)
    ranks, steps = 4, 20000
    rng = np.random.RandomState(0)
    np.save(w('x.npy'), rng.randn(steps * ranks, 16).astype(np.float32))
    np.save(w('y.npy'), rng.randint(0, 4, size=steps * ranks).astype(np.int64))
    json.dump({'train_batch_size': ranks, 'train_micro_batch_size_per_gpu': 1,
               'optimizer': {'type': 'AdamW', 'params': {'lr': 1e-4}},
               'zero_optimization': {'stage': 1}}, open(w('cfg.json'), 'w'))
    subprocess.run([b('ds-opt'), os.path.join(MODELS, 'mlp_script.pt'), '--input',
                    'x=tensor<1x16xf32>', '--input', 'y=tensor<1xi64>', '--world-size',
                    str(ranks), '--config', w('cfg.json'), '-o', w('step.mlir')], check=True)
    log = {'stop': w('log.jsonl'), 'log': w('no/such/dir/log.jsonl'), 'log-write': '/dev/full'}
    cmd = MPIRUN + ['-np', str(ranks), b('ds-run'), w('step.mlir'), '--data', 'x=' + w('x.npy'),
                    '--data', 'y=' + w('y.npy'), '--steps', str(steps), '--threads', '1',
                    '--comm-timeout', str(args.timeout), '--log', log[args.case]]
    if os.path.exists(w('log.jsonl')):
        os.remove(w('log.jsonl'))
    pids = {}
    ok = True
    if args.case == 'stop':
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # Once training runs (rank 0 has logged steps), stop rank 2.
        deadline = time.time() + 60
        while time.time() < deadline and p.poll() is None:
            pids = rank_pids(p.pid) if len(pids) < ranks else pids
            if len(pids) == ranks and os.path.exists(w('log.jsonl')) and \
                    sum(1 for _ in open(w('log.jsonl'))) >= 5:
                break
            time.sleep(0.05)
        if len(pids) != ranks or p.poll() is not None:
            leftovers(pids)
            p.kill()
            sys.exit('the run did not start training (ranks found: %s)' % sorted(pids))
        os.kill(pids[2], signal.SIGSTOP)
        stopped = time.time()
        try:
            _, err = p.communicate(timeout=args.timeout + 40)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
            print('mpirun did not exit within %d s of the stop' % (args.timeout + 40))
            ok = False
        took = time.time() - stopped
        err = err.decode(errors='replace')
        print('rank 2 stopped after step %d; mpirun exited %d after %.1f s (limit %d s)' %
              (sum(1 for _ in open(w('log.jsonl'))), p.returncode, took, args.timeout + 10))
        ok = ok and p.returncode != 0 and took <= args.timeout + 10
        for r in (0, 1, 3):
            lines = [l for l in err.splitlines() if l.startswith('dsrt: rank %d: ' % r)]
            named = [l for l in lines if 'rank 2 did not answer' in l]
            print('rank %d: %s' % (r, named[0] if named else 'NO REPORT NAMING RANK 2'))
            ok = ok and bool(named)
    else:
        # Each rank's exit code, printed by a wrapper that itself exits 0 so that mpirun lets
        # every rank finish on its own.
        cmd = MPIRUN + ['-np', str(ranks), 'sh', '-c',
                        '"$@"; echo "rank $OMPI_COMM_WORLD_RANK exit $?" >&2', 'sh'] + cmd[5:]
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
        err = r.stderr.decode(errors='replace')
        codes = {int(m.group(1)): int(m.group(2))
                 for m in re.finditer(r'rank (\d+) exit (\d+)', err)}
        print('exit codes by rank: %s' % ' '.join('%d:%d' % kv for kv in sorted(codes.items())))
        ok = sorted(codes) == list(range(ranks)) and all(c != 0 for c in codes.values())
        mine = [l for l in err.splitlines() if l.startswith('ds-run: error: ')]
        print('rank 0: %s' % (mine[0] if mine else 'NO ERROR'))
        stopping = [l for l in err.splitlines() if 'stopping because rank 0 failed: cannot write '
                    '--log' in l]
        print('%d ranks stopped naming rank 0 and its message' % len(stopping))
        ok = ok and len(mine) == 1 and 'cannot write --log' in mine[0] and \
            len(stopping) == ranks - 1
    left = leftovers(pids)
    if left:
        print('processes left behind: ranks %s (killed now)' % left)
        ok = False
    print('-> PASS' if ok else '-> FAIL')
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()

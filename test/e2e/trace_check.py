#!/usr/bin/python3
"""ds-run --trace: the Chrome trace of the traced steps is valid and complete.

Trains --family for 3 steps with --trace (the last step by default, or --trace-steps) and
DSRT_PROFILE=1 in one run, then checks the file as Perfetto's JSON importer reads it: an object
with traceEvents, each complete event ("X") with a name, a category, a time, a duration, a
process (the rank) and a thread (the stream), the threads and processes named. Complete: the
traced steps' driver spans are there and nothing lies outside them, and each kernel appears as
often per traced step as the runtime's own per-kernel call counts (DSRT_PROFILE, counted
inside the kernels) say per step. Every kernel span is named by the ds op that made it, most
with the model's source line. At several ranks: one process per rank, the collectives on
their group's stream, as many on every rank.

usage: trace_check.py --bin BUILD/bin --work DIR [--family gpt] [--ranks 1] [--stage 0]
                      [--trace-steps LIST]
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_compare as tc  # noqa: E402

STEPS = 3


def check(ok, what):
    print('%s -> %s' % (what, 'PASS' if ok else 'FAIL'))
    if not ok:
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--work', required=True)
    ap.add_argument('--family', default='gpt')
    ap.add_argument('--ranks', type=int, default=1)
    ap.add_argument('--stage', type=int, default=0)
    ap.add_argument('--trace-steps', default='')
    ap.add_argument('--pp', type=int, default=1,
                    help='pipeline stages (--ranks of them, 4 micro-batches per step): the '
                         'trace must show the stages computing at the same time')
    ap.add_argument('--offload', action='store_true',
                    help='ZeRO-3 with offload_param on the cpu and offload_optimizer on NVMe in '
                         'small buckets: each bucket\'s optimizer state is read while the one '
                         'before it is updated, and the trace must show the transfer stream busy '
                         'while the compute stream runs kernels')
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    w = lambda f: os.path.join(args.work, f)
    b = lambda t: os.path.join(args.bin, t)
    pt, inputs_file = tc.model_path(argparse.Namespace(family=args.family, kind='script',
                                                       work=args.work))
    specs = [l.strip().split('=', 1) for l in open(inputs_file) if l.strip()]
    mb = tc.parse_type(specs[0][1])[0][0]
    gas = 4 if args.pp > 1 else 1
    G = mb * gas * args.ranks // args.pp
    data = tc.write_data(specs, args.family, STEPS * G, args.work, np.random.RandomState(0))
    cfg = {'train_batch_size': G, 'train_micro_batch_size_per_gpu': mb,
           'gradient_accumulation_steps': gas,
           'optimizer': {'type': 'AdamW', 'params': {'lr': 1e-3}},
           'zero_optimization': {'stage': args.stage}, 'steps_per_print': 1000}
    if args.pp > 1:
        cfg['pipeline'] = {'stages': args.pp}
    if args.offload:
        os.makedirs(w('nvme'), exist_ok=True)
        cfg['zero_optimization'].update(stage3_param_persistence_threshold=100,
                                        reduce_bucket_size=3000,
                                        offload_param={'device': 'cpu'},
                                        offload_optimizer={'device': 'nvme',
                                                           'nvme_path': w('nvme')})
    json.dump(cfg, open(w('cfg.json'), 'w'))
    inputs = sum([['--input', '%s=%s' % (n, t)] for n, t in specs], [])
    subprocess.run([b('ds-opt'), pt] + inputs + ['--config', w('cfg.json'), '-o',
                                                 w('step.mlir')], check=True)
    launch = (['mpirun', '--allow-run-as-root', '--oversubscribe', '-np', str(args.ranks)]
              if args.ranks > 1 else [])
    flags = ['--trace', w('trace.json')]
    traced = [STEPS]
    if args.trace_steps:
        flags += ['--trace-steps', args.trace_steps]
        traced = sorted({int(s) for s in args.trace_steps.split(',')})
    tc.run(launch + [b('ds-run'), w('step.mlir')] + data +
           ['--steps', str(STEPS), '--threads', '1'] + flags, w('run.log'),
           env=dict(os.environ, DSRT_PROFILE='1'))

    # Perfetto's JSON format.
    trace = json.load(open(w('trace.json')))
    events = trace['traceEvents']
    spans = [e for e in events if e.get('ph') == 'X']
    meta = [e for e in events if e.get('ph') == 'M']
    check(isinstance(events, list) and len(spans) + len(meta) == len(events) and all(
        isinstance(e['name'], str) and e['name'] and isinstance(e['cat'], str) and
        isinstance(e['ts'], (int, float)) and e['ts'] >= 0 and
        isinstance(e['dur'], (int, float)) and e['dur'] >= 0 and isinstance(e['pid'], int) and
        isinstance(e['tid'], int) and isinstance(e['args']['call'], str) for e in spans),
        'the trace: %d complete events and %d metadata events, each with name, cat, ts, dur, '
        'pid, tid' % (len(spans), len(meta)))
    pids = sorted({e['pid'] for e in spans})
    named = {(e['pid'], e.get('tid')): e['args']['name'] for e in meta
             if e['name'] in ('process_name', 'thread_name')}
    check(pids == list(range(args.ranks)) and
          all((p, None) in named and named[(p, None)] == 'rank %d' % p for p in pids) and
          all((e['pid'], e['tid']) in named for e in spans),
          'one process per rank (%s), every thread named (%s)' % (
              ', '.join('rank %d' % p for p in pids),
              ', '.join(sorted({v for (p, t), v in named.items() if t is not None}))))

    # Complete: the traced steps and nothing else; every kernel as often as the runtime ran it.
    for pid in pids:
        mine = [e for e in spans if e['pid'] == pid]
        steps = [e for e in mine if e['cat'] == 'driver' and re.fullmatch(r'step \d+', e['name'])]
        check(sorted(int(e['name'].split()[1]) for e in steps) == traced,
              'rank %d: driver spans of %s' % (pid, ', '.join(e['name'] for e in steps)))
        inside = lambda e: any(s['ts'] <= e['ts'] and e['ts'] + e['dur'] <= s['ts'] + s['dur'] + 1
                               for s in steps)
        compute = [e for e in mine if e['cat'] in ('kernel', 'copy', 'wait', 'driver')]
        check(all(inside(e) for e in compute),
              'rank %d: all %d compute-stream spans lie inside the traced steps' % (
                  pid, len(compute)))
    log = open(w('run.log')).read()
    prof = collections.Counter()
    for line in log.splitlines():
        m = re.match(r'dsrt profile: (\w+)(?: \(\d+\))?\s+(\d+)\s', line)
        if m and line.split()[2] != 'kernel':
            prof[m.group(1)] += int(m.group(2))
    kernels = [e for e in spans if e['cat'] == 'kernel']
    counted = collections.Counter(e['args']['call'] for e in kernels)
    # DSRT_PROFILE counts every rank's calls of all STEPS steps (the ranks run the same kernels).
    expect = {k: v * len(traced) // STEPS for k, v in prof.items()}
    check(prof and all(v * len(traced) % STEPS == 0 for v in prof.values()) and
          dict(counted) == expect,
          '%d kernel calls in %d kernels over %d traced step(s), as DSRT_PROFILE counts them' % (
              len(kernels), len(counted), len(traced)))

    # Named by the ds op; in the forward and backward, also by the model's line (the optimizer
    # step's ops are the compiler's own).
    sited = [e for e in kernels if e['args'].get('site', '').startswith('ds.')]
    micro = [s for s in spans if s['name'] in ('micro_step', 'pipeline_step')]
    model = [e for e in kernels if any(s['pid'] == e['pid'] and s['ts'] <= e['ts'] <= s['ts'] +
                                       s['dur'] for s in micro)]
    # The rest are ops the compiler inserted (ZeRO's buckets), named by the model file.
    lined = [e for e in model if re.search(r'\.py:\d+$', e['args'].get('site', ''))]
    inserted = [e for e in model if e not in lined]
    check(len(sited) == len(kernels) and model and len(lined) >= len(model) // 2 and
          all(re.search(r'\.pt:0$', e['args']['site']) for e in inserted) and
          (args.ranks > 1 or not inserted),
          'every kernel span names its ds op; %d of %d in the micro-steps also the model\'s line '
          '(e.g. %s), the rest the compiler\'s' % (len(lined), len(model),
                                                  lined[0]['name'] if lined else '-'))

    if args.ranks > 1:
        colls = [e for e in spans if e['cat'] == 'collective']
        per_rank = collections.Counter(e['pid'] for e in colls)
        threads = {named[(e['pid'], e['tid'])] for e in colls}
        check(len(per_rank) == args.ranks and len(set(per_rank.values())) == 1 and
              all(t.startswith('collectives (') for t in threads) and
              all(e['args'].get('detail') for e in colls),
              '%d collectives on every rank, on %s, each with its size' % (
                  list(per_rank.values())[0] if per_rank else 0, ', '.join(sorted(threads))))
    if args.offload:
        # Overlap: a transfer span (the transfer stream's thread) lying partly inside a kernel
        # span of the same rank's compute stream. A transfer run on the compute stream's
        # thread, in dsrt_move itself, falls between kernels and never overlaps one.
        counts = []
        for pid in pids:
            moves = [e for e in spans if e['pid'] == pid and e['cat'] == 'transfer']
            kern = sorted((e['ts'], e['ts'] + e['dur']) for e in kernels if e['pid'] == pid)
            over = [m for m in moves if any(a < m['ts'] + m['dur'] and m['ts'] < z
                                            for a, z in kern)]
            counts.append((len(over), len(moves)))
        check(all(n >= 1 for n, _ in counts),
              'transfers overlap compute: %s of the transfer spans lie partly inside a kernel '
              'span of their rank\'s compute stream' % ', '.join(
                  '%d of %d on rank %d' % (n, t, q) for q, (n, t) in enumerate(counts)))
    if args.pp > 1:
        # Both stages busy at once: the time in which a kernel of each of two ranks runs.
        def busy(pid):
            out = []
            for a, z in sorted((e['ts'], e['ts'] + e['dur']) for e in kernels if e['pid'] == pid):
                if out and a <= out[-1][1]:
                    out[-1][1] = max(out[-1][1], z)
                else:
                    out.append([a, z])
            return out
        b0, b1 = busy(0), busy(1)
        both = sum(max(0.0, min(z0, z1) - max(a0, a1)) for a0, z0 in b0 for a1, z1 in b1)
        t0, t1 = sum(z - a for a, z in b0), sum(z - a for a, z in b1)
        check(both >= 0.10 * min(t0, t1),
              'stages overlap: ranks 0 and 1 run kernels at the same time for %.0f us, %.0f%% of '
              'the less busy rank\'s %.0f us of kernels' % (both, 100 * both / min(t0, t1),
                                                           min(t0, t1)))
    slowest = collections.Counter()
    for e in kernels:
        slowest[e['args']['site']] += e['dur']
    print('slowest ds ops: %s' % ', '.join('%s %.0f us' % kv for kv in slowest.most_common(3)))


if __name__ == '__main__':
    main()

#!/usr/bin/python3
"""Activation checkpointing chosen by the compiler, against the same step without it.

For one model: the step compiled without and with DeepSpeed's `activation_checkpointing` block
trains --steps steps with the same losses, bit for bit (the recomputed values are the same
bits; dropout masks are kept); each run's measured device peak equals its plan, so the peak
falls by what --memory-report predicts; the losses match ds-reference (LibTorch) within
--loss-rtol. Then a --device-memory budget between the two peaks: ds-opt --device-memory
chooses recomputation, and ds-run under that budget trains with the same losses.

With --pp N, the step is a pipeline of N stages (N x --ranks processes): each stage
recomputes its own blocks in its backward phase, and the peaks compared are the fullest
rank's.

usage: recompute.py --bin BUILD/bin --work DIR --family gpt-wide [--steps 8] [--ranks 1]
       [--pp 1]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_compare as tc  # noqa: E402


def report_peak(b, mlir):
    """The peak column of ds-opt --memory-report: the fullest rank's (pipeline stages
    differ)."""
    out = subprocess.run([b('ds-opt'), mlir, '--memory-report', '-o', os.devnull],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    rows = [l.split() for l in out[2:] if l.split() and l.split()[0].isdigit()]
    return max(int(r[7]) for r in rows), out


def compile_step(b, w, pt, inputs, name, cfg, extra=()):
    """ds-opt of the model `pt` with the config `cfg` (written to WORK/NAME.json) into
    WORK/NAME.mlir; returns that path and ds-opt's stderr (its notes)."""
    json.dump(cfg, open(w(name + '.json'), 'w'))
    r = subprocess.run([b('ds-opt'), pt] + inputs + ['--config', w(name + '.json'), '-o',
                                                     w(name + '.mlir')] + list(extra),
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit('ds-opt failed: ' + r.stderr)
    return w(name + '.mlir'), r.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--work', required=True)
    ap.add_argument('--family', default='gpt-wide')
    ap.add_argument('--steps', type=int, default=8)
    ap.add_argument('--ranks', type=int, default=1)
    ap.add_argument('--stage', type=int, default=0)
    ap.add_argument('--pp', type=int, default=1, help='pipeline stages')
    ap.add_argument('--loss-rtol', type=float, default=1e-5)
    ap.add_argument('--ckpt', default='{}', help='the activation_checkpointing block (JSON)')
    ap.add_argument('--no-reference', action='store_true',
                    help='a model with dropout: LibTorch draws other masks (the bit-for-bit '
                    'comparison with the plain step still holds)')
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    w = lambda f: os.path.join(args.work, f)
    b = lambda t: os.path.join(args.bin, t)
    pt, inputs_file = tc.model_path(argparse.Namespace(family=args.family, kind='script',
                                                       work=args.work))
    specs = [l.strip().split('=', 1) for l in open(inputs_file) if l.strip()]
    mb = tc.parse_type(specs[0][1])[0][0]
    G = mb * 2 * args.ranks
    data = tc.write_data(specs, args.family, args.steps * G, args.work,
                         np.random.RandomState(0), learnable=True)
    common = data + ['--steps', str(args.steps), '--threads', '1']
    inputs = sum([['--input', '%s=%s' % (n, t)] for n, t in specs], [])
    procs = args.ranks * args.pp
    launch = (['mpirun', '--allow-run-as-root', '--oversubscribe', '-np', str(procs)]
              if procs > 1 else [])
    base = {'train_batch_size': G, 'train_micro_batch_size_per_gpu': mb,
            'gradient_accumulation_steps': 2,
            'optimizer': {'type': 'AdamW', 'params': {'lr': 2e-3, 'weight_decay': 0.01}},
            'zero_optimization': {'stage': args.stage}, 'steps_per_print': 1000}
    ref_cfg = dict(base)
    if args.pp > 1:
        base['pipeline'] = {'stages': args.pp}

    def compile(name, cfg, extra=()):
        return compile_step(b, w, pt, inputs, name, cfg, extra)

    def train(name, mlir, flags=()):
        log = w(name + '.jsonl')
        tc.run(launch + [b('ds-run'), mlir] + common + ['--log', log] + list(flags),
               w(name + '-run.log'))
        return [json.loads(l) for l in open(log)]

    ok = True
    plain, _ = compile('plain', base)
    ckpt, _ = compile('ckpt', dict(base, activation_checkpointing=json.loads(args.ckpt)))
    recomputed = sum(1 for l in open(ckpt) if 'ds.recompute' in l)
    runs = {}
    for name, mlir in (('plain', plain), ('ckpt', ckpt)):
        planned, report = report_peak(b, mlir)
        recs = train(name, mlir)
        measured = max(r['device_peak_bytes'] for rec in recs for r in rec['ranks'])
        runs[name] = (planned, measured, [r['loss'] for r in recs], report)
        print('%s: planned peak %d, measured %d -> %s' % (
            name, planned, measured, 'PASS' if planned == measured else 'FAIL'))
        ok = ok and planned == measured
    same = runs['plain'][2] == runs['ckpt'][2]
    drop_planned = runs['plain'][0] - runs['ckpt'][0]
    drop_measured = runs['plain'][1] - runs['ckpt'][1]
    flops = [l for l in runs['ckpt'][3] if l.startswith('recomputed')]
    print('activation checkpointing: %d ops recomputed (%s); losses %s; peak falls by %d bytes '
          '(%.0f%% of the plain peak), predicted %d -> %s' % (
              recomputed, flops[0].split(': ', 1)[1] if flops else 'no FLOPs reported',
              'identical bit for bit' if same else 'DIFFERENT', drop_measured,
              100.0 * drop_measured / runs['plain'][1], drop_planned,
              'PASS' if same and drop_planned == drop_measured and drop_measured > 0 else
              'FAIL'))
    ok = ok and same and drop_planned == drop_measured and drop_measured > 0 and recomputed > 0

    # The judge: LibTorch's losses for the same config and data.
    if args.no_reference:
        print('against ds-reference: not compared (dropout masks are drawn differently)')
    else:
        json.dump(ref_cfg, open(w('ref.json'), 'w'))
        tc.run([b('ds-reference'), pt, '--config', w('ref.json'), '--world-size',
                str(args.ranks)] + common + ['--log', w('ref.jsonl')], w('ref.log'))
        ref = [json.loads(l)['loss'] for l in open(w('ref.jsonl'))]
        worst = max(abs(x - y) / abs(y) for x, y in zip(runs['ckpt'][2], ref))
        print('against ds-reference: worst loss rel diff %.2e -> %s' % (
            worst, 'PASS' if worst <= args.loss_rtol else 'FAIL'))
        ok = ok and worst <= args.loss_rtol

    # A budget only recomputation fits: between the two peaks.
    budget = (runs['plain'][0] + runs['ckpt'][0]) // 2
    fitted, err = compile('fitted', base, ['--device-memory', str(budget)])
    # ds-opt's note on the fit (its summary of the step follows on other lines).
    note = next((l for l in err.splitlines() if '--device-memory' in l), err)
    chose = 'chose activation checkpointing' in note
    recs = train('fitted', fitted, ['--device-memory', str(budget)])
    same_fit = [r['loss'] for r in recs] == runs['plain'][2]
    print('--device-memory %d (between the peaks): %s; trains under it with the same losses: %s'
          ' -> %s' % (budget, note.strip().split(': ', 2)[-1] if chose else 'NOT recomputation: '
                      + note.strip(), same_fit, 'PASS' if chose and same_fit else 'FAIL'))
    ok = ok and chose and same_fit
    print('recompute %s: %s' % (args.family, 'PASS' if ok else 'FAIL'))
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())

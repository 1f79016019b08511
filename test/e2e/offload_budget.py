#!/usr/bin/python3
"""ZeRO-Offload and ZeRO-Infinity under a device budget that the model state does not fit.

For the d_model 512 / 6-layer GPT (19.5M parameters) at micro-batch 2, fp32, ZeRO stage 3, at
--ranks N: the budget is the plan's peak without model state plus a quarter of the model-state
bytes (the no-offload plan's persistent bytes per rank). Then:
  1. the program compiled without offload is refused at that budget before step 1, naming the
     shortfall and the offload keys, and writes no log line;
  2. offload_optimizer + offload_param on cpu, then on nvme, train 20 steps within the budget
     and match ds-reference (LibTorch) per step within --loss-rtol;
  3. every rank's measured bytes moved per tier and step, host-space peak, NVMe peak and
     device peak equal the compiler's plan;
  4. no swap file is left in nvme_path: after the runs, after a run stopped by an error, and
     after a rank killed with SIGKILL mid-run.

usage: offload_budget.py --bin BUILD/bin --work DIR [--ranks N] [--steps 20] [--devices cpu,nvme]
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_compare as tc  # noqa: E402

FAMILY = 'gpt-d512'


T0 = time.time()


def stamp(what):
    if os.environ.get('DS_TEST_TIMES'):
        sys.stderr.write('[%6.1f s] %s\n' % (time.time() - T0, what))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--work', required=True)
    ap.add_argument('--ranks', type=int, default=1)
    ap.add_argument('--steps', type=int, default=20)
    ap.add_argument('--devices', default='cpu,nvme')
    ap.add_argument('--loss-rtol', type=float, default=1e-5)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    w = lambda f: os.path.join(args.work, f)
    b = lambda t: os.path.join(args.bin, t)

    # The model, its inputs and data (train_compare's, so that the data order is the one
    # ds-reference and ds-run share).
    tc_args = argparse.Namespace(family=FAMILY, kind='script', work=args.work)
    pt, inputs_file = tc.model_path(tc_args)
    specs = [l.strip().split('=', 1) for l in open(inputs_file) if l.strip()]
    mb = tc.parse_type(specs[0][1])[0][0]
    G = mb * args.ranks
    rng = np.random.RandomState(0)
    data_flags = tc.write_data(specs, FAMILY, args.steps * G, args.work, rng, learnable=True)
    common = data_flags + ['--steps', str(args.steps), '--threads', '1']
    inputs = sum([['--input', '%s=%s' % (n, t)] for n, t in specs], [])
    launch = (['mpirun', '--allow-run-as-root', '--oversubscribe', '-np', str(args.ranks)]
              if args.ranks > 1 else [])

    def config(offload):
        zero = {'stage': 3}
        if offload:
            dev = {'device': offload}
            if offload == 'nvme':
                dev['nvme_path'] = w('nvme')
            zero['offload_optimizer'] = dict(dev)
            zero['offload_param'] = dict(dev)
        return {'train_batch_size': G, 'train_micro_batch_size_per_gpu': mb,
                'gradient_accumulation_steps': 1,
                # lr 1e-4: at 1e-3 without warmup Adam amplifies the rounding differences of
                # any two summation orders past 1e-5 within 20 steps (FACTS.md).
                'optimizer': {'type': 'AdamW', 'params': {'lr': 1e-4, 'weight_decay': 0.01}},
                'zero_optimization': zero, 'steps_per_print': args.steps}

    def compile(name, cfg):
        stamp('compile ' + name)
        path = w(name + '.json')
        json.dump(cfg, open(path, 'w'))
        tc.run([b('ds-opt'), pt] + inputs + ['--config', path, '-o', w(name + '.mlir')],
               w(name + '-opt.log'))
        return w(name + '.mlir')

    ok = True
    # The budget, from the plan without offload.
    base = tc.lowered_plan(b, compile('step-none', config(None)))
    state = base['persistent_bytes']
    budget = base['peak_bytes'] - state + state // 4
    print('plan without offload: peak %d, model state %d per rank; budget %d (peak without '
          'model state + a quarter of the model state)' % (base['peak_bytes'], state, budget))

    # 1. Without offload: refused before step 1, no log line.
    log0 = w('none.jsonl')
    if os.path.exists(log0):
        os.remove(log0)
    r = subprocess.run(launch + [b('ds-run'), w('step-none.mlir')] + common +
                       ['--device-memory', str(budget), '--log', log0],
                       capture_output=True, text=True)
    msg = r.stderr
    want = ['short by %d bytes' % (base['peak_bytes'] - budget), 'offload_optimizer',
            'offload_param']
    refused = r.returncode != 0 and all(s in msg for s in want)
    no_line = not os.path.exists(log0) or os.path.getsize(log0) == 0
    print('without offload at the budget: %s, %s' % (
        'refused, naming the shortfall and both offload keys' if refused else
        'NOT refused as expected (exit %d): %s' % (r.returncode, msg.strip()[-600:]),
        'no log line' if no_line else 'a log line was written'))
    print('  ' + [l for l in msg.splitlines() if 'error' in l][0][:400] if refused else '')
    ok = ok and refused and no_line

    stamp('reference')
    # The reference: offload does not change the numbers.
    json.dump(config(None), open(w('ref_config.json'), 'w'))
    tc.run([b('ds-reference'), pt, '--config', w('ref_config.json')] + common +
           ['--log', w('ref.jsonl')], w('ref.log'))
    ref = [json.loads(l)['loss'] for l in open(w('ref.jsonl'))]

    os.makedirs(w('nvme'), exist_ok=True)
    for dev in args.devices.split(','):
        mlir = compile('step-' + dev, config(dev))
        plan = tc.lowered_plan(b, mlir)
        log = w(dev + '.jsonl')
        stamp('run ' + dev)
        tc.run(launch + [b('ds-run'), mlir] + common + ['--device-memory', str(budget),
                                                        '--log', log], w(dev + '-run.log'))
        recs = [json.loads(l) for l in open(log)]
        worst = max(abs(x['loss'] - y) / abs(y) for x, y in zip(recs, ref))
        match = len(recs) == len(ref) == args.steps and worst <= args.loss_rtol
        print('%s offload, %d rank(s), %d steps: worst loss rel diff %.2e against ds-reference '
              '-> %s' % (dev, args.ranks, len(recs), worst, 'PASS' if match else 'FAIL'))
        ok = ok and match
        # 3. Predicted against measured, per rank and step.
        moved = plan['moved_bytes_per_step']
        bad = []
        for rec in recs:
            for k in rec['ranks']:
                got = {'moved': k['moved_bytes'], 'host': k['host_space_peak_bytes'],
                       'nvme': k['nvme_peak_bytes'], 'device': k['device_peak_bytes']}
                want = {'moved': moved, 'host': plan['host_peak_bytes'],
                        'nvme': plan['nvme_bytes'], 'device': plan['peak_bytes']}
                if got != want:
                    bad.append('step %d rank %d: measured %s, planned %s' %
                               (rec['step'], k['rank'], got, want))
        fits = plan['peak_bytes'] <= budget
        print('  plan: device peak %d (budget %d: %s), host peak %d, NVMe %d, moved per step %s; '
              'measured equal on every rank and step: %s' % (
                  plan['peak_bytes'], budget, 'fits' if fits else 'OVER', plan['host_peak_bytes'],
                  plan['nvme_bytes'], moved, 'yes' if not bad else 'NO'))
        for line in bad[:5]:
            print('  ' + line)
        stall = [k['stall_ms'] for rec in recs for k in rec['ranks']]
        print('  median stall %.1f ms per step, median step %.0f ms' % (
            float(np.median(stall)), float(np.median([rec['step_ms'] for rec in recs]))))
        ok = ok and not bad and fits
        if dev == 'nvme':
            expected_tier = moved['host_to_nvme'] > 0 and moved['nvme_to_host'] > 0
            if not expected_tier:
                print('  the NVMe program moves nothing to or from NVMe: FAIL')
            ok = ok and expected_tier

    stamp('swap files')
    # 4. No swap file left: after the runs, after an error, after SIGKILL.
    def left():
        return sorted(os.listdir(w('nvme')))
    after_runs = left()
    if 'nvme' in args.devices.split(','):
        # An error after the swap file is open: resuming from a checkpoint that is not there.
        r = subprocess.run(launch + [b('ds-run'), w('step-nvme.mlir')] + common +
                           ['--resume', w('no-such-checkpoint')], capture_output=True, text=True)
        after_error = left()
        stopped = r.returncode != 0
        # A rank killed mid-run (one rank: mpirun would outlive a killed child).
        log = w('killed.jsonl')
        if args.ranks > 1:
            print('swap files in nvme_path: after the runs %s, after an error (exit %d) %s -> %s'
                  % (after_runs, r.returncode, after_error,
                     'PASS' if stopped and not after_runs and not after_error else 'FAIL'))
            ok = ok and stopped and not after_runs and not after_error
            print('offload budget, %d rank(s): %s' % (args.ranks, 'PASS' if ok else 'FAIL'))
            return 0 if ok else 1
        p = subprocess.Popen([b('ds-run'), w('step-nvme.mlir')] + common + ['--log', log],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t0 = time.time()
        while (p.poll() is None and time.time() - t0 < 120 and
               not (os.path.exists(log) and os.path.getsize(log))):
            time.sleep(0.1)
        if p.poll() is not None:
            print('the run to kill ended by itself (exit %d): FAIL' % p.returncode)
            ok = False
        during = left()
        stamp('kill')
        p.send_signal(signal.SIGKILL)
        p.wait()
        after_kill = left()
        # The file is unlinked as soon as it is reserved: never visible, even while running.
        clean = not after_runs and not after_error and not after_kill and not during
        print('swap files in nvme_path: after the runs %s, after an error (exit %d) %s, while '
              'running %s, after SIGKILL %s -> %s' % (after_runs, r.returncode, after_error,
                                                      during, after_kill,
                                                      'PASS' if clean and stopped else 'FAIL'))
        ok = ok and clean and stopped
    print('offload budget, %d rank(s): %s' % (args.ranks, 'PASS' if ok else 'FAIL'))
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())

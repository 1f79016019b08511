#!/usr/bin/python3
"""ZeRO-Offload and ZeRO-Infinity on this machine, side by side in one run, for the GPT of the
offload test (d_model 512, 6 layers, 8 heads, vocab 1024, seq 128: 19.5M parameters) at
micro-batch 2, fp32 AdamW, ZeRO stage 3, one rank with --threads T:

  1. the NVMe tier's write and read bandwidth (ds-run --probe-bandwidth: the swap file and
     engine training uses) against fio on the same directory (O_DIRECT, io_uring, 1 MiB
     blocks, queue depth 8; the goal is at least 80% of fio);
  2. step time without a budget and without offload, then with --device-memory = the plan's
     peak without model state + a quarter of the model state and both offloads on cpu, then on
     nvme (the goal for cpu: within 1.3x of no offload);
     and, for comparison, activation checkpointing (recomputation) without offload;
  3. the stall the compiler predicts from the probed rates (ds-opt --memory-report --rates)
     against the stall measured (the log's stall_ms: compute waiting on a transfer);
  4. DeepSpeed 0.19.8 (the .venv, DS_ACCELERATOR=cpu) ZeRO-3 with the same offload settings on
     the same model, one process (its CPU Adam builds on first use).

usage: /usr/bin/python3 bench/offload_gpt.py [--steps 8] [--threads 2] [--build build]
       [--nvme DIR]   (default: a directory under the build folder, on its drive)
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, '..')
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, 'test', 'e2e'))
from deepspeed_launch import WARM, run_workers  # noqa: E402
import train_compare as tc  # noqa: E402

MB, SEQ, VOCAB = 2, 128, 1024

DEEPSPEED_WORKER = r'''
import json, os, sys, time, resource
os.environ.setdefault("DS_ACCELERATOR", "cpu")
import numpy as np
import torch, deepspeed
sys.path.insert(0, sys.argv[1])
from make_models import GPT, GPTConfig
device, steps, out, nvme, threads = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[6], int(sys.argv[7])
idx = torch.from_numpy(np.load(sys.argv[5]))
torch.set_num_threads(threads)
torch.manual_seed(0)
deepspeed.init_distributed(dist_backend="gloo")
model = GPT(GPTConfig(vocab_size=1024, block_size=128, n_layer=6, n_head=8, n_embd=512))
zero = {"stage": 3}
if device != "none":
    dev = {"device": device}
    if device == "nvme":
        dev["nvme_path"] = nvme
    zero["offload_optimizer"] = dict(dev)
    zero["offload_param"] = dict(dev)
config = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "weight_decay": 0.01}},
          "zero_optimization": zero, "steps_per_print": 1000}
engine, _, _, _ = deepspeed.initialize(model=model, config=config,
                                       model_parameters=model.parameters())
times = []
for s in range(steps):
    x = idx[s * 2:s * 2 + 2]
    t0 = time.time()
    loss = engine(x, torch.roll(x, -1, 1))
    loss = loss[1] if isinstance(loss, (tuple, list)) else loss
    engine.backward(loss)
    engine.step()
    times.append((time.time() - t0) * 1000)
json.dump({"ms": times, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024},
          open("%s.%d.json" % (out, 0), "w"))
'''


def fio(directory, rw):
    """fio's bandwidth (bytes/s) for 256 MiB of 1 MiB O_DIRECT io_uring requests, depth 8."""
    if not shutil.which('fio'):
        return None
    r = subprocess.run(['fio', '--name=ds', '--directory=' + directory, '--rw=' + rw,
                        '--bs=1M', '--size=256M', '--direct=1', '--ioengine=io_uring',
                        '--iodepth=8', '--numjobs=1', '--output-format=json'],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None
    job = json.loads(r.stdout)['jobs'][0]
    for f in os.listdir(directory):
        if f.startswith('ds.'):
            os.remove(os.path.join(directory, f))
    return job['read' if rw == 'read' else 'write']['bw_bytes']


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--steps', type=int, default=8)
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--build', default='build')
    ap.add_argument('--nvme', default='')
    ap.add_argument('--skip-deepspeed', action='store_true')
    args = ap.parse_args()
    if args.steps < WARM + 1:
        ap.error('--steps must be at least %d (the median is over steps %d..N)' % (WARM + 1,
                                                                                   WARM + 1))
    b = lambda t: os.path.join(ROOT, args.build, 'bin', t)
    work = tempfile.mkdtemp(prefix='offload-bench-', dir=os.path.join(ROOT, args.build))
    w = lambda f: os.path.join(work, f)
    nvme = args.nvme or w('nvme')
    os.makedirs(nvme, exist_ok=True)
    print('work %s, NVMe tier in %s, %d steps (medians of steps %d..%d), %d threads'
          % (work, nvme, args.steps, WARM + 1, args.steps, args.threads))

    # 1. The NVMe tier against fio.
    probe = subprocess.run([b('ds-run'), '--probe-bandwidth', nvme, '--threads',
                            str(args.threads)], capture_output=True, text=True, check=True)
    rates = probe.stdout.split()[1]
    rate = dict((k, float(v)) for k, v in (kv.split('=') for kv in rates.split(',')))
    engine = [l for l in probe.stderr.splitlines() if 'probed with' in l]
    fw, fr = fio(nvme, 'write'), fio(nvme, 'read')
    print('\n| NVMe tier (%s) | ds GB/s | fio GB/s | ds / fio |' %
          (engine[0].split('probed with ')[1].split(' NVMe')[0] if engine else '?'))
    print('|---|---|---|---|')
    for name, mine, theirs in (('write', rate['nvme_write'], fw), ('read', rate['nvme_read'], fr)):
        print('| %s | %.2f | %s | %s |' % (name, mine, '%.2f' % (theirs / 1e9) if theirs else 'n/a',
                                           '%.0f%%' % (100 * mine * 1e9 / theirs) if theirs else
                                           'n/a'))
    print('probed rates: --rates %s' % rates)

    # 2-3. ds without a budget, with cpu offload and with nvme offload under the budget.
    tc_args = argparse.Namespace(family='gpt-d512', kind='script', work=work)
    pt, _ = tc.model_path(tc_args)
    rng = np.random.RandomState(0)
    idx = rng.randint(0, VOCAB, size=(args.steps * MB + 1, SEQ)).astype(np.int64)
    np.save(w('idx.npy'), idx)
    np.save(w('targets.npy'), np.roll(idx, -1, 1))

    def compile(name, offload, recompute=False):
        zero = {'stage': 3}
        if offload:
            dev = {'device': offload}
            if offload == 'nvme':
                dev['nvme_path'] = nvme
            zero['offload_optimizer'] = dict(dev)
            zero['offload_param'] = dict(dev)
        cfg = {'train_batch_size': MB, 'train_micro_batch_size_per_gpu': MB,
               'gradient_accumulation_steps': 1,
               'optimizer': {'type': 'AdamW', 'params': {'lr': 1e-4, 'weight_decay': 0.01}},
               'zero_optimization': zero, 'steps_per_print': 1000}
        if recompute:
            cfg['activation_checkpointing'] = {}
        json.dump(cfg, open(w(name + '.json'), 'w'))
        subprocess.run([b('ds-opt'), pt, '--input', 'idx=tensor<%dx%dxi64>' % (MB, SEQ),
                        '--input', 'targets=tensor<%dx%dxi64>' % (MB, SEQ), '--config',
                        w(name + '.json'), '-o', w(name + '.mlir')], check=True)
        return w(name + '.mlir')

    base = tc.lowered_plan(b, compile('none', None))
    state = base['persistent_bytes']
    budget = base['peak_bytes'] - state + state // 4
    rows = []
    for name, offload, limit, recompute in (('no offload, no budget', None, 0, False),
                                            ('cpu offload, budget', 'cpu', budget, False),
                                            ('nvme offload, budget', 'nvme', budget, False),
                                            ('activation checkpointing', None, 0, True)):
        tag = (offload or 'none') + ('-recompute' if recompute else '')
        step = compile(tag, offload, recompute)
        log = w(tag + '.jsonl')
        flags = ['--device-memory', str(limit)] if limit else []
        subprocess.run([b('ds-run'), step, '--data', 'idx=' + w('idx.npy'), '--data',
                        'targets=' + w('targets.npy'), '--steps', str(args.steps), '--threads',
                        str(args.threads), '--log', log] + flags, check=True,
                       stdout=subprocess.DEVNULL)
        recs = [json.loads(l) for l in open(log)][WARM:]
        ms = statistics.median(r['step_ms'] for r in recs)
        plan = tc.lowered_plan(b, step)
        predicted = None
        if offload:
            rep = subprocess.run([b('ds-opt'), step, '--memory-report', '--rates', rates, '-o',
                                  os.devnull], capture_output=True, text=True, check=True).stdout
            line = [l for l in rep.splitlines() if l.startswith('predicted')][0]
            predicted = float(line.split('stall ')[1].split(' ms')[0])
        stall = statistics.median(r['ranks'][0].get('stall_ms', 0) for r in recs)
        rows.append((name, ms, plan['peak_bytes'], plan.get('host_peak_bytes', 0),
                     plan.get('nvme_bytes', 0), predicted, stall, recs[-1]['loss']))
    print('\n| ds, ZeRO-3, 1 rank | step ms | x no offload | device peak MiB | host MiB | '
          'NVMe MiB | predicted stall ms | measured stall ms |')
    print('|---|---|---|---|---|---|---|---|')
    for name, ms, dev, host, nv, pred, stall, _ in rows:
        print('| %s | %.0f | %.2f | %.1f | %.1f | %.1f | %s | %.1f |' % (
            name, ms, ms / rows[0][1], dev / 2**20, host / 2**20, nv / 2**20,
            '%.1f' % pred if pred is not None else '-', stall))
    print('budget: --device-memory %d (%.1f MiB: the plan without offload needs %.1f MiB, of which '
          '%.1f MiB model state)' % (budget, budget / 2**20, base['peak_bytes'] / 2**20,
                                     state / 2**20))

    # 4. DeepSpeed ZeRO-3 with the same offload settings.
    if args.skip_deepspeed:
        return
    print('\n| DeepSpeed 0.19.8 ZeRO-3, 1 process | step ms | x ds same setting | peak RSS MiB |')
    print('|---|---|---|---|')
    for (name, device), mine in zip((('no offload', 'none'), ('cpu offload', 'cpu'),
                                     ('nvme offload', 'nvme')), rows):
        out = w('deepspeed-' + device)
        got = run_workers(DEEPSPEED_WORKER, w('ds_offload_worker.py'),
                          [os.path.join(ROOT, 'test', 'models'), device, str(args.steps), out,
                           w('idx.npy'), nvme, str(args.threads)], out, 1, 29561, args.steps)
        if isinstance(got, str):
            print('| %s | %s | | |' % (name, got))
        else:
            print('| %s | %.0f | %.2f | %.0f |' % (name, got[0], got[0] / mine[1], got[1] / 2**20))


if __name__ == '__main__':
    main()

#!/usr/bin/python3
"""Mesh layouts at 4 ranks, side by side in one run: step time, per-rank peak memory and bytes
communicated per step of ds (`mpirun -np 4 ds-run`) for dp4, tp4, sp4, dp2 x tp2 and dp2 x sp2,
beside DeepSpeed's AutoTP and Ulysses on the same model and machine where they run on the CPU. The model is the GPT of bench/zero_gpt.py: d_model
512, 6 layers, 8 heads, seq 128, vocab 1024 (19.5M parameters), global batch 16, AdamW, fp32,
one thread per rank.

ds reports its device arena's peak (the compiler's plan, exact) and the process's RSS; the
bytes per step are `ds-opt --comm-report`'s (each collective's tensor, per rank, as
DeepSpeed's comms logger counts them). DeepSpeed runs from the project's .venv when it has
deepspeed (`.venv/bin/pip install deepspeed`); the table says what stopped it otherwise.

usage: /usr/bin/python3 bench/mesh_gpt.py [--steps 7] [--build build] [--no-deepspeed]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, '..')
sys.path.insert(0, HERE)
from deepspeed_launch import WARM, run_workers  # noqa: E402
from train_gpt import export  # noqa: E402

RANKS, BATCH, SEQ, VOCAB, D, LAYERS, HEADS = 4, 16, 128, 1024, 512, 6, 8
MPIRUN = ['mpirun', '--allow-run-as-root', '--oversubscribe', '-np', str(RANKS)]

DEEPSPEED_WORKER = r'''
import json, os, sys, time, resource
os.environ.setdefault("DS_ACCELERATOR", "cpu")
import torch, deepspeed
sys.path.insert(0, sys.argv[1])
from make_models import GPT, GPTConfig
tp, steps, out = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
idx = torch.from_numpy(__import__("numpy").load(sys.argv[5]))
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
torch.set_num_threads(1)
torch.manual_seed(0)
deepspeed.init_distributed(dist_backend="gloo")
from deepspeed.module_inject.layers import set_autotp_mode
set_autotp_mode(training=True)
model = GPT(GPTConfig(vocab_size=%d, block_size=%d, n_layer=%d, n_head=%d, n_embd=%d))
dp = world // tp
mb = %d // dp
# DeepSpeed derives train_batch_size from its own data-parallel size.
cfg = {"train_micro_batch_size_per_gpu": mb, "gradient_accumulation_steps": 1,
       "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
       "tensor_parallel": {"autotp_size": tp}, "zero_optimization": {"stage": 0},
       "steps_per_print": 1000}
engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                       config=cfg)
times = []
d = rank // tp
for s in range(steps):
    t0 = time.time()
    lo = s * %d + d * mb
    x = idx[lo:lo + mb]
    y = torch.roll(x, -1, 1)
    loss = engine(x, y)
    loss = loss[1] if isinstance(loss, tuple) else loss
    engine.backward(loss)
    engine.step()
    times.append((time.time() - t0) * 1000)
json.dump({"ms": times, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024},
          open("%%s.%%d.json" %% (out, rank), "w"))
''' % (VOCAB, SEQ, LAYERS, HEADS, D, BATCH, BATCH)


def run_ds(b, w, layout, tp, steps, sp=1):
    dp = RANKS // (tp * sp)
    mb = BATCH // dp
    cfg = {'train_batch_size': BATCH, 'train_micro_batch_size_per_gpu': mb,
           'gradient_accumulation_steps': 1,
           'optimizer': {'type': 'AdamW', 'params': {'lr': 1e-4}}, 'steps_per_print': 1000}
    if tp > 1:
        cfg['tensor_parallel'] = {'autotp_size': tp}
    if sp > 1:
        cfg['sequence_parallel_size'] = sp
    json.dump(cfg, open(w('cfg-%s.json' % layout), 'w'))
    step = w('step-%s.mlir' % layout)
    subprocess.run([b('ds-opt'), w('gpt.pt'), '--input', 'idx=tensor<%dx%dxi64>' % (mb, SEQ),
                    '--input', 'targets=tensor<%dx%dxi64>' % (mb, SEQ), '--config',
                    w('cfg-%s.json' % layout), '-o', step], check=True,
                   stderr=subprocess.DEVNULL)
    comm = subprocess.run([b('ds-opt'), step, '--comm-report'], check=True, capture_output=True,
                          text=True).stdout
    total = int(re.search(r'^total\s+\d+\s+(\d+)', comm, re.M).group(1))
    log = w('ds-%s.jsonl' % layout)
    subprocess.run(MPIRUN + [b('ds-run'), step, '--data', 'idx=' + w('idx.npy'), '--data',
                             'targets=' + w('targets.npy'), '--steps', str(steps),
                             '--threads', '1', '--log', log],
                   check=True, stdout=subprocess.DEVNULL)
    lines = [json.loads(l) for l in open(log)]
    ms = statistics.median(l['step_ms'] for l in lines[WARM:])
    last = lines[-1]['ranks']
    return (ms, max(r['device_peak_bytes'] for r in last), max(r['host_peak_bytes'] for r in last),
            total, max(r['parameter_bytes'] for r in last))


def run_deepspeed(w, tp, steps):
    """DeepSpeed AutoTP at tp (dp = 4 / tp), 4 processes; (ms, rss) or the reason it failed."""
    out = w('deepspeed-tp%d' % tp)
    args = [os.path.join(ROOT, 'test', 'models'), str(tp), str(steps), out, w('idx.npy')]
    return run_workers(DEEPSPEED_WORKER, w('ds_worker.py'), args, out, RANKS, 29541, steps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--steps', type=int, default=7)
    ap.add_argument('--build', default=os.path.join(ROOT, 'build'))
    ap.add_argument('--no-deepspeed', action='store_true')
    ap.add_argument('--only-deepspeed', action='store_true', help='skip the ds rows')
    args = ap.parse_args()
    if args.steps < WARM + 1:
        ap.error('--steps must be at least %d (the median is over steps %d..N)' % (WARM + 1,
                                                                                   WARM + 1))
    b = lambda t: os.path.join(args.build, 'bin', t)
    work = tempfile.mkdtemp(prefix='ds-mesh-bench-')
    w = lambda f: os.path.join(work, f)
    n = export(w('gpt.pt'), D, LAYERS, HEADS, vocab=VOCAB, block=SEQ)
    rng = np.random.RandomState(0)
    idx = rng.randint(0, VOCAB, size=(args.steps * BATCH, SEQ)).astype(np.int64)
    np.save(w('idx.npy'), idx)
    np.save(w('targets.npy'), np.roll(idx, -1, axis=1))
    print('GPT d%d x %d layers, %d heads, seq %d, global batch %d, %.1fM parameters, AdamW '
          'fp32, %d ranks x 1 thread, median of steps %d..%d' % (D, LAYERS, HEADS, SEQ, BATCH,
                                                                n / 1e6, RANKS, WARM + 1,
                                                                args.steps))
    print('%-26s %9s %15s %12s %12s %16s' % ('run', 'step ms', 'params/rank MiB', 'peak MiB',
                                             'RSS MiB', 'comm MiB/step'))
    layouts = (('dp4', 1, 1), ('tp4', 4, 1), ('sp4', 1, 4), ('dp2 x tp2', 2, 1),
               ('dp2 x sp2', 1, 2))
    for layout, tp, sp in () if args.only_deepspeed else layouts:
        ms, peak, rss, comm, params = run_ds(b, w, layout.replace(' ', ''), tp, args.steps, sp)
        print('%-26s %9.0f %15.1f %12.1f %12.0f %16.1f' % ('ds ' + layout, ms, params / 2**20,
                                                          peak / 2**20, rss / 2**20,
                                                          comm / 2**20))
    if args.no_deepspeed:
        return
    for layout, tp in (('tp4', 4), ('dp2 x tp2', 2)):
        r = run_deepspeed(w, tp, args.steps)
        name = 'DeepSpeed AutoTP ' + layout
        if isinstance(r, str):
            print('%-26s not run: %s' % (name, r))
        else:
            print('%-26s %9.0f %15s %12s %12.0f %16s' % (name, r[0], '-', '-', r[1] / 2**20, '-'))
    for layout in ('sp4', 'dp2 x sp2'):
        print('%-26s not run: DeepSpeed-Ulysses needs the model\'s attention wrapped in '
              'DistributedAttention by hand (no automatic path for this model)' %
              ('DeepSpeed Ulysses ' + layout))


if __name__ == '__main__':
    main()

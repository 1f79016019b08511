#!/usr/bin/python3
"""Pipeline parallelism at 4 ranks, side by side in one run: step time, per-rank peak memory
and the pipeline bubble of ds (`mpirun -np 4 ds-run`) for dp4, pp4 with 1F1B, pp4 interleaved
(2 chunks per rank) and dp2 x pp2, beside DeepSpeed's pipeline engine (the same GPT written
as a PipelineModule: an embedding tied to the LM head by TiedLayerSpec, the blocks, the final
norm; 1F1B, partition_method "parameters") where it runs on the CPU. The model is the GPT of
bench/mesh_gpt.py: d_model 512, 6 layers, 8 heads, seq 128, vocab 1024 (19.5M parameters),
global batch 16 in micro-batches of 4 (4 per step at pp4), AdamW, fp32, one thread per rank.

The bubble: the schedule's formula (p-1)/(m+p-1), or (p-1)/(v m+p-1) interleaved; the
compiler's prediction (`ds-opt --comm-report`: each rank's program simulated with its phases'
FLOPs), the mean over the ranks; and the measured one, each rank's time waiting for
communication over its time in the step's forward and backward (the log's wait_ms and
compute_ms), the mean over the ranks. On this 2-core machine 4 ranks share 2 cores, so the
measured wait also holds the time a rank waits for a core.

usage: /usr/bin/python3 bench/pipeline_gpt.py [--steps 7] [--build build] [--no-deepspeed]
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

RANKS, BATCH, MB, SEQ, VOCAB, D, LAYERS, HEADS = 4, 16, 4, 128, 1024, 512, 6, 8
MPIRUN = ['mpirun', '--allow-run-as-root', '--oversubscribe', '-np', str(RANKS)]

DEEPSPEED_WORKER = r'''
import json, os, sys, time, resource
os.environ.setdefault("DS_ACCELERATOR", "cpu")
import numpy as np
import torch, torch.nn as nn, torch.nn.functional as F, deepspeed
from deepspeed.pipe import PipelineModule, LayerSpec, TiedLayerSpec
sys.path.insert(0, sys.argv[1])
from make_models import Block, GPTConfig, LayerNorm
pp, steps, out = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
idx = torch.from_numpy(np.load(sys.argv[5]))
V, S, L, H, D, BATCH, MB = %d, %d, %d, %d, %d, %d, %d
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
torch.set_num_threads(1)
torch.manual_seed(0)
deepspeed.init_distributed(dist_backend="gloo")
cfg = GPTConfig(vocab_size=V, block_size=S, n_layer=L, n_head=H, n_embd=D)

class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, D)
        self.wpe = nn.Embedding(S, D)
    def forward(self, x):
        return self.wte(x) + self.wpe(torch.arange(x.size(1)))

def head(embed, x):
    return F.linear(x, embed.wte.weight)

def loss_fn(logits, y):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))

layers = ([TiedLayerSpec("embed", Embed, tied_weight_attr="wte.weight")] +
          [LayerSpec(Block, cfg) for _ in range(L)] + [LayerSpec(LayerNorm, D, True)] +
          [TiedLayerSpec("embed", Embed, forward_fn=head, tied_weight_attr="wte.weight")])
model = PipelineModule(layers=layers, num_stages=pp, loss_fn=loss_fn,
                       partition_method="parameters")
dp = world // pp
gas = BATCH // (MB * dp)
config = {"train_micro_batch_size_per_gpu": MB, "gradient_accumulation_steps": gas,
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
          "zero_optimization": {"stage": 0}, "steps_per_print": 1000}
engine, _, _, _ = deepspeed.initialize(model=model, config=config,
                                       model_parameters=[p for p in model.parameters()
                                                         if p.requires_grad])
d = engine.grid.get_data_parallel_id()
times = []
for s in range(steps):
    batches = []
    for k in range(gas):
        lo = s * BATCH + (k * dp + d) * MB
        x = idx[lo:lo + MB]
        batches.append((x, torch.roll(x, -1, 1)))
    t0 = time.time()
    engine.train_batch(data_iter=iter(batches))
    times.append((time.time() - t0) * 1000)
json.dump({"ms": times, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024},
          open("%%s.%%d.json" %% (out, rank), "w"))
''' % (VOCAB, SEQ, LAYERS, HEADS, D, BATCH, MB)

# (name, pp, dp, schedule, chunks per rank)
LAYOUTS = (('dp4', 1, 4, '', 1), ('pp4 1F1B', 4, 1, '1f1b', 1),
           ('pp4 interleaved v2', 4, 1, 'interleaved', 2), ('dp2 x pp2 1F1B', 2, 2, '1f1b', 1))


def run_ds(b, w, name, pp, dp, schedule, v, steps):
    tag = re.sub(r'\W+', '', name)
    gas = BATCH // (MB * dp)
    cfg = {'train_batch_size': BATCH, 'train_micro_batch_size_per_gpu': MB,
           'gradient_accumulation_steps': gas,
           'optimizer': {'type': 'AdamW', 'params': {'lr': 1e-4}}, 'steps_per_print': 1000}
    if pp > 1:
        cfg['pipeline'] = {'stages': pp, 'schedule': schedule, 'virtual_stages': v}
    json.dump(cfg, open(w('cfg-%s.json' % tag), 'w'))
    step = w('step-%s.mlir' % tag)
    subprocess.run([b('ds-opt'), w('gpt.pt'), '--input', 'idx=tensor<%dx%dxi64>' % (MB, SEQ),
                    '--input', 'targets=tensor<%dx%dxi64>' % (MB, SEQ), '--config',
                    w('cfg-%s.json' % tag), '-o', step], check=True, stderr=subprocess.DEVNULL)
    formula = predicted = None
    if pp > 1:
        comm = subprocess.run([b('ds-opt'), step, '--comm-report', '-o', os.devnull],
                              check=True, capture_output=True, text=True).stdout
        m = re.search(r'bubble: \S+ = ([0-9.]+); cost model per rank: ([0-9. ]+)', comm)
        formula = float(m.group(1))
        predicted = statistics.mean(float(x) for x in m.group(2).split())
    log = w('ds-%s.jsonl' % tag)
    subprocess.run(MPIRUN + [b('ds-run'), step, '--data', 'idx=' + w('idx.npy'), '--data',
                             'targets=' + w('targets.npy'), '--steps', str(steps),
                             '--threads', '1', '--log', log],
                   check=True, stdout=subprocess.DEVNULL)
    lines = [json.loads(l) for l in open(log)]
    ms = statistics.median(l['step_ms'] for l in lines[WARM:])
    peaks = [r['device_peak_bytes'] for r in lines[-1]['ranks']]
    measured = None
    if pp > 1:
        measured = statistics.median(
            statistics.mean(r['wait_ms'] / max(r['wait_ms'] + r['compute_ms'], 1e-9)
                            for r in l['ranks']) for l in lines[WARM:])
    return ms, peaks, lines[-1]['loss'], formula, predicted, measured


def run_deepspeed(w, pp, steps):
    """DeepSpeed's PipelineModule at pp (dp = 4 / pp), 4 processes; (ms, rss) or why not."""
    out = w('deepspeed-pp%d' % pp)
    args = [os.path.join(ROOT, 'test', 'models'), str(pp), str(steps), out, w('idx.npy')]
    return run_workers(DEEPSPEED_WORKER, w('ds_pipe_worker.py'), args, out, RANKS, 29547, steps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--steps', type=int, default=7)
    ap.add_argument('--build', default=os.path.join(ROOT, 'build'))
    ap.add_argument('--no-deepspeed', action='store_true')
    args = ap.parse_args()
    if args.steps < WARM + 1:
        ap.error('--steps must be at least %d (the median is over steps %d..N)' % (WARM + 1,
                                                                                   WARM + 1))
    b = lambda t: os.path.join(args.build, 'bin', t)
    work = tempfile.mkdtemp(prefix='ds-pipe-bench-')
    w = lambda f: os.path.join(work, f)
    n = export(w('gpt.pt'), D, LAYERS, HEADS, vocab=VOCAB, block=SEQ)
    rng = np.random.RandomState(0)
    idx = rng.randint(0, VOCAB, size=(args.steps * BATCH, SEQ)).astype(np.int64)
    np.save(w('idx.npy'), idx)
    np.save(w('targets.npy'), np.roll(idx, -1, axis=1))
    print('GPT d%d x %d layers, %d heads, seq %d, global batch %d in micro-batches of %d, '
          '%.1fM parameters, AdamW fp32, %d ranks x 1 thread, median of steps %d..%d'
          % (D, LAYERS, HEADS, SEQ, BATCH, MB, n / 1e6, RANKS, WARM + 1, args.steps))
    print('%-40s %8s %20s %8s %9s %9s %9s' % ('run', 'step ms', 'peak MiB per rank',
                                            'loss', 'bubble', 'predicted', 'measured'))
    for name, pp, dp, schedule, v in LAYOUTS:
        ms, peaks, loss, formula, predicted, measured = run_ds(b, w, name, pp, dp, schedule, v,
                                                                args.steps)
        fmt = lambda x: '%9.3f' % x if x is not None else '%9s' % '-'
        print('%-40s %8.0f %20s %8.4f %s %s %s' % (
            'ds ' + name, ms, ' '.join('%.0f' % (p / 2**20) for p in peaks), loss,
            fmt(formula), fmt(predicted), fmt(measured)))
    if args.no_deepspeed:
        return
    for name, pp in (('pp4 1F1B', 4), ('dp2 x pp2 1F1B', 2)):
        r = run_deepspeed(w, pp, args.steps)
        label = 'DeepSpeed PipelineModule ' + name
        if isinstance(r, str):
            print('%-40s not run: %s' % (label, r))
        else:
            print('%-40s %8.0f %20s (RSS %.0f MiB per process, at most; its own initial weights)' % (
                label, r[0], '-', r[1] / 2**20))


if __name__ == '__main__':
    main()

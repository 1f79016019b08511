#!/usr/bin/env python3
"""Mixture of experts at 4 ranks, side by side in one run: step time, per-rank peak memory and
all-to-all bytes of ds (`mpirun -np 4 ds-run`) at ep4, ep2 x dp2 and dp4, beside DeepSpeed
0.19's MoE (`deepspeed.moe.layer.MoE`, ep_size 4 and 2) and PyTorch eager under
DistributedDataParallel, from the project's .venv (scripts/setup.sh; 4 processes on gloo
started by bench/deepspeed_launch.py, DS_ACCELERATOR=cpu).

The model: HF's MixtralForCausalLM, d_model 512, 6 layers, 8 heads, 8 experts of SwiGLU
(intermediate 1024) per layer, top-2 routing renormalised, vocab 1024, seq 128, global batch
16 (4 per rank), AdamW lr 1e-4, one thread per rank, fp32, built under torch.manual_seed(0)
(the aux loss off: DeepSpeed's layer has its own). ds trains its torch.export (HF's batched_mm
experts, dropless as HF routes). PyTorch DDP trains the same module with HF's default experts.
DeepSpeed trains it with each layer's sparse block replaced by deepspeed.moe.layer.MoE over the
same 8 SwiGLU experts (its TopKGate, top-2, dropless: drop_tokens=False, no random token
selection or 2nd-expert sampling) at ZeRO stage 2 (DeepSpeed's MoE runs ZeRO 0-2; its
parameter groups split by split_params_into_different_moe_groups_for_optimizer).

Columns: the median step time over steps WARM+1..N (the slowest rank's), each rank's peak
(ds: its device arena, what the compiler plans; the others: peak RSS; ds-run's RSS too), and
the all-to-all bytes a rank sends per step: ds's from `ds-opt --comm-report` (the most a rank
can send, its receive buffers' worst case), DeepSpeed's counted at torch.distributed's
all_to_all_single (its [experts, capacity, d] buffers, all of them, as it passes them).

usage: .venv/bin/python bench/moe_ep.py [--steps 8] [--build build] [--only ds|others]
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
from deepspeed_launch import WARM, run_ds_commands, run_workers  # noqa: E402

RANKS, BATCH, SEQ, VOCAB = 4, 16, 128, 1024
D, LAYERS, HEADS, EXPERTS, TOP_K, FFN = 512, 6, 8, 8, 2, 1024
MPIRUN = ['mpirun', '--allow-run-as-root', '--oversubscribe', '-np', str(RANKS)]

# The model, as each side builds it (torch.manual_seed(0) first).
MODEL = r'''
import torch
from transformers import MixtralConfig, MixtralForCausalLM

class Loss(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
    def forward(self, input_ids, labels):
        return self.model(input_ids=input_ids, labels=labels, use_cache=False).loss

def mixtral(experts_implementation=None):
    cfg = MixtralConfig(vocab_size=%d, hidden_size=%d, intermediate_size=%d,
                        num_hidden_layers=%d, num_attention_heads=%d, num_key_value_heads=%d,
                        max_position_embeddings=%d, num_local_experts=%d,
                        num_experts_per_tok=%d, output_router_logits=False,
                        router_jitter_noise=0.0, attention_dropout=0.0,
                        **({"experts_implementation": experts_implementation}
                           if experts_implementation else {}))
    cfg._attn_implementation = "sdpa"
    return Loss(MixtralForCausalLM(cfg))
''' % (VOCAB, D, FFN, LAYERS, HEADS, HEADS, SEQ, EXPERTS, TOP_K)

EXPORT = MODEL + r'''
import sys
torch.manual_seed(0)
m = mixtral("batched_mm").train()
mb = %d
x = torch.zeros(mb, %d, dtype=torch.long)
ep = torch.export.export(m, (x, x))
torch.export.save(ep, sys.argv[1])
print(sum(p.numel() for p in m.parameters()))
''' % (BATCH // RANKS, SEQ)

# One rank of a .venv row: kind is ddp, or ds-moe-ep4 / ds-moe-ep2 (DeepSpeed's MoE layer).
WORKER = MODEL + r'''
import json, os, resource, sys, time, traceback
from datetime import timedelta
import numpy as np
import torch.distributed as dist

def last_words(kind, e, tb):  # the reason run_workers reports: the output's last line
    traceback.print_exception(kind, e, tb)
    sys.stderr.flush()
    print("%%s: %%s" %% (kind.__name__, " ".join(str(e).split())), flush=True)

kind, steps, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
idx, tgt = np.load(sys.argv[4]), np.load(sys.argv[5])
RANKS, BATCH = %d, %d
rank, mb = int(os.environ["RANK"]), BATCH // RANKS
timeout = timedelta(seconds=900)
torch.set_num_threads(1)
sent = [0]
if kind.startswith("ds-moe"):
    import deepspeed
    deepspeed.init_distributed(dist_backend="gloo", timeout=timeout)
    # Count what DeepSpeed's _AllToAll passes to torch.distributed (its MoE calls the module
    # attribute, so the wrapper sees every call).
    plain = dist.all_to_all_single
    def counted(output, input, *a, **k):
        sent[0] += input.numel() * input.element_size()
        return plain(output, input, *a, **k)
    dist.all_to_all_single = counted
else:
    dist.init_process_group("gloo", timeout=timeout)
sys.excepthook = last_words
torch.manual_seed(0)
model = mixtral().train()
if kind.startswith("ds-moe"):
    from deepspeed.moe.layer import MoE
    from deepspeed.moe.utils import split_params_into_different_moe_groups_for_optimizer
    ep = int(kind[len("ds-moe-ep"):])
    class SwiGLU(torch.nn.Module):  # one Mixtral expert, as HF's weights lay it out
        def __init__(self, d, f):
            super().__init__()
            self.gate_up = torch.nn.Linear(d, 2 * f, bias=False)
            self.down = torch.nn.Linear(f, d, bias=False)
        def forward(self, x):
            g, u = self.gate_up(x).chunk(2, dim=-1)
            return self.down(torch.nn.functional.silu(g) * u)
    class Block(torch.nn.Module):  # the sparse block's place: DeepSpeed's MoE layer
        def __init__(self, d, f, e, k):
            super().__init__()
            self.moe = MoE(hidden_size=d, expert=SwiGLU(d, f), num_experts=e, ep_size=ep, k=k,
                           drop_tokens=False, use_rts=False, top2_2nd_expert_sampling=False)
        def forward(self, x):
            return self.moe(x)[0]
    cfg = model.model.config
    for layer in model.model.model.layers:
        layer.mlp = Block(cfg.hidden_size, cfg.intermediate_size, cfg.num_local_experts,
                          cfg.num_experts_per_tok)
    groups = split_params_into_different_moe_groups_for_optimizer(
        {"params": list(model.parameters()), "name": "parameters"})
    opt = torch.optim.AdamW(groups, lr=1e-4, weight_decay=0.0)
    config = {"train_batch_size": BATCH, "train_micro_batch_size_per_gpu": mb,
              "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 2},
              "steps_per_print": 1000}
    engine, opt, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config)
    def step(x, y):
        engine.backward(engine(x, y))
        engine.step()
else:
    from torch.nn.parallel import DistributedDataParallel
    net = DistributedDataParallel(model, find_unused_parameters=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    def step(x, y):
        net(x, y).backward()
        opt.step()
        opt.zero_grad()

times, per_step = [], []
for s in range(steps):
    lo = s * BATCH + rank * mb
    x, y = torch.from_numpy(idx[lo:lo + mb]), torch.from_numpy(tgt[lo:lo + mb])
    before = sent[0]
    t0 = time.time()
    step(x, y)
    times.append((time.time() - t0) * 1000)
    per_step.append(sent[0] - before)
json.dump({"ms": times, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
           "a2a": per_step[-1]}, open("%%s.%%d.json" %% (out, rank), "w"))
dist.destroy_process_group()
''' % (RANKS, BATCH)


def run_ds(b, w, name, ep, stage, steps):
    """One ds row: (median step ms, device arena peak, host peak, all-to-all bytes a rank
    sends at most per step), the largest over the ranks, or why it did not run."""
    mb = BATCH // RANKS
    cfg = {'train_batch_size': BATCH, 'train_micro_batch_size_per_gpu': mb,
           'gradient_accumulation_steps': 1,
           'optimizer': {'type': 'AdamW', 'params': {'lr': 1e-4}},
           'zero_optimization': {'stage': stage}, 'steps_per_print': 1000}
    if ep > 1:
        cfg['expert_parallel'] = {'enabled': True, 'autoep_size': ep}
    tag = '-ep%d-zero%d' % (ep, stage)
    json.dump(cfg, open(w('cfg%s.json' % tag), 'w'))
    log, step = w('ds%s.jsonl' % tag), w('step%s.mlir' % tag)
    failed = run_ds_commands([
        [b('ds-opt'), w('moe.pt2'), '--input', 'input_ids=tensor<%dx%dxi64>' % (mb, SEQ),
         '--input', 'labels=tensor<%dx%dxi64>' % (mb, SEQ), '--config', w('cfg%s.json' % tag),
         '-o', step],
        MPIRUN + [b('ds-run'), step, '--data', 'input_ids=' + w('idx.npy'), '--data',
                  'labels=' + w('labels.npy'), '--steps', str(steps), '--threads', '1',
                  '--log', log]])
    if failed:
        return failed
    lines = [json.loads(l) for l in open(log)]
    last = lines[-1]['ranks']
    report = subprocess.run([b('ds-opt'), step, '--comm-report'], capture_output=True,
                            text=True).stdout
    # Rows "axis  collective  calls  bytes" of the expert exchange, per micro-step (one here).
    a2a = sum(int(m.group(1)) for m in re.finditer(
        r'^\S+\s+expert_(?:route|dispatch|combine)\s+\d+\s+(\d+)', report, re.M))
    return (statistics.median(l['step_ms'] for l in lines[WARM:]),
            max(r['device_peak_bytes'] for r in last), max(r['host_peak_bytes'] for r in last),
            a2a)


def run_venv(kind, w, steps, port):
    """A .venv row: (median step ms, peak RSS, all-to-all bytes per step) or why not."""
    out = w('venv-' + kind)
    got = run_workers(WORKER, w('moe_worker.py'),
                      [kind, str(steps), out, w('idx.npy'), w('labels.npy')], out, RANKS, port,
                      steps, needs='deepspeed' if kind.startswith('ds-moe') else 'torch',
                      warm=WARM)
    if isinstance(got, str):
        return got
    ranks = [json.load(open('%s.%d.json' % (out, r))) for r in range(RANKS)]
    return got[0], got[1], max(r['a2a'] for r in ranks)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--steps', type=int, default=8)
    ap.add_argument('--build', default=os.path.join(ROOT, 'build'))
    ap.add_argument('--only', choices=['ds', 'others'], default=None)
    args = ap.parse_args()
    if args.steps < WARM + 1:
        ap.error('--steps must be at least %d' % (WARM + 1))
    b = lambda t: os.path.join(args.build, 'bin', t)
    work = tempfile.mkdtemp(prefix='ds-moe-bench-')
    w = lambda f: os.path.join(work, f)
    py = os.path.join(ROOT, '.venv', 'bin', 'python')
    open(w('export.py'), 'w').write(EXPORT)
    n = int(subprocess.run([py, w('export.py'), w('moe.pt2')], check=True, capture_output=True,
                           text=True).stdout.split()[-1])
    rng = np.random.RandomState(0)
    idx = rng.randint(0, VOCAB, size=(args.steps * BATCH, SEQ)).astype(np.int64)
    np.save(w('idx.npy'), idx)
    np.save(w('labels.npy'), idx)  # HF shifts the labels inside
    print('MoE GPT (HF Mixtral) d%d x %d layers, %d experts top-%d (SwiGLU %d), seq %d, global '
          'batch %d (%d per rank), %.1fM parameters, AdamW fp32, %d ranks x 1 thread, median of '
          'steps %d..%d' % (D, LAYERS, EXPERTS, TOP_K, FFN, SEQ, BATCH, BATCH // RANKS, n / 1e6,
                            RANKS, WARM + 1, args.steps))
    rows = {}
    if args.only != 'others':
        for name, ep, stage in (('ds ep4 ZeRO-1', 4, 1), ('ds ep4 ZeRO-3', 4, 3),
                                ('ds ep2 x dp2 ZeRO-1', 2, 1), ('ds ep2 x dp2 ZeRO-3', 2, 3),
                                ('ds dp4 ZeRO-3', 1, 3)):
            rows[name] = run_ds(b, w, name, ep, stage, args.steps)
    if args.only != 'ds':
        for i, (kind, name) in enumerate((('ds-moe-ep4', 'DeepSpeed MoE ep_size 4 ZeRO-2'),
                                          ('ds-moe-ep2', 'DeepSpeed MoE ep_size 2 ZeRO-2'),
                                          ('ddp', 'PyTorch eager DDP'))):
            got = run_venv(kind, w, args.steps, 29611 + i)
            rows[name] = got if isinstance(got, str) else (got[0], None, got[1], got[2])
    print('%-32s %10s %14s %12s %16s' % ('run', 'step ms', 'peak MiB', 'RSS MiB',
                                         'all-to-all MiB'))
    for name, row in rows.items():
        if isinstance(row, str):
            print('%-32s not run: %s' % (name, row))
            continue
        ms, peak, rss, a2a = row
        print('%-32s %10.0f %14s %12.0f %16s' % (
            name, ms, '%.1f' % (peak / 2**20) if peak else '-', rss / 2**20,
            '%.2f' % (a2a / 2**20) if a2a else '-'))
    best = lambda prefix: min((r[0], k) for k, r in rows.items()
                              if k.startswith(prefix) and isinstance(r, tuple)) \
        if any(k.startswith(prefix) and isinstance(r, tuple) for k, r in rows.items()) else None
    ds, theirs, ddp = best('ds '), best('DeepSpeed'), best('PyTorch')
    if ds and (theirs or ddp):
        other = theirs or ddp
        print("ds's best (%s) / %s's best (%s) step time: %.2fx (goal <= 0.5x)" % (
            ds[1], 'DeepSpeed' if theirs else 'PyTorch DDP', other[1], ds[0] / other[0]))
    if ds and ddp:
        print("ds's best / PyTorch eager DDP step time: %.2fx" % (ds[0] / ddp[0]))


if __name__ == '__main__':
    main()

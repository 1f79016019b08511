#!/usr/bin/env python3
"""The longest sequence that trains one step within a memory budget (issue 44).

A Llama-style model (d 256, intermediate 1024, 4 layers, 8 heads over 2 key/value heads of 32,
vocabulary 32000, untied embeddings: 20.2M parameters; RMSNorm, rotary positions, SwiGLU,
F.scaled_dot_product_attention with is_causal) at batch 1, one AdamW step, each trial in a
fresh process. The measure, the same for every side: the growth of the process's peak
resident memory over its resident memory just before the first step (the model, its
optimizer and the compiled step already made; /proc/self/clear_refs resets VmHWM there).

Sides: `ds` (ds.initialize, this tree's build: fused attention and the LM head's loss in
tiles of 512 rows, sequence_tiling.loss_tiles), `ds-ckpt` (that and DeepSpeed's
activation_checkpointing: each layer recomputed in the backward), `ds-alst` (that and the
MLPs in tiles, sequence_tiling.mlp_tiles "auto": ALST's recipe), `ds-untiled` (fused
attention only), `torch` (PyTorch eager, SDPA on its CPU flash kernel), `deepspeed-alst`
(PyTorch eager with DeepSpeed's ALST pieces on one rank: TiledMLP, TiledFusedLogitsLoss and
checkpointed layers; `pip install deepspeed`, which scripts/setup.sh does). For each, lengths
double from --start until the step no longer fits --budget-mib, then a bisection to --step
tokens; three lengths at the end give the growth per token (a straight line: within 5%?).
`--speed N` instead times the steady fp32 step at N tokens, ds beside PyTorch. `--sp N` adds
the sequence-parallel row: ds-alst at N times its single-rank length on N ranks (ds-launch),
whose per-rank growth should stay the single rank's; `--sp-sides ds-alst,deepspeed-alst-hf`
adds DeepSpeed's whole ALST beside it: UlyssesSPAttentionHF over N ranks (torch.distributed
on gloo), TiledMLP, TiledFusedLogitsLoss and HF's gradient checkpointing on HF's
LlamaForCausalLM of the same shapes (Ulysses wraps HF's attention, not a plain module).

usage: .venv/bin/python bench/long_sequence.py [--sides ds-alst,torch] [--budget-mib 1024]
       [--start 1024] [--step 512] [--threads 2]
       .venv/bin/python bench/long_sequence.py --sides '' --sp 4 --sp-base 32768  (the sp row)
       .venv/bin/python bench/long_sequence.py --sides '' --sp 2 --sp-base 8192 \
           --sp-sides ds-alst,deepspeed-alst-hf
       .venv/bin/python bench/long_sequence.py --trial ds --seq 4096   (one trial)
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SIDES = ('ds', 'ds-ckpt', 'ds-alst', 'ds-untiled', 'torch', 'deepspeed-alst',
         'deepspeed-alst-hf')


def build_model():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    D, INTER, LAYERS, HEADS, KV, VOCAB = 256, 1024, 4, 8, 2, 32000
    HD = D // HEADS

    def rotate_half(x):
        x1, x2 = x[..., : HD // 2], x[..., HD // 2:]
        return torch.cat((-x2, x1), dim=-1)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = nn.RMSNorm(D, eps=1e-6)
            self.q = nn.Linear(D, HEADS * HD, bias=False)
            self.k = nn.Linear(D, KV * HD, bias=False)
            self.v = nn.Linear(D, KV * HD, bias=False)
            self.o = nn.Linear(HEADS * HD, D, bias=False)
            self.norm2 = nn.RMSNorm(D, eps=1e-6)
            self.gate = nn.Linear(D, INTER, bias=False)
            self.up = nn.Linear(D, INTER, bias=False)
            self.down = nn.Linear(INTER, D, bias=False)

        def forward(self, x, cos, sin):
            B, T, _ = x.shape
            h = self.norm1(x)
            q = self.q(h).view(B, T, HEADS, HD).transpose(1, 2)
            k = self.k(h).view(B, T, KV, HD).transpose(1, 2)
            v = self.v(h).view(B, T, KV, HD).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            # HF's repeat_kv: PyTorch's CPU flash kernel then takes every head.
            k = k.repeat_interleave(HEADS // KV, dim=1)
            v = v.repeat_interleave(HEADS // KV, dim=1)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.o(a.transpose(1, 2).reshape(B, T, D))
            return x + self.mlp(self.norm2(x))

        def mlp(self, h):
            return self.down(F.silu(self.gate(h)) * self.up(h))

    class LlamaStyle(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, D)
            self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
            self.norm = nn.RMSNorm(D, eps=1e-6)
            self.head = nn.Linear(D, VOCAB, bias=False)
            self.checkpointing = False  # each layer under torch.utils.checkpoint

        def forward(self, input_ids, labels):
            T = input_ids.shape[1]
            inv = 1.0 / (10000 ** (torch.arange(0, HD, 2, dtype=torch.float32) / HD))
            f = torch.outer(torch.arange(T, dtype=torch.float32), inv)
            emb = torch.cat((f, f), dim=-1)
            cos, sin = emb.cos(), emb.sin()
            x = self.embed(input_ids)
            for layer in self.layers:
                if self.checkpointing:
                    x = torch.utils.checkpoint.checkpoint(layer, x, cos, sin, use_reentrant=False)
                else:
                    x = layer(x, cos, sin)
            return self.loss(self.norm(x), labels)

        def loss(self, h, labels):
            return F.cross_entropy(self.head(h).view(-1, VOCAB), labels.view(-1))

    torch.manual_seed(0)
    return LlamaStyle(), VOCAB


def status(key):
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith(key + ':'):
                return int(line.split()[1]) * 1024
    return 0


def trial(side, seq, threads, steps=1, sp=1):
    """One step at `seq` tokens; prints a JSON line with the growth in bytes (under mpirun
    with sp ranks: one line per rank, each of its own process)."""
    import torch
    torch.set_num_threads(threads)
    model, vocab = build_model()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (1, seq), generator=g)
    labels = torch.randint(0, vocab, (1, seq), generator=g)
    t0 = time.time()
    if side == 'deepspeed-alst':
        deepspeed_alst(model, seq)
    if side in ('torch', 'deepspeed-alst'):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step():
            loss = model(ids, labels)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss.item()
    else:
        sys.path.insert(0, os.path.join(ROOT, 'build', 'python'))
        import ds
        config = {"train_micro_batch_size_per_gpu": 1,
                  "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}
        rows = seq // sp  # a rank's rows of the sequence
        if side in ('ds', 'ds-ckpt', 'ds-alst') and rows > 512:
            config["sequence_tiling"] = {"loss_tiles": rows // 512}
        if side == 'ds-alst' and rows > 512:
            config["sequence_tiling"]["mlp_tiles"] = "auto"
        if sp > 1:
            config["sequence_parallel_size"] = sp
        if side in ('ds-ckpt', 'ds-alst'):
            config["activation_checkpointing"] = {}
        engine, *_ = ds.initialize(model=model, config=config, threads=threads,
                                   example_inputs={"input_ids": ids, "labels": labels})

        def step():
            return float(engine.train_batch([{"input_ids": ids, "labels": labels}]))
    measure(step, steps, {'side': side, 'seq': seq, 'sp': sp,
                          'setup_s': round(time.time() - t0, 1)})


def measure(step, steps, row):
    """Runs `step` `steps` times and prints `row` as a JSON line with the growth of the peak
    resident memory over the first step (VmHWM reset just before it), its loss and time, and
    the median time of the steps after it (--steps > 1)."""
    with open('/proc/self/clear_refs', 'w') as f:
        f.write('5')
    before = status('VmRSS')
    t1 = time.time()
    loss = step()
    peak = status('VmHWM')
    first = time.time() - t1
    times = []
    for _ in range(steps - 1):
        t2 = time.time()
        step()
        times.append(time.time() - t2)
    print(json.dumps(dict(row, growth=peak - before, loss=loss, step_s=round(first, 2),
                          steady_s=round(sorted(times)[len(times) // 2], 3) if times else None)),
          flush=True)


def deepspeed_alst(model, seq):
    """DeepSpeed's ALST on one rank, as its Arctic recipe applies it to a HF model: each MLP
    through deepspeed's TiledMLP (ceil(seq / hidden) shards), the LM head and the loss through
    TiledFusedLogitsLoss (tiles of 512 rows, as ds's), each layer under activation
    checkpointing (torch.utils.checkpoint, as HF's gradient_checkpointing). Ulysses
    (UlyssesSPAttentionHF) has nothing to split on one rank."""
    import math
    from deepspeed.runtime.sequence_parallel.ulysses_sp import TiledFusedLogitsLoss, TiledMLP
    hidden = model.head.weight.shape[1]
    for layer in model.layers:
        def tiled_mlp(h, layer=layer):
            fn = type(layer).mlp
            params = [layer.gate.weight, layer.up.weight, layer.down.weight]
            return TiledMLP.apply(fn, layer, h, math.ceil(seq / hidden), params)
        layer.mlp = tiled_mlp
    loss_fn = type(model).loss

    def tiled_loss(h, labels):
        return TiledFusedLogitsLoss.apply(loss_fn, model, h, labels, None, max(1, seq // 512),
                                          [model.head.weight], "mean")
    model.loss = tiled_loss
    model.checkpointing = True


def deepspeed_alst_hf(seq, threads, steps, sp):
    """DeepSpeed's ALST as its Arctic recipe runs it on an HF model, at sp ranks: the bench's
    architecture as HF's LlamaForCausalLM (same shapes, 20.2M parameters, SDPA),
    UlyssesSPAttentionHF (registered with transformers over the sp group: q, k, v and the
    output exchanged all-to-all), TiledMLP on each LlamaMLP, TiledFusedLogitsLoss for the LM
    head and the loss, HF's gradient checkpointing, the gradients all-reduced over the ranks
    (DeepSpeed's data parallelism over the sp group, stage 0). Each rank feeds its part of the
    sequence with its global position_ids and its part of the labels shifted as a whole
    (ALST's shift_labels); the loss is the ranks' mean. Started by torch.distributed.run (gloo);
    one JSON line per rank (measure())."""
    import math
    import torch
    import deepspeed
    import deepspeed.comm as dist
    from deepspeed.runtime.sequence_parallel.ulysses_sp import (TiledFusedLogitsLoss, TiledMLP,
                                                                UlyssesSPAttentionHF)
    from transformers import LlamaConfig, LlamaForCausalLM
    t0 = time.time()
    torch.set_num_threads(threads)
    if sp > 1:
        deepspeed.init_distributed(dist_backend='gloo')
    rank = dist.get_rank() if sp > 1 else 0
    cfg = LlamaConfig(vocab_size=32000, hidden_size=256, intermediate_size=1024,
                      num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
                      max_position_embeddings=seq, tie_word_embeddings=False,
                      attn_implementation='sdpa')
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg)
    model.train()
    if sp > 1:
        UlyssesSPAttentionHF.register_with_transformers(
            model, core_attn_implementation='sdpa', sequence_parallel_size=sp,
            micro_batch_size=1, seq_length=seq, seq_length_is_variable=False)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={'use_reentrant': False})
    hidden = cfg.hidden_size
    for layer in model.model.layers:
        mlp = layer.mlp

        def tiled(x, mlp=mlp):
            return TiledMLP.apply(type(mlp).forward, mlp, x, math.ceil(x.shape[1] / hidden),
                                  [mlp.gate_proj.weight, mlp.up_proj.weight,
                                   mlp.down_proj.weight])
        mlp.forward = tiled

    def head_loss(self, h, labels):
        logits = self.lm_head(h).float()
        return torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]),
                                                 labels.view(-1), ignore_index=-100)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, cfg.vocab_size, (1, seq), generator=g)
    labels = torch.randint(0, cfg.vocab_size, (1, seq), generator=g)
    shifted = torch.cat([labels[:, 1:], torch.full((1, 1), -100)], dim=1)
    part = seq // sp
    mine = slice(rank * part, (rank + 1) * part)
    ids_r, shifted_r = ids[:, mine], shifted[:, mine]
    pos = torch.arange(rank * part, (rank + 1) * part).unsqueeze(0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        h = model.model(input_ids=ids_r, position_ids=pos).last_hidden_state
        loss = TiledFusedLogitsLoss.apply(head_loss, model, h, shifted_r, None,
                                          max(1, part // 512), [model.lm_head.weight], "mean")
        loss.backward()
        if sp > 1:
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p.grad.div_(sp)
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            loss = mean / sp
        opt.step()
        opt.zero_grad(set_to_none=True)
        return float(loss.detach())
    measure(step, steps, {'side': 'deepspeed-alst-hf', 'seq': seq, 'sp': sp, 'rank': rank,
                          'setup_s': round(time.time() - t0, 1)})


def run_trial(side, seq, threads, steps=1, sp=1):
    """One trial in fresh processes; under sp the largest growth of the sp ranks."""
    cmd = [sys.executable, os.path.abspath(__file__), '--trial', side, '--seq', str(seq),
           '--threads', str(threads), '--steps', str(steps), '--sp', str(sp)]
    if sp > 1 and side == 'deepspeed-alst-hf':
        cmd = [sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node', str(sp),
               '--master_port', '29517'] + cmd[1:]
    elif sp > 1:
        cmd = [os.path.join(os.path.dirname(sys.executable), 'ds-launch'), '-np', str(sp)] + cmd[1:]
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, 'build', 'python'))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    # The ranks' lines may arrive joined: every JSON object in the output.
    rows, dec, i = [], json.JSONDecoder(), p.stdout.find('{')
    while i >= 0:
        r, end = dec.raw_decode(p.stdout, i)
        rows.append(r)
        i = p.stdout.find('{', end)
    if len(rows) == sp:
        return max(rows, key=lambda r: r['growth'])
    tail = (p.stderr or p.stdout)[-400:]
    return {'side': side, 'seq': seq, 'growth': None, 'error': tail}


def fits(r, budget):
    return r['growth'] is not None and r['growth'] <= budget


def longest(side, budget, start, step, threads, log):
    seq, best, worst = start, None, None
    while True:
        r = run_trial(side, seq, threads)
        log(r)
        if fits(r, budget):
            best, seq = seq, seq * 2
        else:
            worst = seq
            break
    lo, hi = best or 0, worst
    while hi - lo > step:
        mid = (lo + hi) // 2 // step * step
        if mid <= lo:
            break
        r = run_trial(side, mid, threads)
        log(r)
        if fits(r, budget):
            lo = mid
        else:
            hi = mid
    return lo


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--trial')
    ap.add_argument('--seq', type=int)
    ap.add_argument('--sides', default='ds-alst,ds,ds-untiled,torch')
    ap.add_argument('--budget-mib', type=int, default=1024)
    ap.add_argument('--start', type=int, default=1024)
    ap.add_argument('--step', type=int, default=512)
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--sp', type=int, default=1,
                    help='the sequence-parallel row: ds-alst at SP x its single-rank length under '
                         'ds-launch -np SP (sequence_parallel_size SP) beside the single rank; '
                         'with --trial, the trial under SP ranks')
    ap.add_argument('--sp-sides', default='ds-alst',
                    help='the sides of the sp row: ds-alst, deepspeed-alst-hf (DeepSpeed\'s '
                         'ALST with UlyssesSPAttentionHF on HF\'s LlamaForCausalLM, gloo)')
    ap.add_argument('--sp-base', type=int, default=0,
                    help='the single-rank length of the sp row (default: the longest ds-alst '
                         'found by this run; with --sides "" only the row runs)')
    ap.add_argument('--steps', type=int, default=1, help='steps of a trial (the median of '
                    'those after the first is its steady step time)')
    ap.add_argument('--speed', type=int, default=0,
                    help='instead: the steady step time at this length, ds-untiled (fused '
                         'attention, a plain config) beside torch, at 1 and 2 threads')
    a = ap.parse_args()
    named = ([a.trial] if a.trial else []) + [x for x in a.sides.split(',') if x] + \
        ([x for x in a.sp_sides.split(',') if x] if a.sp > 1 else [])
    unknown = [x for x in named if x not in SIDES]
    if unknown:
        ap.error(f'unknown side {", ".join(unknown)} (the sides: {", ".join(SIDES)})')
    if a.trial == 'deepspeed-alst-hf':
        deepspeed_alst_hf(a.seq, a.threads, a.steps, a.sp)
        return 0
    if a.trial:
        trial(a.trial, a.seq, a.threads, a.steps, a.sp)
        return 0
    if a.speed:
        print(f'cpu: {cpu_name()}; steady fp32 step at {a.speed} tokens (median of 3 after '
              f'the first)')
        for threads in (1, 2):
            r = {side: run_trial(side, a.speed, threads, 4) for side in ('ds-untiled', 'torch')}
            d, t = r['ds-untiled'].get('steady_s'), r['torch'].get('steady_s')
            if d is None or t is None:
                print(f'  {threads} thread(s): a trial failed: {r}')
                continue
            print(f'  {threads} thread(s): ds {d:.3f} s, PyTorch eager {t:.3f} s, '
                  f'ds/torch {d / t:.2f}')
        return 0
    budget = a.budget_mib << 20
    print(f'cpu: {cpu_name()}; budget {a.budget_mib} MiB of peak growth; {a.threads} threads')

    def log(r):
        g = r['growth']
        print(f"  {r['side']:6s} seq {r['seq']:7d}: " +
              (f"{g / 2**20:8.1f} MiB, step {r['step_s']} s, loss {r['loss']:.4f}" if g is not None
               else 'failed: ' + r['error'].strip().splitlines()[-1]), flush=True)
    results = {}
    for side in filter(None, a.sides.split(',')):
        results[side] = longest(side, budget, a.start, a.step, a.threads, log)
    print('\nlongest sequence that trains one step within the budget:')
    base = results.get('torch')
    for side, n in results.items():
        ratio = f'  ({n / base:.1f}x PyTorch eager)' if base and side != 'torch' else ''
        print(f'  {side:6s} {n:7d} tokens{ratio}')
    if a.sp > 1:
        for side in a.sp_sides.split(','):
            sp_row(a.sp, a.sp_base or results.get(side, 0), budget, a.threads, side)
    # Growth per token: three lengths up to the longest that fits, on a line?
    for side, n in results.items():
        pts = [run_trial(side, s, a.threads) for s in (n // 4, n // 2, n)]
        if any(p['growth'] is None for p in pts):
            continue
        (x0, y0), (x1, y1), (x2, y2) = [(p['seq'], p['growth']) for p in pts]
        slope = (y2 - y0) / (x2 - x0)
        mid = y0 + slope * (x1 - x0)
        print(f'  {side:6s} {slope / 1024:.1f} KiB per token; middle point off the line by '
              f'{abs(y1 - mid) / y1 * 100:.1f}%')
    return 0


def sp_row(sp, base, budget, threads, side='ds-alst'):
    """`side` at sp x `base` tokens on sp ranks beside `base` tokens on one rank: the
    per-rank growth (the largest of the ranks') should stay the single rank's."""
    if not base:
        print('sp row: no single-rank length (give --sp-base or include ds-alst in --sides)')
        return
    one = run_trial(side, base, threads)
    many = run_trial(side, base * sp, max(1, threads // sp), sp=sp)
    if one['growth'] is None or many['growth'] is None:
        print(f'sp row ({side}): a trial failed: {one if one["growth"] is None else many}')
        return
    g1, gn = one['growth'] / 2**20, many['growth'] / 2**20
    print(f'\n{side} sp{sp} on {sp} ranks at {base * sp} tokens: {gn:.1f} MiB per rank (the most '
          f'of the ranks), step {many["step_s"]} s; one rank at {base} tokens: {g1:.1f} MiB; '
          f'ratio {gn / g1:.3f}; within the budget: {"yes" if many["growth"] <= budget else "no"}')


def cpu_name():
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return 'unknown CPU'


if __name__ == '__main__':
    sys.exit(main())

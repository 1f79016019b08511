#!/usr/bin/python3
"""ZeRO stages at 4 ranks, side by side in one run: step time and per-rank memory of ds
(`mpirun -np 4 ds-run`, ZeRO stages 0-3 with DeepSpeed's default buckets and persistence
threshold) beside PyTorch DDP and
ZeroRedundancyOptimizer on gloo (Debian's torch 1.13, 4 processes started with
torch.multiprocessing as FACTS.md says), for the same model, batch and optimizer: a GPT with
d_model 512, 6 layers, 8 heads, seq 128, vocab 1024 (19.5M parameters), global batch 16 (4 per
rank), AdamW, one thread per rank, ds in fp32 and in bf16 (DeepSpeed's bf16 section: 16-bit
parameters, activations, gradients and communication, fp32 masters and moments); PyTorch in
fp32. LibTorch gets OpenBLAS (bench/train_gpt.py).

ds reports its device arena's peak (what the compiler's plan predicts exactly) and the model
state it allocates (parameters + gradients + optimizer state); PyTorch reports the process's
peak RSS, so the RSS of ds-run is printed too.

usage: /usr/bin/python3 bench/zero_gpt.py [--steps 5] [--build build]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from train_gpt import OPENBLAS_DIR, ensure_openblas, export  # noqa: E402

RANKS, BATCH, SEQ, VOCAB = 4, 16, 128, 1024
MPIRUN = ['mpirun', '--allow-run-as-root', '--oversubscribe', '-np', str(RANKS)]


def torch_worker(rank, kind, pt, idx, tgt, steps, out):
    """One rank of PyTorch DDP (kind 'ddp') or DDP + ZeroRedundancyOptimizer ('zero')."""
    import torch.distributed as dist
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT='29533')
    dist.init_process_group('gloo', rank=rank, world_size=RANKS)
    model = DDP(torch.jit.load(pt).train())
    if kind == 'zero':
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW,
                                      lr=1e-4)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    mb = BATCH // RANKS
    times = []
    for s in range(steps):
        t0 = time.time()
        lo = s * BATCH + rank * mb
        x = torch.from_numpy(idx[lo:lo + mb])
        y = torch.from_numpy(tgt[lo:lo + mb])
        out_ = model(x, y)
        loss = out_[1] if isinstance(out_, tuple) else out_
        loss.backward()
        opt.step()
        opt.zero_grad()
        times.append((time.time() - t0) * 1000)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    state = sum(p.numel() * 4 * 2 for p in model.parameters())  # parameters + gradients
    for st in getattr(opt, 'optim', opt).state.values():  # ZeRO: the local shard's optimizer
        state += sum(v.numel() * v.element_size() for v in st.values() if torch.is_tensor(v) and
                     v.dim() > 0)
    json.dump({'ms': times, 'rss': rss, 'state': state}, open('%s.%d.json' % (out, rank), 'w'))
    dist.destroy_process_group()


def run_torch(kind, pt, idx, tgt, steps, work):
    import torch.multiprocessing as mp
    out = os.path.join(work, kind)
    mp.spawn(torch_worker, args=(kind, pt, idx, tgt, steps, out), nprocs=RANKS, join=True)
    ranks = [json.load(open('%s.%d.json' % (out, r))) for r in range(RANKS)]
    ms = statistics.median(max(r['ms'][s] for r in ranks) for s in range(1, steps))
    return ms, [r['rss'] for r in ranks], [r['state'] for r in ranks]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--steps', type=int, default=5)
    ap.add_argument('--build', default=os.path.join(HERE, '..', 'build'))
    args = ap.parse_args()
    ensure_openblas()
    b = lambda t: os.path.join(args.build, 'bin', t)
    work = tempfile.mkdtemp(prefix='ds-zero-bench-')
    w = lambda f: os.path.join(work, f)
    n = export(w('gpt.pt'), 512, 6, 8, vocab=VOCAB, block=SEQ)
    rng = np.random.RandomState(0)
    idx = rng.randint(0, VOCAB, size=(args.steps * BATCH, SEQ)).astype(np.int64)
    tgt = np.roll(idx, -1, axis=1)
    np.save(w('idx.npy'), idx)
    np.save(w('targets.npy'), tgt)
    mb = BATCH // RANKS

    print('GPT d512 x 6 layers, seq %d, global batch %d (%d per rank), %.1fM parameters, '
          'AdamW, %d ranks x 1 thread, median of steps 2..%d' % (SEQ, BATCH, mb, n / 1e6, RANKS,
                                                                args.steps))
    print('%-32s %10s %16s %14s %14s' % ('run', 'step ms', 'model state MiB', 'peak MiB',
                                         'RSS MiB'))
    rows = {}
    # Stage 3 with DeepSpeed's defaults keeps this model gathered from the start of forward to
    # the end of backward (one 5e8-element bucket, prefetch 5e7, reuse distance 1e9); "3 lean"
    # trades communication for memory: 2e6-element buckets, prefetch of one, no reuse.
    lean = {'reduce_bucket_size': 2000000, 'stage3_prefetch_bucket_size': 2000000,
            'stage3_max_reuse_distance': 0}
    for precision, stage in [(p, s) for p in ('fp32', 'bf16') for s in (0, 1, 2, 3, '3 lean')]:
        zero = dict({'stage': 3}, **lean) if stage == '3 lean' else {'stage': stage}
        cfg = {'train_batch_size': BATCH, 'train_micro_batch_size_per_gpu': mb,
               'gradient_accumulation_steps': 1,
               'optimizer': {'type': 'AdamW', 'params': {'lr': 1e-4}},
               'zero_optimization': zero, 'steps_per_print': 1000}
        if precision == 'bf16':
            cfg['bf16'] = {'enabled': True}
        tag = '%s%s' % (precision, str(stage).replace(' ', ''))
        json.dump(cfg, open(w('cfg%s.json' % tag), 'w'))
        subprocess.run([b('ds-opt'), w('gpt.pt'), '--input', 'idx=tensor<%dx%dxi64>' % (mb, SEQ),
                        '--input', 'targets=tensor<%dx%dxi64>' % (mb, SEQ), '--config',
                        w('cfg%s.json' % tag), '-o', w('step%s.mlir' % tag)], check=True)
        log = w('ds%s.jsonl' % tag)
        subprocess.run(MPIRUN + [b('ds-run'), w('step%s.mlir' % tag), '--data',
                                 'idx=' + w('idx.npy'), '--data', 'targets=' + w('targets.npy'),
                                 '--steps', str(args.steps), '--threads', '1', '--log', log],
                       check=True, stdout=subprocess.DEVNULL)
        lines = [json.loads(l) for l in open(log)]
        ms = statistics.median(l['step_ms'] for l in lines[1:])
        last = lines[-1]['ranks']
        rows['ds %s ZeRO stage %s' % (precision, stage)] = (ms, max(r['model_state_bytes'] for r in last),
                                            max(r['device_peak_bytes'] for r in last),
                                            max(r['host_peak_bytes'] for r in last))
    for kind, name in (('ddp', 'PyTorch DDP (gloo)'), ('zero', 'PyTorch DDP + ZeroRedundancyOpt')):
        os.environ['LD_LIBRARY_PATH'] = OPENBLAS_DIR
        ms, rss, state = run_torch(kind, w('gpt.pt'), idx, tgt, args.steps, work)
        rows[name] = (ms, max(state), None, max(rss))
    base = rows['PyTorch DDP (gloo)'][0]
    for name, (ms, state, peak, rss) in rows.items():
        print('%-32s %10.0f %16.1f %14s %14.0f   %.2fx DDP time' % (
            name, ms, state / 2**20, '%.1f' % (peak / 2**20) if peak else '-', rss / 2**20,
            ms / base))
    s0 = rows['ds fp32 ZeRO stage 0'][0]
    for name in ('3', '3 lean'):
        ms3 = rows['ds fp32 ZeRO stage %s' % name][0]
        print('ds stage %s / ds stage 0 step time (fp32): %.2fx (goal <= 1.15x); / PyTorch DDP: '
              '%.2fx (goal < 1)' % (name, ms3 / s0, ms3 / base))
    best = min(rows['ds bf16 ZeRO stage %d' % s][0] for s in range(4))
    print('ds bf16 (best stage) / PyTorch fp32 DDP step time: %.2fx (goal <= 0.2x: needs bf16 '
          'matrix units; this CPU %s)' % (best / base, 'has them' if has_bf16_units()
                                          else 'has none, so bf16 computes in f32'))


def has_bf16_units():
    """Whether the CPU has bf16 dot-product or matrix instructions (AVX512_BF16 or AMX)."""
    flags = open('/proc/cpuinfo').read()
    return 'avx512_bf16' in flags or 'amx_bf16' in flags


if __name__ == '__main__':
    main()

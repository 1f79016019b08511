#!/usr/bin/python3
"""ZeRO stages at 4 ranks, side by side in one run: step time and per-rank memory of ds
(`mpirun -np 4 ds-run`, ZeRO stages 0-3 with DeepSpeed's default buckets and persistence
threshold) beside PyTorch 2.x and DeepSpeed 0.19 from the project's .venv (scripts/setup.sh;
4 processes on gloo started by bench/deepspeed_launch.py, DS_ACCELERATOR=cpu):
DistributedDataParallel, FSDP2 (`fully_shard` on each transformer block and on the root, on a
CPU device mesh) and DeepSpeed's ZeRO stages 1, 2 and 3 (its default buckets, fp32, its own
AdamW: on the cpu accelerator its FusedAdam op, which DeepSpeed JIT-builds on first use into
~/.cache/torch_extensions as it does its shared-memory comm op); and beside Debian's torch 1.13
DDP and ZeroRedundancyOptimizer (torch.multiprocessing, as FACTS.md says). All run the same
model, batch and optimizer: a GPT with d_model 512, 6 layers, 8 heads, seq 128, vocab 1024
(19.5M parameters; the .venv rows build test/models/make_models.py's GPT with the seed of the
TorchScript export that ds and 1.13 load: the same weights), global batch 16 (4 per rank),
AdamW with lr 1e-4 and ds's default weight decay 0, one thread per rank; ds in fp32 and in
bf16 (DeepSpeed's bf16 section: 16-bit parameters, activations, gradients and communication,
fp32 masters and moments); the others in fp32. LibTorch 1.13 gets OpenBLAS
(bench/train_gpt.py). A row that cannot run prints why instead.

ds reports its device arena's peak (what the compiler's plan predicts exactly) and the model
state it allocates (parameters + gradients + optimizer state); the others report the process's
peak RSS, so the RSS of ds-run is printed too. Their model state: for the .venv rows, measured
at the end of the last backward, the distinct storages holding this rank's parameters (FSDP2:
its shard; ZeRO-3: its partition and the persistent small parameters), gradients, fp32 master
copies and optimizer moments, not DeepSpeed's gradient buckets; for 1.13, parameters +
gradients + this rank's optimizer state. Each column is the largest over the ranks; the last
is the step time over PyTorch 2.x DDP's.

usage: /usr/bin/python3 bench/zero_gpt.py [--steps 7] [--build build] [--only-torch]
                                          [--no-torch113]
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
ROOT = os.path.join(HERE, '..')
sys.path.insert(0, HERE)
from deepspeed_launch import WARM, run_ds_commands, run_workers  # noqa: E402
from train_gpt import OPENBLAS_DIR, ensure_openblas, export  # noqa: E402

RANKS, BATCH, SEQ, VOCAB = 4, 16, 128, 1024
MPIRUN = ['mpirun', '--allow-run-as-root', '--oversubscribe', '-np', str(RANKS)]

# One rank of a .venv row: kind is ddp, fsdp2, zero1, zero2 or zero3. Writes OUT.RANK.json with
# its step times, peak RSS and model state (what deepspeed_launch.run_workers reads).
VENV_WORKER = r'''
import json, os, resource, sys, time, traceback
from datetime import timedelta

def last_words(kind, e, tb):  # the reason run_workers reports: the output's last line
    traceback.print_exception(kind, e, tb)
    sys.stderr.flush()
    print("%%s: %%s" %% (kind.__name__, " ".join(str(e).split())), flush=True)
import numpy as np
import torch
import torch.distributed as dist
sys.path.insert(0, sys.argv[1])
from make_models import GPT, GPTConfig
kind, steps, out = sys.argv[2], int(sys.argv[3]), sys.argv[4]
idx, tgt = np.load(sys.argv[5]), np.load(sys.argv[6])
RANKS, BATCH, SEQ, VOCAB = %d, %d, %d, %d
rank, mb = int(os.environ["RANK"]), BATCH // RANKS
timeout = timedelta(seconds=600)  # a rank that fails ends the others' collectives
torch.set_num_threads(1)
if kind.startswith("zero"):
    import deepspeed
    deepspeed.init_distributed(dist_backend="gloo", timeout=timeout)
else:
    dist.init_process_group("gloo", timeout=timeout)
sys.excepthook = last_words  # after torch.distributed's own
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # before the model
torch.manual_seed(0)  # bench/train_gpt.py's export: the same initial weights
model = GPT(GPTConfig(vocab_size=VOCAB, block_size=SEQ, n_layer=6, n_head=8, n_embd=512)).train()
if kind.startswith("zero"):
    config = {"train_batch_size": BATCH, "train_micro_batch_size_per_gpu": mb,
              "gradient_accumulation_steps": 1,
              # DeepSpeed's own AdamW: on the cpu accelerator its FusedAdam op, which it
              # JIT-builds on first use (~/.cache/torch_extensions); not torch_adam.
              "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "weight_decay": 0.0}},
              "zero_optimization": {"stage": int(kind[-1])}, "steps_per_print": 1000}
    engine, opt, _, _ = deepspeed.initialize(model=model, config=config,
                                             model_parameters=model.parameters())
    def forward_backward(x, y):
        engine.backward(engine(x, y)[1])
    def update():
        engine.step()
else:
    if kind == "ddp":
        from torch.nn.parallel import DistributedDataParallel
        net = DistributedDataParallel(model)
    else:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        mesh = init_device_mesh("cpu", (RANKS,))
        for block in model.transformer.h:
            fully_shard(block, mesh=mesh)
        net = fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    def forward_backward(x, y):
        net(x, y)[1].backward()
    def update():
        opt.step()
        opt.zero_grad()
params = list(model.parameters())  # after wrapping: FSDP2's are DTensors

def state_bytes():
    """Bytes of the distinct storages of this rank's parameters, gradients, fp32 masters and
    optimizer state: the parameters' (ZeRO-3: the partition; FSDP2: the local shard) and
    their gradients, and every tensor the optimizer holds but the parameters themselves and
    DeepSpeed's gradient buckets (reduce_bucket_size elements, allocated, mostly untouched)."""
    found = {}
    def add(t):
        if t is None:
            return
        if hasattr(t, "to_local"):  # DTensor
            t = t.to_local()
        if t.device.type == "meta":  # ZeRO-1/2's shape records hold no memory
            return
        s = t.untyped_storage()
        if s.nbytes():
            found[s.data_ptr()] = s.nbytes()
    for p in params:
        part = getattr(p, "ds_tensor", None)
        add(part if part is not None and not getattr(p, "ds_persist", False) else p)
        add(p.grad)
    skip, seen, todo = {id(p) for p in params}, set(), [opt]
    while todo:
        o = todo.pop()
        if torch.is_tensor(o):
            if id(o) not in skip:
                add(o)
        elif id(o) in seen or isinstance(o, (torch.nn.Module, str, bytes)):
            continue
        elif isinstance(o, dict):
            seen.add(id(o))
            todo.extend(o.values())
        elif isinstance(o, (list, tuple, set)):
            seen.add(id(o))
            todo.extend(o)
        elif isinstance(o, torch.optim.Optimizer) or type(o).__module__.startswith("deepspeed"):
            seen.add(id(o))
            todo.extend(v for k, v in vars(o).items() if k != "ipg_buckets")
    return sum(found.values())

times, state = [], 0
for s in range(steps):
    lo = s * BATCH + rank * mb
    x, y = torch.from_numpy(idx[lo:lo + mb]), torch.from_numpy(tgt[lo:lo + mb])
    t0 = time.time()
    forward_backward(x, y)
    t1 = time.time()
    if s == steps - 1:
        state = state_bytes()
    t2 = time.time()
    update()
    times.append((t1 - t0 + time.time() - t2) * 1000)
json.dump({"ms": times, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
           "rss0": rss0, "state": state}, open("%%s.%%d.json" %% (out, rank), "w"))
dist.destroy_process_group()
''' % (RANKS, BATCH, SEQ, VOCAB)


def torch_worker(rank, kind, pt, idx, tgt, steps, out):
    """One rank of Debian's PyTorch 1.13 DDP (kind 'ddp') or DDP + ZeroRedundancyOptimizer
    ('zero')."""
    import torch.distributed as dist
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT='29533')
    dist.init_process_group('gloo', rank=rank, world_size=RANKS)
    model = DDP(torch.jit.load(pt).train())
    if kind == 'zero':
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW,
                                      lr=1e-4, weight_decay=0.0)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
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


def run_torch113(kind, pt, idx, tgt, steps, work):
    """(median step ms over steps WARM+1.., model state, peak RSS), the largest over the ranks."""
    import torch.multiprocessing as mp
    out = os.path.join(work, kind)
    blas = os.environ.get('LD_LIBRARY_PATH')
    os.environ['LD_LIBRARY_PATH'] = OPENBLAS_DIR  # for the spawned ranks' libblas.so.3
    try:
        mp.spawn(torch_worker, args=(kind, pt, idx, tgt, steps, out), nprocs=RANKS, join=True)
    finally:
        if blas is None:
            del os.environ['LD_LIBRARY_PATH']
        else:
            os.environ['LD_LIBRARY_PATH'] = blas
    ranks = [json.load(open('%s.%d.json' % (out, r))) for r in range(RANKS)]
    ms = statistics.median(max(r['ms'][s] for r in ranks) for s in range(WARM, steps))
    return ms, max(r['state'] for r in ranks), max(r['rss'] for r in ranks)


def run_venv(kind, w, steps, port):
    """A .venv row: (median step ms over steps WARM+1.., model state, peak RSS, peak RSS before the
    model was built), the largest over the ranks, or why it did not run."""
    out = w('venv-' + kind)
    got = run_workers(VENV_WORKER, w('zero_worker.py'),
                      [os.path.join(ROOT, 'test', 'models'), kind, str(steps), out,
                       w('idx.npy'), w('targets.npy')], out, RANKS, port, steps,
                      needs='deepspeed' if kind.startswith('zero') else 'torch', warm=WARM)
    if isinstance(got, str):
        return got
    ranks = [json.load(open('%s.%d.json' % (out, r))) for r in range(RANKS)]
    return got[0], max(r['state'] for r in ranks), got[1], max(r['rss0'] for r in ranks)


def venv_versions():
    """The .venv's torch and deepspeed versions, for the rows' names ('2.x', '0.19' if absent)."""
    py = os.path.join(ROOT, '.venv', 'bin', 'python')
    got = ['2.x', '0.19']
    for i, pkg in enumerate(('torch', 'deepspeed')):
        try:
            r = subprocess.run([py, '-c', 'import importlib.metadata as m; print(m.version(%r))'
                                % pkg], capture_output=True, text=True)
        except OSError:
            continue
        if r.returncode == 0:
            got[i] = r.stdout.strip()
    return '.'.join(got[0].split('+')[0].split('.')[:2]), got[1]


def run_ds(b, w, precision, stage, steps):
    """One ds row: (median step ms over steps WARM+1.., model state, device arena peak, host peak),
    the largest over the ranks, or why it did not run."""
    mb = BATCH // RANKS
    # Stage 3 with DeepSpeed's defaults keeps this model gathered from the start of forward to
    # the end of backward (one 5e8-element bucket, prefetch 5e7, reuse distance 1e9); "3 lean"
    # trades communication for memory: 2e6-element buckets, prefetch of one, no reuse.
    lean = {'reduce_bucket_size': 2000000, 'stage3_prefetch_bucket_size': 2000000,
            'stage3_max_reuse_distance': 0}
    zero = dict({'stage': 3}, **lean) if stage == '3 lean' else {'stage': stage}
    cfg = {'train_batch_size': BATCH, 'train_micro_batch_size_per_gpu': mb,
           'gradient_accumulation_steps': 1,
           'optimizer': {'type': 'AdamW', 'params': {'lr': 1e-4}},
           'zero_optimization': zero, 'steps_per_print': 1000}
    if precision == 'bf16':
        cfg['bf16'] = {'enabled': True}
    tag = '%s%s' % (precision, str(stage).replace(' ', ''))
    json.dump(cfg, open(w('cfg%s.json' % tag), 'w'))
    log = w('ds%s.jsonl' % tag)
    failed = run_ds_commands([
        [b('ds-opt'), w('gpt.pt'), '--input', 'idx=tensor<%dx%dxi64>' % (mb, SEQ), '--input',
         'targets=tensor<%dx%dxi64>' % (mb, SEQ), '--config', w('cfg%s.json' % tag), '-o',
         w('step%s.mlir' % tag)],
        MPIRUN + [b('ds-run'), w('step%s.mlir' % tag), '--data', 'idx=' + w('idx.npy'),
                  '--data', 'targets=' + w('targets.npy'), '--steps', str(steps), '--threads',
                  '1', '--log', log]])
    if failed:
        return failed
    lines = [json.loads(l) for l in open(log)]
    last = lines[-1]['ranks']
    return (statistics.median(l['step_ms'] for l in lines[WARM:]),
            max(r['model_state_bytes'] for r in last), max(r['device_peak_bytes'] for r in last),
            max(r['host_peak_bytes'] for r in last))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--steps', type=int, default=7)
    ap.add_argument('--build', default=os.path.join(HERE, '..', 'build'))
    ap.add_argument('--only-torch', action='store_true',
                    help='only the PyTorch and DeepSpeed rows (no ds build needed)')
    ap.add_argument('--no-torch113', action='store_true',
                    help="without Debian's torch 1.13 rows")
    args = ap.parse_args()
    if args.steps < WARM + 1:
        ap.error('--steps must be at least %d (the median is over steps %d..N)' % (WARM + 1,
                                                                                   WARM + 1))
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
    tv, dv = venv_versions()
    ddp = 'PyTorch %s DDP (gloo)' % tv
    zero3 = 'DeepSpeed %s ZeRO-3' % dv

    print('GPT d512 x 6 layers, seq %d, global batch %d (%d per rank), %.1fM parameters, '
          'AdamW, %d ranks x 1 thread, median of steps %d..%d' % (SEQ, BATCH, mb, n / 1e6,
                                                                 RANKS, WARM + 1, args.steps))
    rows = {}  # name: (step ms, model state, ds's arena peak or None, peak RSS) or why not
    base_rss = []  # the .venv rows' RSS before the model: the interpreter and its libraries
    if not args.only_torch:
        for precision, stage in [(p, s) for p in ('fp32', 'bf16') for s in (0, 1, 2, 3, '3 lean')]:
            got = run_ds(b, w, precision, stage, args.steps)
            rows['ds %s ZeRO stage %s' % (precision, stage)] = got
    for i, (kind, name) in enumerate((('ddp', ddp), ('fsdp2', 'PyTorch %s FSDP2 fully_shard' % tv),
                                      ('zero1', 'DeepSpeed %s ZeRO-1' % dv),
                                      ('zero2', 'DeepSpeed %s ZeRO-2' % dv), ('zero3', zero3))):
        got = run_venv(kind, w, args.steps, 29571 + i)
        rows[name] = got if isinstance(got, str) else (got[0], got[1], None, got[2])
        if not isinstance(got, str):
            base_rss.append(got[3])
    if not args.no_torch113:
        for kind, name in (('ddp', 'PyTorch 1.13 DDP (gloo, Debian)'),
                           ('zero', 'PyTorch 1.13 DDP + ZeroRedundancyOpt')):
            try:
                ms, state, rss = run_torch113(kind, w('gpt.pt'), idx, tgt, args.steps, work)
                rows[name] = (ms, state, None, rss)
            except Exception as e:  # noqa: BLE001 - a failed row prints why
                rows[name] = 'failed: %s' % ' '.join(str(e).split())[-160:]

    ok = lambda name: isinstance(rows.get(name), tuple)
    base = rows[ddp][0] if ok(ddp) else None
    print('%-38s %10s %16s %14s %14s   %s' % ('run', 'step ms', 'model state MiB', 'peak MiB',
                                             'RSS MiB', 'x %s time' % ddp.rsplit(' (', 1)[0]))
    for name, row in rows.items():
        if isinstance(row, str):
            print('%-38s not run: %s' % (name, row))
            continue
        ms, state, peak, rss = row
        print('%-38s %10.0f %16.1f %14s %14.0f   %s' % (
            name, ms, state / 2**20, '%.1f' % (peak / 2**20) if peak else '-', rss / 2**20,
            '%.2fx' % (ms / base) if base else '-'))
    if base_rss:
        print('(the .venv rows\' RSS holds %.0f-%.0f MiB before the model is built: Python, torch '
              '%s, gloo and, for DeepSpeed, deepspeed)' % (min(base_rss) / 2**20,
                                                         max(base_rss) / 2**20, tv))
    ratio = lambda a, c: '%.2fx' % (rows[a][0] / rows[c][0]) if ok(a) and ok(c) else 'n/a'
    for name in ('3', '3 lean'):
        ds3 = 'ds fp32 ZeRO stage %s' % name
        if not ok(ds3):
            continue
        print('ds stage %s / ds stage 0 step time (fp32): %s (goal <= 1.15x); / %s: %s '
              '(goal < 1); / %s: %s; model state %.1f MiB, %s' % (
                  name, ratio(ds3, 'ds fp32 ZeRO stage 0'), ddp.rsplit(' (', 1)[0],
                  ratio(ds3, ddp), zero3, ratio(ds3, zero3), rows[ds3][1] / 2**20,
                  "ZeRO-3's %.1f MiB" % (rows[zero3][1] / 2**20) if ok(zero3) else
                  "ZeRO-3's n/a"))
    bf16 = [rows[k][0] for k in ('ds bf16 ZeRO stage %d' % s for s in range(4)) if ok(k)]
    if bf16 and base:
        print('ds bf16 (best stage) / %s fp32 step time: %.2fx (goal <= 0.2x: needs bf16 '
              'matrix units; this CPU: %s)' % (ddp.rsplit(' (', 1)[0], min(bf16) / base,
                                               bf16_products(b('ds-report'))))


def bf16_products(ds_report):
    """How ds runs bf16 products on this CPU, in ds-report's words."""
    out = subprocess.run([ds_report], capture_output=True, text=True).stdout
    return ([p.strip() for p in out.split(';') if 'products' in p] or ['?'])[0]

if __name__ == '__main__':
    main()

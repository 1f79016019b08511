#!/usr/bin/env python3
"""Step time and memory of ds-run beside PyTorch 2.x eager (the project's .venv, as users run
it: the nn.Module, torch.optim.AdamW) and ds-reference (LibTorch eager in C++), side by side in
one run: a GPT with d_model 512, 6 layers, 8 heads, seq 128, vocab 1024, global batch 16 (one
micro-batch), fp32 AdamW, at 1 and 2 threads, with both GELU forms (exact erf, and tanh as
GPT-2's gelu_new), and ds in bf16. Then the wall time of an 8-step run of an ~11M-parameter
GPT (d_model 384) including import and JIT compilation, and where ds-run's kernel time goes.

usage: .venv/bin/python bench/train_gpt.py [--steps 8] [--build build] [--threads 1,2]
                                           [--gelu erf,tanh]
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
sys.path.insert(0, os.path.join(HERE, '..', 'test', 'models'))
from make_models import GPT, GPTConfig  # noqa: E402


# Debian's torch links libblas.so.3, which is the slow reference BLAS unless OpenBLAS is
# installed; the comparison gives LibTorch OpenBLAS (installed here if missing).
OPENBLAS_DIR = '/usr/lib/x86_64-linux-gnu/openblas-openmp'


def ensure_openblas():
    if os.path.exists(os.path.join(OPENBLAS_DIR, 'libblas.so.3')):
        return
    sudo = [] if os.geteuid() == 0 else ['sudo']
    subprocess.run(sudo + ['apt-get', 'install', '-y', '-qq', 'libopenblas0-openmp'], check=True,
                   env=dict(os.environ, DEBIAN_FRONTEND='noninteractive'))


def export(path, n_embd, n_layer, n_head, vocab=1024, block=128):
    torch.manual_seed(0)
    m = GPT(GPTConfig(vocab_size=vocab, block_size=block, n_layer=n_layer, n_head=n_head,
                      n_embd=n_embd)).train()
    torch.jit.save(torch.jit.script(m), path)
    return sum(p.numel() for p in m.parameters())


def torch_eager(args):
    """One PyTorch eager run (a subprocess of this script): prints its step times and RSS."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    n_embd, n_layer, n_head = args.shape
    m = GPT(GPTConfig(vocab_size=1024, block_size=128, n_layer=n_layer, n_head=n_head,
                      n_embd=n_embd, gelu=args.gelu_form)).train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    idx, tgt = np.load(args.idx), np.load(args.targets)
    batch = 16
    times = []
    for s in range(args.steps):
        x = torch.from_numpy(idx[s * batch:(s + 1) * batch])
        y = torch.from_numpy(tgt[s * batch:(s + 1) * batch])
        t0 = time.perf_counter()
        out = m(x, y)
        loss = out[1] if isinstance(out, tuple) else out
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({'ms': times, 'rss': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                      * 1024, 'loss': float(loss)}))


def main():
    ap = argparse.ArgumentParser()
    # PyTorch eager speeds up over its first 4-5 steps (its allocator's cache, oneDNN's
    # primitive cache): 2173, 2026, 1919, 1702, 1699 ms at 2 threads in one run. The median of
    # steps 2..8 is its settled time; of steps 2..5 it would be ~15% slower than that.
    ap.add_argument('--steps', type=int, default=8)
    ap.add_argument('--build', default=os.path.join(HERE, '..', 'build'))
    ap.add_argument('--threads', default='1,2')
    ap.add_argument('--gelu', default='erf,tanh')
    ap.add_argument('--torch-worker', action='store_true', help=argparse.SUPPRESS)
    ap.add_argument('--gelu-form', default='none', help=argparse.SUPPRESS)
    ap.add_argument('--shape', type=int, nargs=3, help=argparse.SUPPRESS)
    ap.add_argument('--idx', help=argparse.SUPPRESS)
    ap.add_argument('--targets', help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_worker:
        args.threads = int(args.threads)
        return torch_eager(args)
    b = lambda t: os.path.join(args.build, 'bin', t)
    work = tempfile.mkdtemp(prefix='ds-bench-')
    w = lambda f: os.path.join(work, f)

    batch, seq, vocab = 16, 128, 1024
    rng = np.random.RandomState(0)
    toks = rng.randint(0, vocab, size=(args.steps * batch, seq)).astype(np.int64)
    np.save(w('idx.npy'), toks)
    np.save(w('targets.npy'), np.roll(toks, -1, axis=1))
    inputs = ['--input', 'idx=tensor<%dx%dxi64>' % (batch, seq),
              '--input', 'targets=tensor<%dx%dxi64>' % (batch, seq)]
    data = ['--data', 'idx=' + w('idx.npy'), '--data', 'targets=' + w('targets.npy'),
            '--steps', str(args.steps)]

    def ds_config(path, bf16=False):
        cfg = {'train_batch_size': batch, 'train_micro_batch_size_per_gpu': batch,
               'optimizer': {'type': 'AdamW', 'params': {'lr': 1e-4}}, 'steps_per_print': 1000}
        if bf16:
            cfg['bf16'] = {'enabled': True}
        json.dump(cfg, open(path, 'w'))

    ds_config(w('cfg.json'))
    ds_config(w('cfg-bf16.json'), bf16=True)
    print('GPT d512 x 6 layers, 8 heads, seq %d, batch %d, AdamW, %d steps (median of steps '
          '2..%d); PyTorch %s eager from .venv; RSS = the process\'s peak resident memory'
          % (seq, batch, args.steps, args.steps, torch.__version__))
    print('%-5s %-8s %-22s %10s %10s %14s %16s' % ('gelu', 'threads', 'run', 'step ms', 'RSS MiB',
                                                   'arena MiB', 'ds / PyTorch 2.x'))
    summary = []
    for form in args.gelu.split(','):
        approximate = 'tanh' if form == 'tanh' else 'none'
        torch.manual_seed(0)
        m = GPT(GPTConfig(vocab_size=vocab, block_size=seq, n_layer=6, n_head=8, n_embd=512,
                          gelu=approximate)).train()
        torch.jit.save(torch.jit.script(m), w('gpt-%s.pt' % form))
        for tag, cfg in (('fp32', 'cfg.json'), ('bf16', 'cfg-bf16.json')):
            subprocess.run([b('ds-opt'), w('gpt-%s.pt' % form)] + inputs +
                           ['--config', w(cfg), '-o', w('step-%s-%s.mlir' % (form, tag))],
                           check=True)
        for threads in [int(t) for t in args.threads.split(',')]:
            rows = {}
            for run in ('ds-run fp32', 'ds-run bf16', 'ds-reference (LibTorch)', 'PyTorch eager'):
                log = w('log-%s-%d-%s.jsonl' % (form, threads, run.split()[0] + run.split()[-1]))
                if run.startswith('ds-run'):
                    tag = run.split()[1]
                    subprocess.run([b('ds-run'), w('step-%s-%s.mlir' % (form, tag))] + data +
                                   ['--threads', str(threads), '--log', log], check=True,
                                   stdout=subprocess.DEVNULL)
                elif run.startswith('ds-reference'):
                    subprocess.run([b('ds-reference'), w('gpt-%s.pt' % form), '--config',
                                    w('cfg.json')] + data + ['--threads', str(threads), '--log',
                                                             log],
                                   check=True, stdout=subprocess.DEVNULL)
                else:
                    out = subprocess.run(
                        [sys.executable, os.path.abspath(__file__), '--torch-worker',
                         '--threads', str(threads), '--steps', str(args.steps), '--gelu-form',
                         approximate, '--shape', '512', '6', '8', '--idx', w('idx.npy'),
                         '--targets', w('targets.npy')],
                        check=True, capture_output=True, text=True).stdout
                    r = json.loads(out.strip().splitlines()[-1])
                    rows[run] = (statistics.median(r['ms'][1:]), r['rss'], None)
                    continue
                lines = [json.loads(l) for l in open(log)]
                rows[run] = (statistics.median(l['step_ms'] for l in lines[1:]),
                             lines[-1]['host_peak_bytes'], lines[-1].get('device_peak_bytes'))
            base = rows['PyTorch eager'][0]
            for run, (ms, rss, arena) in rows.items():
                print('%-5s %-8d %-22s %10.0f %10.0f %14s %16s' % (
                    form, threads, run, ms, rss / 2**20,
                    '%.0f' % (arena / 2**20) if arena else '-',
                    '%.2fx' % (ms / base) if run != 'PyTorch eager' else ''))
            summary.append((form, threads, rows['ds-run fp32'][0] / base,
                            rows['ds-run fp32'][1] / rows['PyTorch eager'][1],
                            rows['ds-run bf16'][0] / rows['ds-run fp32'][0]))
    for form, threads, t, mem, bf in summary:
        print('gelu %-4s %d thread(s): ds fp32 / PyTorch 2.x step time %.2fx (goal <= 0.8), '
              'RSS %.2fx (goal <= 1); ds bf16 / ds fp32 %.2fx (goal <= 0.35 with AMX; this CPU: %s)'
              % (form, threads, t, mem, bf, cpu_units()))

    # Where ds-run's step goes (1 thread, the last of 2 steps): its --trace, by kernel and by
    # the ds op (and model line) that made the calls.
    form = args.gelu.split(',')[-1]
    subprocess.run([b('ds-run'), w('step-%s-fp32.mlir' % form)] + data[:-1] +
                   ['2', '--threads', '1', '--trace', w('trace.json')], check=True,
                   stdout=subprocess.DEVNULL)
    events = [e for e in json.load(open(w('trace.json')))['traceEvents'] if e['ph'] == 'X']
    kernels = [e for e in events if e['cat'] == 'kernel']
    step = [e for e in events if e['name'].startswith('step ')][0]['dur'] / 1e3
    by_call, by_site = {}, {}
    for e in kernels:
        by_call[e['args']['call']] = by_call.get(e['args']['call'], 0) + e['dur'] / 1e3
        site = e['args'].get('site', '?')
        by_site[site] = by_site.get(site, 0) + e['dur'] / 1e3
    total = sum(by_call.values())
    gemm = sum(by_call.get(k, 0) for k in ('matmul', 'matmul_view', 'linear', 'linear_grad_weight'))
    top = lambda d: ', '.join('%s %.0f ms' % kv for kv in sorted(d.items(), key=lambda kv: -kv[1])[:6])
    print('ds-run --trace, gelu %s, 1 thread, step 2: %.0f ms, kernels %.0f ms in %d calls, GEMM '
          '%.0f%%; by kernel: %s' % (form, step, total, len(kernels), 100 * gemm / total,
                                     top(by_call)))
    print('  by ds op and model line: %s' % top(by_site))

    # 8 steps of an ~11M-parameter model, end to end (import, autodiff, JIT, train).
    n11 = export(w('gpt11.pt'), 384, 6, 6)
    toks8 = rng.randint(0, vocab, size=(8 * batch, seq)).astype(np.int64)
    np.save(w('idx8.npy'), toks8)
    np.save(w('targets8.npy'), np.roll(toks8, -1, axis=1))
    start = time.time()
    subprocess.run([b('ds-opt'), w('gpt11.pt')] + inputs + ['--config', w('cfg.json'), '-o',
                                                             w('step11.mlir')], check=True)
    t_opt = time.time() - start
    subprocess.run([b('ds-run'), w('step11.mlir'), '--data', 'idx=' + w('idx8.npy'),
                    '--data', 'targets=' + w('targets8.npy'), '--steps', '8', '--log',
                    w('gpt11.jsonl')], check=True, stdout=subprocess.DEVNULL)
    total = time.time() - start
    print('8 steps of a %.1fM-parameter GPT (d384 x 6), default threads: ds-opt %.1f s, '
          'total with JIT and training %.1f s' % (n11 / 1e6, t_opt, total))


def cpu_units():
    flags = open('/proc/cpuinfo').read()
    units = [u for u in ('amx_bf16', 'avx512_bf16', 'avx512_fp16', 'amx_fp16') if u in flags]
    return ' '.join(units) if units else 'no bf16 units'


if __name__ == '__main__':
    main()

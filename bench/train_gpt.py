#!/usr/bin/env python3
"""Step time and memory of ds-run beside PyTorch 2.x eager (the project's .venv, as users run
it: the nn.Module, torch.optim.AdamW) and ds-reference (LibTorch eager in C++), side by side in
one run: a GPT with d_model 512, 6 layers, 8 heads, seq 128, vocab 1024, global batch 16 (one
micro-batch), fp32 AdamW, at 1 and 2 threads, with both GELU forms (exact erf, and tanh as
GPT-2's gelu_new), and ds in bf16. Then the wall time of an 8-step run of an ~11M-parameter
GPT (d_model 384) including import and JIT compilation, and where ds-run's kernel time goes.

Every step time is the median of steps 4..N of one process (N = --steps, 10 by default), and
the ds-run fp32 and PyTorch rows the median of --pairs (3) such processes, run alternately
(one process's settled time moves by up to ~10% from the next on this shared machine).
PyTorch eager settles only from its third step (at 1 thread here: ~5 s, ~6 s, then 2.8-3.5 s;
its allocator's cache, oneDNN's primitive cache), ds-run from its second (the first one JITs).
Each (GELU form, threads) pair also splits the fp32 step into its GEMMs (the products' FLOPs
divided by their time: ds-run's from its --trace of the last step, PyTorch's from its
profiler's aten::mm/addmm/bmm self time in one more step after the timed ones, each beside
that one step's time), which is what bounds the ratio: fp32 GEMM is ~90% of either step.

usage: .venv/bin/python bench/train_gpt.py [--steps 10] [--pairs 3] [--build build]
                                           [--threads 1,2] [--gelu erf,tanh]
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
from trace_spans import kernel_self_us  # noqa: E402


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
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    # One more step under the profiler: the GEMMs' share (after the timed steps, so the
    # profiler's cost is in none of them).
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        out = m(x, y)
        opt.zero_grad(set_to_none=True)
        (out[1] if isinstance(out, tuple) else out).backward()
        opt.step()
        prof_ms = (time.perf_counter() - t0) * 1e3
    gemm_us = sum(e.self_cpu_time_total for e in prof.key_averages()
                  if e.key in ('aten::mm', 'aten::addmm', 'aten::bmm', 'aten::baddbmm'))
    print(json.dumps({'ms': times, 'rss': rss, 'loss': float(loss),
                      'gemm': (gemm_us / 1e3, prof_ms)}))


def main():
    ap = argparse.ArgumentParser()
    # PyTorch eager speeds up over its first 3 steps (its allocator's cache, oneDNN's primitive
    # cache): at 1 thread 5382, 6085, 2794, 2804, 2944, ... ms in one run; the median of steps
    # 2..8 still counted the slow second step's pull.
    ap.add_argument('--steps', type=int, default=10)
    ap.add_argument('--build', default=os.path.join(HERE, '..', 'build'))
    ap.add_argument('--threads', default='1,2')
    ap.add_argument('--pairs', type=int, default=3,
                    help='ds-run fp32 / PyTorch eager processes per row, alternated')
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
    if args.steps < WARM + 1:
        ap.error('--steps must be at least %d (the first %d are warm-up)' % (WARM + 1, WARM))
    if args.pairs < 1:
        ap.error('--pairs must be at least 1')
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
    flops = gemm_flops(512, 6, 8, vocab, batch, seq)
    print('GPT d512 x 6 layers, 8 heads, seq %d, batch %d, AdamW, %d steps (median of steps '
          '%d..%d); PyTorch %s eager from .venv; RSS = the process\'s peak resident memory'
          % (seq, batch, args.steps, WARM + 1, args.steps, torch.__version__))
    print('%-5s %-8s %-22s %10s %10s %14s %16s' % ('gelu', 'threads', 'run', 'step ms', 'RSS MiB',
                                                   'arena MiB', 'ds / PyTorch 2.x'))
    summary, detail = [], []
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
        # What ds-widen-16bit leaves converting between bf16 and f32 (kernel calls per step).
        converts = open(w('step-%s-bf16.mlir' % form)).read().count('= ds.convert ')
        print('gelu %-4s bf16 step: %d ds.convert ops (16-bit <-> f32 conversions)'
              % (form, converts))
        for threads in [int(t) for t in args.threads.split(',')]:
            def ds_run(tag, pair=0):
                """(settled ms, host peak, arena peak) of one ds-run process; fp32 also
                traces its last step (after the timed ones: no cost to them)."""
                log = w('log-%s-%d-%s-%d.jsonl' % (form, threads, tag, pair))
                trace = ['--trace', w('trace-%d.json' % pair)] if tag == 'fp32' else []
                subprocess.run([b('ds-run'), w('step-%s-%s.mlir' % (form, tag))] + data +
                               ['--threads', str(threads), '--log', log] + trace,
                               check=True, stdout=subprocess.DEVNULL)
                lines = [json.loads(l) for l in open(log)]
                return (settled([l['step_ms'] for l in lines]), lines[-1]['host_peak_bytes'],
                        lines[-1].get('device_peak_bytes'))

            def torch_run():
                out = subprocess.run(
                    [sys.executable, os.path.abspath(__file__), '--torch-worker',
                     '--threads', str(threads), '--steps', str(args.steps), '--gelu-form',
                     approximate, '--shape', '512', '6', '8', '--idx', w('idx.npy'),
                     '--targets', w('targets.npy')],
                    check=True, capture_output=True, text=True).stdout
                return json.loads(out.strip().splitlines()[-1])

            # ds-run fp32 and PyTorch alternate, --pairs processes each.
            ds_fp32, eager, gemm = [], [], []
            for pair in range(args.pairs):
                ds_fp32.append(ds_run('fp32', pair))
                r = torch_run()
                eager.append((settled(r['ms']), r['rss'], None))
                gemm.append(trace_gemm_ms(w('trace-%d.json' % pair)) + tuple(r['gemm']))
            rows = {'ds-run fp32': median_row(ds_fp32), 'ds-run bf16': ds_run('bf16')}
            log = w('log-%s-%d-ref.jsonl' % (form, threads))
            subprocess.run([b('ds-reference'), w('gpt-%s.pt' % form), '--config',
                            w('cfg.json')] + data + ['--threads', str(threads), '--log', log],
                           check=True, stdout=subprocess.DEVNULL)
            lines = [json.loads(l) for l in open(log)]
            rows['ds-reference (LibTorch)'] = (settled([l['step_ms'] for l in lines]),
                                               lines[-1]['host_peak_bytes'],
                                               lines[-1].get('device_peak_bytes'))
            rows['PyTorch eager'] = median_row(eager)
            base = rows['PyTorch eager'][0]
            for run, (ms, rss, arena) in rows.items():
                print('%-5s %-8d %-22s %10.0f %10.0f %14s %16s' % (
                    form, threads, run, ms, rss / 2**20,
                    '%.0f' % (arena / 2**20) if arena else '-',
                    '%.2fx' % (ms / base) if run != 'PyTorch eager' else ''))
            pairs = [d[0] / e[0] for d, e in zip(ds_fp32, eager)]
            ds_gemm, ds_step, torch_gemm, torch_step = [statistics.median(c) for c in zip(*gemm)]
            detail.append(
                'gelu %-4s %d thread(s): ds fp32 / PyTorch by pair %s; GEMM %.1f GFLOP/step '
                '(medians of the pairs\' one-step splits): ds-run fp32 %.0f ms (%.0f GFLOP/s) of '
                'a %.0f ms step, PyTorch %.0f ms (%.0f GFLOP/s) of a %.0f ms step'
                % (form, threads, ' '.join('%.2f' % x for x in pairs), flops / 1e9, ds_gemm,
                   flops / ds_gemm / 1e6, ds_step, torch_gemm, flops / torch_gemm / 1e6,
                   torch_step))
            summary.append((form, threads, rows['ds-run fp32'][0] / base,
                            rows['ds-run fp32'][1] / rows['PyTorch eager'][1],
                            rows['ds-run bf16'][0] / rows['ds-run fp32'][0]))
    for form, threads, t, mem, bf in summary:
        print('gelu %-4s %d thread(s): ds fp32 / PyTorch 2.x step time %.2fx (goal <= 0.8), '
              'RSS %.2fx (goal <= 1); ds bf16 / ds fp32 %.2fx (goal <= 0.35 with AMX; this CPU: %s)'
              % (form, threads, t, mem, bf, cpu_units(b('ds-report'))))
    for line in detail:
        print(line)

    # Where ds-run's step goes (1 thread, the last of 2 steps): its --trace, by kernel and by
    # the ds op (and model line) that made the calls.
    form = args.gelu.split(',')[-1]
    subprocess.run([b('ds-run'), w('step-%s-fp32.mlir' % form)] + data[:-1] +
                   ['2', '--threads', '1', '--trace', w('trace.json')], check=True,
                   stdout=subprocess.DEVNULL)
    events = [e for e in json.load(open(w('trace.json')))['traceEvents'] if e['ph'] == 'X']
    kernels = kernel_self_us(events)
    step = [e for e in events if e['name'].startswith('step ')][0]['dur'] / 1e3
    by_call, by_site = {}, {}
    for e, us in kernels:
        by_call[e['args']['call']] = by_call.get(e['args']['call'], 0) + us / 1e3
        site = e['args'].get('site', '?')
        by_site[site] = by_site.get(site, 0) + us / 1e3
    total = sum(by_call.values())
    gemm = sum(by_call.get(k, 0) for k in GEMM_CALLS)
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


WARM = 3  # steps left out of every median


def median_row(rows):
    """One table row from several processes' (ms, peak, arena): the median time, the largest
    peaks."""
    ms, rss, arena = zip(*rows)
    return (statistics.median(ms), max(rss), None if arena[0] is None else max(arena))


def settled(ms):
    """The median step time after the warm-up steps."""
    return statistics.median(ms[WARM:])


def gemm_flops(d, layers, heads, vocab, batch, seq):
    """FLOPs of one training step's products: every linear layer (and the LM head) three
    times (forward, input gradient, weight gradient), attention's six batched products."""
    tokens = batch * seq
    linear = layers * 12 * d * d + d * vocab
    attention = layers * 6 * batch * heads * seq * seq * (d // heads)
    return 2 * 3 * tokens * linear + 2 * attention


def trace_gemm_ms(path):
    """(kernel time of the GEMM calls, their nested calls left out; the step's time) in a
    ds-run --trace of one step."""
    events = [e for e in json.load(open(path))['traceEvents'] if e['ph'] == 'X']
    steps = [e['dur'] for e in events if e['name'].startswith('step ')]
    if len(steps) != 1:
        sys.exit('%s: expected the trace of one step, found %d' % (path, len(steps)))
    return (sum(us for e, us in kernel_self_us(events) if e['args']['call'] in GEMM_CALLS) / 1e3,
            steps[0] / 1e3)


GEMM_CALLS = ('matmul', 'matmul_view', 'linear', 'linear_grad_weight')


def cpu_units(ds_report):
    """The CPU's bf16 units, and how ds runs bf16 products on them (ds-report's words)."""
    flags = open('/proc/cpuinfo').read()
    units = [u for u in ('amx_bf16', 'avx512_bf16', 'avx512_fp16', 'amx_fp16') if u in flags]
    line = subprocess.run([ds_report], capture_output=True, text=True).stdout
    how = [p.strip() for p in line.split(';') if 'products' in p]
    return '%s; %s' % (' '.join(units) if units else 'no bf16 units', how[0] if how else '?')

if __name__ == '__main__':
    main()

#!/usr/bin/python3
"""Step time and peak memory of ds-run against ds-reference (LibTorch eager), side by side in
one run: a GPT with d_model 512, 6 layers, 8 heads, seq 128, vocab 1024, global batch 16
(one micro-batch), fp32 AdamW, at 1 and 2 threads. LibTorch gets its best BLAS here
(OpenBLAS from libopenblas0-openmp, with OPENBLAS_CORETYPE=SkylakeX on AVX-512 CPUs, for
ds-reference only; FACTS.md). Then the wall time of an
8-step run of an ~11M-parameter GPT (d_model 384) including import and JIT compilation.

usage: /usr/bin/python3 bench/train_gpt.py [--steps 5] [--build build]
"""
import argparse
import json
import os
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--steps', type=int, default=5)
    ap.add_argument('--build', default=os.path.join(HERE, '..', 'build'))
    args = ap.parse_args()
    ensure_openblas()
    b = lambda t: os.path.join(args.build, 'bin', t)
    work = tempfile.mkdtemp(prefix='ds-bench-')
    w = lambda f: os.path.join(work, f)

    batch, seq, vocab = 16, 128, 1024
    n = export(w('gpt.pt'), 512, 6, 8)
    rng = np.random.RandomState(0)
    toks = rng.randint(0, vocab, size=(args.steps * batch, seq)).astype(np.int64)
    np.save(w('idx.npy'), toks)
    np.save(w('targets.npy'), np.roll(toks, -1, axis=1))
    json.dump({'train_batch_size': batch, 'train_micro_batch_size_per_gpu': batch,
               'optimizer': {'type': 'AdamW', 'params': {'lr': 1e-4}},
               'steps_per_print': 1000}, open(w('cfg.json'), 'w'))
    inputs = ['--input', 'idx=tensor<%dx%dxi64>' % (batch, seq),
              '--input', 'targets=tensor<%dx%dxi64>' % (batch, seq)]
    subprocess.run([b('ds-opt'), w('gpt.pt')] + inputs + ['--config', w('cfg.json'), '-o',
                                                           w('step.mlir')], check=True)
    data = ['--data', 'idx=' + w('idx.npy'), '--data', 'targets=' + w('targets.npy'),
            '--steps', str(args.steps)]

    print('GPT d512 x 6 layers, 8 heads, seq %d, batch %d: %.1fM parameters, %d steps '
          '(median of steps 2..%d)' % (seq, batch, n / 1e6, args.steps, args.steps))
    print('%-8s %-13s %12s %14s %16s' % ('threads', 'tool', 'step ms', 'peak MiB', 'ds / LibTorch'))
    for threads in (1, 2):
        rows = {}
        for tool in ('ds-run', 'ds-reference'):
            log = w('%s-%d.jsonl' % (tool, threads))
            env = dict(os.environ)
            if tool == 'ds-run':
                cmd = [b('ds-run'), w('step.mlir')]
            else:
                cmd = [b('ds-reference'), w('gpt.pt'), '--config', w('cfg.json')]
                if 'avx512f' in open('/proc/cpuinfo').read():
                    # OpenBLAS 0.3.21 misdetects AVX-512 Xeons (FACTS.md); elsewhere (AVX2
                    # EPYC) its own detection is right and SkylakeX would crash.
                    env['OPENBLAS_CORETYPE'] = 'SkylakeX'
                env['LD_LIBRARY_PATH'] = OPENBLAS_DIR
            subprocess.run(cmd + data + ['--threads', str(threads), '--log', log], check=True,
                           env=env, stdout=subprocess.DEVNULL)
            lines = [json.loads(l) for l in open(log)]
            ms = statistics.median(l['step_ms'] for l in lines[1:])
            # ds: the device arena's peak (what the plan predicts); LibTorch: the process's RSS.
            peak = lines[-1]['device_peak_bytes'] if tool == 'ds-run' else lines[-1]['host_peak_bytes']
            rows[tool] = (ms, peak, lines[-1]['host_peak_bytes'])
        for tool, (ms, peak, host) in rows.items():
            ratio = '%.2fx time' % (ms / rows['ds-reference'][0]) if tool == 'ds-run' else ''
            print('%-8d %-13s %12.0f %14.0f %16s' % (threads, tool, ms, peak / 2**20, ratio))
        print('%-8s %-13s %12s %14.0f %16s' % ('', 'ds-run RSS', '', rows['ds-run'][2] / 2**20,
                                               '%.2fx memory' % (rows['ds-run'][2] /
                                                                 rows['ds-reference'][2])))

    # 8 steps of an ~11M-parameter model, end to end (import, autodiff, JIT, train).
    n11 = export(w('gpt11.pt'), 384, 6, 6)
    start = time.time()
    subprocess.run([b('ds-opt'), w('gpt11.pt')] + inputs + ['--config', w('cfg.json'), '-o',
                                                             w('step11.mlir')], check=True)
    t_opt = time.time() - start
    data8 = [d if d != str(args.steps) else '8' for d in data]
    subprocess.run([b('ds-run'), w('step11.mlir')] + data8[:-2] + ['--steps', '8', '--log',
                                                                   w('gpt11.jsonl')],
                   check=True, stdout=subprocess.DEVNULL) if args.steps >= 8 else None
    if args.steps < 8:
        toks8 = rng.randint(0, vocab, size=(8 * batch, seq)).astype(np.int64)
        np.save(w('idx8.npy'), toks8)
        np.save(w('targets8.npy'), np.roll(toks8, -1, axis=1))
        subprocess.run([b('ds-run'), w('step11.mlir'), '--data', 'idx=' + w('idx8.npy'),
                        '--data', 'targets=' + w('targets8.npy'), '--steps', '8', '--log',
                        w('gpt11.jsonl')], check=True, stdout=subprocess.DEVNULL)
    total = time.time() - start
    # Where ds-run's step time goes (1 thread, 2 steps): the runtime's per-kernel profile.
    prof = subprocess.run([b('ds-run'), w('step.mlir')] + data[:-1] + ['2', '--threads', '1'],
                          env=dict(os.environ, DSRT_PROFILE='1'), capture_output=True, text=True)
    rows = [l.split()[2:] for l in prof.stderr.splitlines() if l.startswith('dsrt profile:')][1:]
    ms = {r[0] if not r[1].startswith('(') else r[0] + ' ' + r[1]: float(r[-2]) for r in rows}
    kernel_ms = sum(ms.values())
    gemm = sum(v for k, v in ms.items() if k in ('matmul', 'linear', 'linear_grad_weight'))
    print('ds-run kernel time, 1 thread, 2 steps: %.0f ms, GEMM (matmul, linear, '
          'linear_grad_weight) %.0f%%; next: %s' % (
              kernel_ms, 100 * gemm / kernel_ms,
              ', '.join('%s %.0f ms' % kv for kv in sorted(ms.items(), key=lambda kv: -kv[1])[3:8])))

    print('8 steps of a %.1fM-parameter GPT (d384 x 6), default threads: ds-opt %.1f s, '
          'total with JIT and training %.1f s' % (n11 / 1e6, t_opt, total))


if __name__ == '__main__':
    main()

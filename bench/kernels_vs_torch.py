#!/usr/bin/env python3
"""Every runtime kernel beside PyTorch 2.x on the same shapes, in one run: dsrt-kernel-bench
(build/bin) times each kernel of the CPU device; this script times PyTorch's eager op (or
the ops that PyTorch's autograd runs for the same gradient) in the project's .venv, at the
same thread count, and prints both with their ratio. Goal (issue 17): no kernel more than
1.5x PyTorch's time.

This machine is shared and its speed moves in bursts: both sides are timed `--rounds` times,
alternating (all of ds, then all of PyTorch), and each side's best median counts.

usage: .venv/bin/python bench/kernels_vs_torch.py [--threads 1] [--filter SUBSTRING]
                                                    [--seconds 0.3] [--rounds 3] [--build build]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
T, D, H, V, B, S, NH, HD = 2048, 512, 2048, 1024, 16, 128, 8, 64
aten = torch.ops.aten


def randn(*shape):
    return torch.rand(*shape) * 4 - 2


def uniform(lo, hi, *shape):
    return torch.rand(*shape) * (hi - lo) + lo


def cases():
    """name -> a function that makes the tensors and returns the call to time."""
    E = (T, H)
    c = {}
    unary = {'neg': torch.neg, 'exp': torch.exp, 'log': torch.log, 'sqrt': torch.sqrt,
             'rsqrt': torch.rsqrt, 'tanh': torch.tanh, 'sigmoid': torch.sigmoid,
             'relu': torch.relu, 'gelu_erf': F.gelu,
             'gelu_tanh': lambda x: F.gelu(x, approximate='tanh'), 'cos': torch.cos,
             'sin': torch.sin}
    for name, f in unary.items():
        def mk(f=f, name=name):
            x = uniform(0.1, 4, *E) if name in ('log', 'sqrt', 'rsqrt') else randn(*E)
            y = torch.empty(E)
            if name in ('gelu_erf', 'gelu_tanh', 'relu'):
                return lambda: f(x)
            return lambda: f(x, out=y)
        c['unary_' + name] = mk
    binary = {'add': torch.add, 'sub': torch.sub, 'mul': torch.mul, 'div': torch.div,
              'pow': torch.pow, 'max': torch.maximum, 'min': torch.minimum}
    for name, f in binary.items():
        def mk(f=f, name=name):
            a = uniform(0.1, 4, *E) if name == 'pow' else randn(*E)
            b = uniform(0.5, 2, *E) if name == 'div' else randn(*E)
            y = torch.empty(E)
            return lambda: f(a, b, out=y)
        c['binary_' + name] = mk
    for name, approx in (('gelu_erf_grad', 'none'), ('gelu_tanh_grad', 'tanh')):
        def mk(approx=approx):
            x, dy = randn(*E), randn(*E)
            return lambda: aten.gelu_backward(dy, x, approximate=approx)
        c['binary_' + name] = mk

    def add_bias():
        a, b, y = randn(*E), randn(H), torch.empty(E)
        return lambda: torch.add(a, b, out=y)
    c['binary_add_bias'] = add_bias

    def mul_scalar():
        a, b, y = randn(*E), torch.tensor(0.5), torch.empty(E)
        return lambda: torch.mul(a, b, out=y)
    c['binary_mul_scalar'] = mul_scalar

    def cmp_gt():
        a, b, y = randn(*E), randn(*E), torch.empty(E, dtype=torch.bool)
        return lambda: torch.gt(a, b, out=y)
    c['cmp_gt'] = cmp_gt

    def where():
        a, cond = randn(B, NH, S, S), randn(S, S) > randn(S, S)
        b = torch.tensor(-1e9)
        return lambda: torch.where(cond, a, b)
    c['where'] = where

    def fill():
        y = torch.empty(E)
        return lambda: y.fill_(0.0)
    c['fill'] = fill

    def copy():
        x, y = randn(*E), torch.empty(E)
        return lambda: y.copy_(x)
    c['copy'] = copy

    def f32_bf16():
        x = randn(*E)
        return lambda: x.to(torch.bfloat16)
    c['convert_f32_bf16'] = f32_bf16

    def bf16_f32():
        x = randn(*E).to(torch.bfloat16)
        return lambda: x.to(torch.float32)
    c['convert_bf16_f32'] = bf16_f32

    def red(f, dim):
        def mk():
            x = randn(*E)
            return lambda: f(x, dim)
        return mk
    c['reduce_sum_last'] = red(torch.sum, -1)
    c['reduce_sum_first'] = red(torch.sum, 0)
    c['reduce_amax_last'] = red(torch.amax, -1)

    def softmax():
        x = randn(B, NH, S, S)
        return lambda: torch.softmax(x, -1)
    c['softmax'] = softmax

    def softmax_grad():
        y, dy = torch.softmax(randn(B, NH, S, S), -1), randn(B, NH, S, S)
        return lambda: aten._softmax_backward_data(dy, y, -1, torch.float32)
    c['softmax_grad'] = softmax_grad

    def attention():  # PyTorch's CPU flash-attention kernel, as F.sdpa runs it
        q, k, v = (randn(1, 8, 8192, 32) for _ in range(3))
        return lambda: aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True,
                                                                       scale=0.125)
    c['attention'] = attention

    def attention_grad():
        q, k, v, dy = (randn(1, 8, 8192, 32) for _ in range(4))
        o, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True, scale=0.125)
        return lambda: aten._scaled_dot_product_flash_attention_for_cpu_backward(
            dy, q, k, v, o, lse, 0.0, True, scale=0.125)
    c['attention_grad'] = attention_grad

    def log_softmax():
        x = randn(T, V)
        return lambda: torch.log_softmax(x, -1)
    c['log_softmax'] = log_softmax

    def layer_norm():
        x, w, b = randn(T, D), randn(D), randn(D)
        return lambda: F.layer_norm(x, (D,), w, b, 1e-5)
    c['layer_norm'] = layer_norm

    def layer_norm_grad(make=randn):
        x, w, b, dy = make(T, D), make(D), make(D), make(T, D)
        _, mean, rstd = aten.native_layer_norm(x, [D], w, b, 1e-5)
        return lambda: aten.native_layer_norm_backward(dy, x, [D], mean, rstd, w, b,
                                                       [True, True, True])
    c['layer_norm_grad'] = layer_norm_grad
    X = (16, 64, 32, 32)

    def batch_norm():
        x, w, b = randn(*X), randn(64), randn(64)
        return lambda: aten.native_batch_norm(x, w, b, None, None, True, 0.1, 1e-5)
    c['batch_norm'] = batch_norm

    def batch_norm_grad():
        x, w, b, dy = randn(*X), randn(64), randn(64), randn(*X)
        _, mean, invstd = aten.native_batch_norm(x, w, b, None, None, True, 0.1, 1e-5)
        return lambda: aten.native_batch_norm_backward(dy, x, w, None, None, mean, invstd, True,
                                                       1e-5, [True, True, True])
    c['batch_norm_grad'] = batch_norm_grad

    def batch_norm_inference():
        x, w, b, m, v = randn(*X), randn(64), randn(64), randn(64), uniform(0.5, 2, 64)
        return lambda: F.batch_norm(x, m, v, w, b, False, 0.1, 1e-5)
    c['batch_norm_inference'] = batch_norm_inference

    def matmul():
        a, b, y = randn(T, D), randn(D, H), torch.empty(E)
        return lambda: torch.matmul(a, b, out=y)
    c['matmul'] = matmul

    def matmul_batched():
        a, b = randn(B * NH, S, HD), randn(B * NH, S, HD)
        return lambda: torch.matmul(a, b.transpose(-1, -2))
    c['matmul_batched'] = matmul_batched

    def linear():
        x, w, b = randn(T, D), randn(H, D), randn(H)
        return lambda: F.linear(x, w, b)
    c['linear'] = linear

    def linear_down():  # the MLP's c_proj: input wider than output
        x, w, b = randn(*E), randn(D, H), randn(D)
        return lambda: F.linear(x, w, b)
    c['linear_down'] = linear_down

    def linear_grad_weight():  # what autograd runs for nn.Linear's weight and bias
        x, dy = randn(T, D), randn(*E)
        return lambda: (dy.t().mm(x), dy.sum(0))
    c['linear_grad_weight'] = linear_grad_weight

    def embedding():
        w, i = randn(V, D), torch.randint(0, V, (B, S))
        return lambda: F.embedding(i, w)
    c['embedding'] = embedding

    def embedding_grad():
        dy, i = randn(B, S, D), torch.randint(0, V, (B, S))
        return lambda: aten.embedding_dense_backward(dy, i, V, -1, False)
    c['embedding_grad'] = embedding_grad

    def cross_entropy():
        x, t = randn(T, V), torch.randint(0, V, (T,))
        return lambda: F.cross_entropy(x, t)
    c['cross_entropy'] = cross_entropy

    def cross_entropy_grad():  # autograd: nll_loss backward, then log_softmax's
        x, t = randn(T, V), torch.randint(0, V, (T,))
        lp = torch.log_softmax(x, -1)
        dy = torch.tensor(1.0)
        w = torch.tensor(float(T))

        def run():
            g = aten.nll_loss_backward(dy, lp, t, None, 1, -100, w)
            return aten._log_softmax_backward_data(g, lp, -1, torch.float32)
        return run
    c['cross_entropy_grad'] = cross_entropy_grad

    def transpose():
        x = randn(B, S, NH, HD)
        return lambda: x.permute(0, 2, 1, 3).contiguous()
    c['transpose'] = transpose

    def broadcast():
        x = randn(D)
        return lambda: x.expand(T, D).contiguous()
    c['broadcast'] = broadcast

    def slice_():
        x = randn(T, 3 * D)
        return lambda: x[:, D:2 * D].contiguous()
    c['slice'] = slice_

    def insert_slice():
        x, y = randn(T, D), torch.empty(T, 3 * D)
        return lambda: y[:, D:2 * D].copy_(x)
    c['insert_slice'] = insert_slice

    def dropout_mask():  # what F.dropout does before its multiply
        y = torch.empty(E)
        return lambda: y.bernoulli_(0.9).div_(0.9)
    c['dropout_mask'] = dropout_mask
    W = (64, 64, 3, 3)

    def conv2d():
        x, w, b = randn(*X), randn(*W), randn(64)
        return lambda: F.conv2d(x, w, b, padding=1)
    c['conv2d'] = conv2d

    def conv_grad(mask):
        def mk():
            x, w, dy = randn(*X), randn(*W), randn(*X)
            return lambda: aten.convolution_backward(dy, x, w, [64], [1, 1], [1, 1], [1, 1],
                                                     False, [0, 0], 1, mask)
        return mk
    c['conv2d_grad_input'] = conv_grad([True, False, False])
    c['conv2d_grad_weight'] = conv_grad([False, True, True])

    def max_pool():
        x = randn(*X)
        return lambda: F.max_pool2d(x, 2, 2)
    c['max_pool2d'] = max_pool

    def max_pool_grad():
        x = randn(*X)
        _, idx = F.max_pool2d(x, 2, 2, return_indices=True)
        dy = randn(16, 64, 16, 16)
        return lambda: aten.max_pool2d_with_indices_backward(dy, x, [2, 2], [2, 2], [0, 0],
                                                             [1, 1], False, idx)
    c['max_pool2d_grad'] = max_pool_grad

    def avg_pool():
        x = randn(*X)
        return lambda: F.avg_pool2d(x, 2, 2)
    c['avg_pool2d'] = avg_pool

    def avg_pool_grad():
        x, dy = randn(*X), randn(16, 64, 16, 16)
        return lambda: aten.avg_pool2d_backward(dy, x, [2, 2], [2, 2], [0, 0], False, True, None)
    c['avg_pool2d_grad'] = avg_pool_grad

    def adaptive():
        x = randn(*X)
        return lambda: F.adaptive_avg_pool2d(x, 1)
    c['adaptive_avg_pool2d'] = adaptive

    def adaptive_grad():
        x, dy = randn(*X), randn(16, 64, 1, 1)
        return lambda: aten._adaptive_avg_pool2d_backward(dy, x)
    c['adaptive_avg_pool2d_grad'] = adaptive_grad

    def adamw():  # PyTorch's fastest CPU AdamW: the fused kernel
        p = torch.nn.Parameter(randn(T * H))
        p.grad = randn(T * H)
        opt = torch.optim.AdamW([p], lr=1e-4, fused=True)
        opt.step()
        return opt.step
    c['adamw_update'] = adamw
    # The bf16 forms (dsrt-kernel-bench's bf16_*): PyTorch's bf16 CPU kernels, which also
    # compute in f32 and round each result.
    bf = torch.bfloat16

    def bf16(*shape):
        return randn(*shape).to(bf)
    c['bf16_add'] = lambda: (lambda a, b: lambda: torch.add(a, b))(bf16(*E), bf16(*E))
    c['bf16_gelu_erf'] = lambda: (lambda x: lambda: F.gelu(x))(bf16(*E))
    c['bf16_gelu_erf_grad'] = lambda: (
        lambda x, dy: lambda: aten.gelu_backward(dy, x, approximate='none'))(bf16(*E), bf16(*E))

    def bf16_where():
        a, cond = bf16(B, NH, S, S), randn(S, S) > randn(S, S)
        b = torch.tensor(-1e9).to(bf)
        return lambda: torch.where(cond, b, a)
    c['bf16_where'] = bf16_where
    c['bf16_softmax'] = lambda: (lambda x: lambda: torch.softmax(x, -1))(bf16(B, NH, S, S))

    def bf16_softmax_grad():
        y, dy = torch.softmax(bf16(B, NH, S, S), -1), bf16(B, NH, S, S)
        return lambda: aten._softmax_backward_data(dy, y, -1, bf)
    c['bf16_softmax_grad'] = bf16_softmax_grad

    def bf16_layer_norm():
        x, w, b = bf16(T, D), bf16(D), bf16(D)
        return lambda: F.layer_norm(x, (D,), w, b, 1e-5)
    c['bf16_layer_norm'] = bf16_layer_norm

    c['bf16_layer_norm_grad'] = lambda: layer_norm_grad(bf16)

    def bf16_linear():
        x, w, b = bf16(T, D), bf16(H, D), bf16(H)
        return lambda: F.linear(x, w, b)
    c['bf16_linear'] = bf16_linear

    def bf16_matmul():
        a, b = bf16(*E), bf16(H, D)
        return lambda: torch.mm(a, b)
    c['bf16_matmul'] = bf16_matmul

    def bf16_linear_grad_weight():
        x, dy = bf16(T, D), bf16(*E)
        return lambda: (dy.t().mm(x), dy.sum(0))
    c['bf16_linear_grad_weight'] = bf16_linear_grad_weight

    def matmul_dx():
        a, b = randn(*E), randn(H, D)
        return lambda: torch.mm(a, b)
    c['matmul_dx'] = matmul_dx
    return c


def time_call(call, seconds):
    call()
    call()
    times = []
    begin = time.perf_counter()
    while len(times) < 5 or (time.perf_counter() - begin < seconds and len(times) < 1000):
        t0 = time.perf_counter()
        call()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--filter', default='')
    ap.add_argument('--seconds', type=float, default=0.3)
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--build', default=os.path.join(HERE, '..', 'build'))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    tool = [os.path.join(args.build, 'bin', 'dsrt-kernel-bench'), '--threads',
            str(args.threads), '--seconds', str(args.seconds)]
    if args.filter:
        tool += ['--filter', args.filter]
    ref = cases()
    ds, best, made = [], {}, {}
    for _ in range(args.rounds):
        out = subprocess.run(tool, check=True, capture_output=True, text=True).stdout
        ds = [l.split('\t') for l in out.splitlines() if l.strip()]
        for name, ms, _ in ds:
            best[name] = min(best.get(name, float('inf')), float(ms))
            if name in ref:
                call = made.setdefault(name, ref[name]())
                best['torch/' + name] = min(best.get('torch/' + name, float('inf')),
                                            time_call(call, args.seconds))
    print('Every dsrt kernel (CPU device) beside PyTorch %s eager, %d thread(s), median ms per '
          'call (the best of %d alternating rounds); goal: ds / torch <= 1.5'
          % (torch.__version__, args.threads, args.rounds))
    print('%-26s %-48s %10s %10s %8s' % ('kernel', 'shape', 'ds ms', 'torch ms', 'ds/torch'))
    slow = []
    for name, _, what in ds:
        ms = best[name]
        if name not in ref:
            print('%-26s %-48s %10.3f %10s %8s' % (name, what, ms, '-', '-'))
            continue
        tms = best['torch/' + name]
        ratio = ms / tms
        flag = '  <-- over 1.5x' if ratio > 1.5 else ''
        if ratio > 1.5:
            slow.append(name)
        print('%-26s %-48s %10.3f %10.3f %8.2f%s' % (name, what[:48], ms, tms, ratio,
                                                    flag))
    missing = sorted(set(ref) - {d[0] for d in ds}) if not args.filter else []
    if missing:
        print('cases PyTorch has and dsrt-kernel-bench does not:', ', '.join(missing))
    print('%d of %d kernels over 1.5x PyTorch: %s' % (len(slow), len(ds), ', '.join(slow) or
                                                     'none'))


if __name__ == '__main__':
    main()

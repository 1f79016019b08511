#!/usr/bin/python3
"""The gradient of every differentiable ds op against LibTorch autograd, on random inputs.

One TorchScript module holds one parameter per op (or per op variant); its loss is the sum of
each op's output weighted by a fixed random tensor, so each parameter's gradient is exactly the
backward of its op. ds (ds-opt --config, ds-run --dump-grads) and ds-reference (autograd) write
the step-1 gradients, which must agree within --rtol relative per parameter.

  op_gradients.py --bin BUILD/bin --work DIR [--kind script|trace]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_compare import read_safetensors  # noqa: E402


def pos(*shape):
    return nn.Parameter(torch.rand(*shape) + 0.5)


def rnd(*shape):
    return nn.Parameter(torch.randn(*shape))


class OpZoo(nn.Module):
    """x: [2, 4] f32, img: [2, 3, 8, 8] f32, idx: [2, 5] i64, y: [2] i64."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.add = rnd(4)
        self.sub = rnd(2, 4)
        self.mul = rnd(1, 4)
        self.div_num = rnd(2, 4)
        self.div_den = pos(4)
        self.pow_base = pos(2, 4)
        self.pow_exp = rnd(4)
        self.pow_scalar = pos(2, 4)
        self.maximum = rnd(2, 4)
        self.minimum = rnd(4)
        self.neg = rnd(2, 4)
        self.exp = rnd(2, 4)
        self.log = pos(2, 4)
        self.sqrt = pos(2, 4)
        self.rsqrt = pos(2, 4)
        self.tanh = rnd(2, 4)
        self.sigmoid = rnd(2, 4)
        self.relu = rnd(2, 4)
        self.gelu = rnd(2, 4)
        self.gelu_tanh = rnd(2, 4)
        self.where = rnd(2, 4)
        self.sum = rnd(2, 3, 4)
        self.mean = rnd(2, 3, 4)
        self.amax = rnd(2, 3, 4)
        self.softmax = rnd(2, 3, 4)
        self.log_softmax = rnd(2, 3, 4)
        self.ln = nn.LayerNorm(4)
        self.ln_in = rnd(2, 3, 4)
        self.bn = nn.BatchNorm2d(3)
        self.matmul_a = rnd(2, 3, 4)
        self.matmul_b = rnd(4, 5)
        self.bmm = rnd(2, 5, 3)
        self.linear = nn.Linear(4, 6)
        self.emb = nn.Embedding(10, 4, padding_idx=0)
        self.ce = nn.Linear(4, 5)
        self.reshape = rnd(2, 3, 4)
        self.transpose = rnd(2, 3, 4)
        self.expand = rnd(1, 3, 1)
        self.slice = rnd(2, 8)
        self.cat_a = rnd(2, 3)
        self.cat_b = rnd(2, 2)
        self.conv = nn.Conv2d(3, 4, 3, stride=2, padding=1)
        self.conv_group = nn.Conv2d(3, 6, 3, padding=2, dilation=2, groups=3, bias=False)
        self.pool_in = rnd(2, 3, 8, 8)
        # Indexing with tensors (aten::index) and gathers of integer and boolean data (HF's
        # masks and token types): the parameters' gradients are the rows read.
        self.index = rnd(10, 3)
        self.index2 = rnd(2, 10, 3)
        self.int_gather = rnd(2, 5)
        self.mask_rows = rnd(2, 5, 4)
        self.mask_pairs = rnd(2, 5)
        # Running sums (aten::cumsum): of a parameter (its gradient the reverse sum) and of a
        # mask's integers (OPT's positions), whose values weigh another.
        self.cumsum = rnd(2, 3, 4)
        self.cumsum_pos = rnd(2, 5)
        # repeat_interleave along a dimension (Llama-style repeat_kv): the gradient sums the
        # repeats.
        self.repeat = rnd(2, 3, 4)
        g = torch.Generator().manual_seed(1)
        self.register_buffer('r4', torch.randn(2, 4, generator=g))
        self.register_buffer('r34', torch.randn(2, 3, 4, generator=g))
        self.register_buffer('r3', torch.randn(2, 4, generator=g))
        self.register_buffer('types', torch.randint(-3, 1 << 20, (2, 10), generator=g))
        self.register_buffer('flags', torch.randint(0, 2, (10, 4), generator=g) > 0)
        self.register_buffer('rows', torch.tensor([[1], [0]]))

    def forward(self, x, img, idx, y):
        r = self.r4
        terms = [
            (x + self.add) * r,
            (x - self.sub) * r,
            (x * self.mul) * r,
            (self.div_num / self.div_den) * r,
            torch.pow(self.pow_base, self.pow_exp) * r,
            torch.pow(self.pow_scalar, 2.5) * r,
            torch.maximum(self.maximum, x) * r,
            torch.minimum(self.minimum, x) * r,
            (-self.neg) * r,
            torch.exp(self.exp) * r,
            torch.log(self.log) * r,
            torch.sqrt(self.sqrt) * r,
            torch.rsqrt(self.rsqrt) * r,
            torch.tanh(self.tanh) * r,
            torch.sigmoid(self.sigmoid) * r,
            F.relu(self.relu) * r,
            F.gelu(self.gelu) * r,
            F.gelu(self.gelu_tanh, approximate='tanh') * r,
            torch.where(x > 0, self.where, self.where * 2.0) * r,
        ]
        loss = terms[0].sum()
        for t in terms[1:]:
            loss = loss + t.sum()
        r34 = self.r34
        loss = loss + (self.sum.sum(1) * r34[:, 0]).sum()
        loss = loss + (self.mean.mean(1, keepdim=True) * r34).sum()
        loss = loss + (self.amax.amax(2) * r34[:, :, 0]).sum()
        loss = loss + (torch.softmax(self.softmax, 2) * r34).sum()
        loss = loss + (torch.log_softmax(self.log_softmax, 1) * r34).sum()
        loss = loss + (self.ln(self.ln_in) * r34).sum()
        loss = loss + (self.bn(img) * img).sum() * 0.01
        loss = loss + (torch.matmul(self.matmul_a, self.matmul_b)).pow(2).sum() * 0.1
        loss = loss + torch.matmul(self.bmm, self.matmul_a).sum()
        loss = loss + (self.linear(x) * self.linear(x)).sum()
        loss = loss + (self.emb(idx) * self.emb(idx)).sum()
        loss = loss + F.cross_entropy(self.ce(x), y, label_smoothing=0.1)
        loss = loss + (self.reshape.reshape(6, 4) * r34.reshape(6, 4)).sum()
        loss = loss + (self.transpose.transpose(0, 2) * r34.transpose(0, 2)).sum()
        loss = loss + (self.expand.expand(2, 3, 4) * r34).sum()
        loss = loss + (self.slice[:, 1:7:2] * r34[:, 0, :3]).sum()
        loss = loss + (torch.cat([self.cat_a, self.cat_b], 1)[:, :4] * r).sum()
        loss = loss + (self.conv(img) * self.conv(img)).sum() * 0.01
        loss = loss + (self.conv_group(img)).pow(2).sum() * 0.01
        loss = loss + (F.max_pool2d(self.pool_in, 3, stride=2, padding=1) *
                       F.max_pool2d(img, 3, stride=2, padding=1)).sum()
        loss = loss + (F.avg_pool2d(self.pool_in, 2) * F.avg_pool2d(img, 2)).sum()
        loss = loss + (F.adaptive_avg_pool2d(self.pool_in, (3, 3)) *
                       F.adaptive_avg_pool2d(img, (3, 3))).sum()
        loss = loss + (self.index[idx] * self.index[idx]).sum()
        loss = loss + (self.index2[:, idx[0], :] * self.r34[:, :, :3].sum()).sum()
        loss = loss + (self.int_gather * torch.gather(self.types, 1, idx).float()).sum() * 1e-6
        loss = loss + (self.mask_rows * self.flags[idx].float()).sum()
        loss = loss + (self.mask_pairs * self.types[self.rows, idx - 10].float()).sum() * 1e-6
        loss = loss + (torch.cumsum(self.cumsum, 1) * self.r34).sum()
        loss = loss + (self.cumsum_pos * torch.cumsum(idx > 4, 1).float()).sum()
        loss = loss + (torch.repeat_interleave(self.repeat, 2, dim=1).pow(2)
                       * torch.arange(24.0).view(1, 6, 4)).sum()
        return loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--work', required=True)
    ap.add_argument('--kind', default='script')
    ap.add_argument('--rtol', type=float, default=1e-5)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    w = lambda f: os.path.join(args.work, f)
    b = lambda t: os.path.join(args.bin, t)

    model = OpZoo().train()
    rng = np.random.RandomState(0)
    data = {'x': rng.randn(2, 4).astype(np.float32),
            'img': rng.randn(2, 3, 8, 8).astype(np.float32),
            'idx': rng.randint(0, 10, size=(2, 5)).astype(np.int64),
            'y': rng.randint(0, 5, size=(2,)).astype(np.int64)}
    if args.kind == 'script':
        m = torch.jit.script(model)
    else:
        m = torch.jit.trace(model, tuple(torch.from_numpy(v) for v in data.values()),
                            check_trace=False)
    pt = w('opzoo.pt')
    torch.jit.save(m, pt)
    flags = []
    for k, v in data.items():
        np.save(w(k + '.npy'), v)
        flags += ['--data', '%s=%s' % (k, w(k + '.npy'))]
    types = {'x': 'tensor<2x4xf32>', 'img': 'tensor<2x3x8x8xf32>', 'idx': 'tensor<2x5xi64>',
             'y': 'tensor<2xi64>'}
    json.dump({'train_batch_size': 2, 'optimizer': {'type': 'AdamW', 'params': {'lr': 1e-4}}},
              open(w('cfg.json'), 'w'))
    for cmd in ([b('ds-opt'), pt] + sum([['--input', '%s=%s' % kv] for kv in types.items()], [])
                + ['--config', w('cfg.json'), '-o', w('step.mlir')],
                [b('ds-run'), w('step.mlir'), '--steps', '1', '--threads', '1',
                 '--dump-grads', w('ds.safetensors')] + flags,
                [b('ds-reference'), pt, '--config', w('cfg.json'), '--steps', '1', '--threads',
                 '1', '--dump-grads', w('ref.safetensors')] + flags):
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode:
            sys.exit('FAILED: %s\n%s' % (' '.join(cmd), r.stderr))

    got = read_safetensors(w('ds.safetensors'))
    ref = read_safetensors(w('ref.safetensors'))
    ok = True
    print('parameter (op)         rel. distance of the gradient')
    for k, g in ref.items():
        if k not in got:
            print('%-22s missing in ds' % k)
            ok = False
            continue
        g = g.astype(np.float64)
        d = np.linalg.norm(got[k].astype(np.float64) - g) / max(np.linalg.norm(g), 1e-30)
        bad = not (d <= args.rtol)
        ok = ok and not bad
        print('%-22s %.2e%s' % (k, d, '  <-- exceeds %g' % args.rtol if bad else ''))
    print('%d gradients (%s) -> %s' % (len(ref), args.kind, 'PASS' if ok else 'FAIL'))
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()

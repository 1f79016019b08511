#!/usr/bin/env python3
"""How far PyTorch disagrees with itself on a BatchNorm model: ResNet-18 (test/models) trained 20
steps with AdamW at lr 1e-5 (micro-batch 8, the fidelity test's settings) in eager PyTorch,
with oneDNN (mkldnn) convolutions on and off (two valid CPU paths of the same PyTorch), and
with a relative noise of --grad-noise added to every gradient element at every step (one run
per seed): what two implementations whose gradients differ by that much (two GEMM libraries'
roundings) drift apart in 20 steps. Prints the worst per-step loss relative difference and the
worst parameter relative distance of each pair: the floor under which ds-vs-PyTorch fidelity
of BatchNorm models cannot be held.

usage: .venv/bin/python bench/bn_spread.py [--steps 20] [--grad-noise 1e-6] [--seeds 5]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, '..', 'test', 'models', 'resnet18_script.pt')


def model():
    """The fidelity test's ResNet-18 archive: test/models' if built there, else made now."""
    if os.path.exists(MODEL):
        return MODEL
    out = tempfile.mkdtemp(prefix='bn-spread-')
    subprocess.run(['/usr/bin/python3', os.path.join(HERE, '..', 'test', 'models', 'make_models.py'),
                    out, 'resnet18'], check=True, stdout=subprocess.DEVNULL)
    return os.path.join(out, 'resnet18_script.pt')


def train(path, mkldnn, x, y, steps, mb, noise=0.0, seed=0):
    torch.backends.mkldnn.enabled = mkldnn
    m = torch.jit.load(path).train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-5, eps=1e-8, weight_decay=0.01)
    gen = torch.Generator().manual_seed(seed)
    losses = []
    for s in range(steps):
        out = m(torch.from_numpy(x[s * mb:(s + 1) * mb]), torch.from_numpy(y[s * mb:(s + 1) * mb]))
        loss = out[-1] if isinstance(out, tuple) else out
        opt.zero_grad()
        loss.backward()
        if noise:
            for p in m.parameters():
                p.grad.mul_(1 + noise * torch.randn(p.grad.shape, generator=gen))
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().clone() for k, v in m.state_dict().items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--steps', type=int, default=20)
    ap.add_argument('--grad-noise', type=float, default=1e-6)
    ap.add_argument('--seeds', type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    mb = 8
    rng = np.random.RandomState(0)  # train_compare.py's data
    x = rng.randn(args.steps * mb, 3, 32, 32).astype(np.float32)
    y = rng.randint(0, 10, size=args.steps * mb).astype(np.int64)
    path = model()
    a, pa = train(path, True, x, y, args.steps, mb)
    b, pb = train(path, False, x, y, args.steps, mb)
    print('ResNet-18, %d steps of AdamW lr 1e-5, micro-batch %d, PyTorch %s against itself'
          % (args.steps, mb, torch.__version__))
    print('%-36s %14s %16s  %s' % ('pair', 'worst loss', 'worst parameter', 'tensor'))
    report('oneDNN convolutions on vs off', a, pa, b, pb)
    for seed in range(args.seeds):
        c, pc = train(path, True, x, y, args.steps, mb, args.grad_noise, seed)
        report('gradients x (1 + %g N(0,1)), seed %d' % (args.grad_noise, seed), c, pc, a, pa)


def report(name, a, pa, b, pb):
    loss = max(abs(p - q) / abs(q) for p, q in zip(a, b))
    rel = {k: ((pa[k] - pb[k]).norm() / pb[k].norm()).item() for k in pa
           if pa[k].is_floating_point() and pb[k].norm() > 0}
    worst = max(rel, key=rel.get)
    print('%-36s %14.2e %16.2e  %s' % (name, loss, rel[worst], worst))


if __name__ == '__main__':
    main()

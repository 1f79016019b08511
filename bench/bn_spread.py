#!/usr/bin/python3
"""How far PyTorch disagrees with itself on a BatchNorm model: ResNet-18 (test/models) trained 20
steps with AdamW at lr 1e-5 (micro-batch 8, the fidelity test's settings) twice in eager
LibTorch, with oneDNN (mkldnn) convolutions on and off: two valid CPU paths of the same PyTorch.
Prints the worst per-step loss relative difference and the worst parameter relative distance,
the floor under which ds-vs-PyTorch fidelity of BatchNorm models cannot be held.

usage: /usr/bin/python3 bench/bn_spread.py [--steps 20]
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
    subprocess.run([sys.executable, os.path.join(HERE, '..', 'test', 'models', 'make_models.py'),
                    out, 'resnet18'], check=True, stdout=subprocess.DEVNULL)
    return os.path.join(out, 'resnet18_script.pt')


def train(path, mkldnn, x, y, steps, mb):
    torch.backends.mkldnn.enabled = mkldnn
    m = torch.jit.load(path).train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-5, eps=1e-8, weight_decay=0.01)
    losses = []
    for s in range(steps):
        out = m(torch.from_numpy(x[s * mb:(s + 1) * mb]), torch.from_numpy(y[s * mb:(s + 1) * mb]))
        loss = out[-1] if isinstance(out, tuple) else out
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().clone() for k, v in m.state_dict().items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--steps', type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(1)
    mb = 8
    rng = np.random.RandomState(0)  # train_compare.py's data
    x = rng.randn(args.steps * mb, 3, 32, 32).astype(np.float32)
    y = rng.randint(0, 10, size=args.steps * mb).astype(np.int64)
    path = model()
    a, pa = train(path, True, x, y, args.steps, mb)
    b, pb = train(path, False, x, y, args.steps, mb)
    loss = max(abs(p - q) / abs(q) for p, q in zip(a, b))
    rel = {k: ((pa[k] - pb[k]).norm() / pb[k].norm()).item() for k in pa
           if pa[k].is_floating_point() and pb[k].norm() > 0}
    worst = max(rel, key=rel.get)
    print('ResNet-18, %d steps of AdamW lr 1e-5, micro-batch %d: PyTorch with oneDNN '
          'convolutions on vs off' % (args.steps, mb))
    print('worst loss rel diff %.2e, worst parameter rel distance %.2e (%s)' %
          (loss, rel[worst], worst))


if __name__ == '__main__':
    main()

#!/usr/bin/env python3
"""The compiler's FLOP count against PyTorch's: `ds-opt --flops-report` on the training step of
a test model (one micro-batch, gradient_accumulation_steps 1) gives the matrix products'
FLOPs of @micro_step (forward and backward), which must equal what PyTorch 2.x's
`torch.utils.flop_counter.FlopCounterMode` counts for the same module's forward and backward
on inputs of the same shapes. Run with the project's PyTorch 2.x (.venv/bin/python).

usage: flops_compare.py --bin BUILD/bin --work DIR --family gpt [--export]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import warnings

import torch
from torch.utils.flop_counter import FlopCounterMode

from torch_loop import load_module  # a TorchScript file in training mode, or a .pt2's module

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, '..', 'models')


def example(spec):
    """An input of an .inputs line: NAME=tensor<AxBxT>."""
    name, t = spec.split('=', 1)
    dims = t[len('tensor<'):-1].split('x')
    shape, dtype = [int(d) for d in dims[:-1]], dims[-1]
    if dtype.startswith('i'):
        return name, torch.randint(0, 2, shape, dtype=torch.int64)  # a valid class or token anywhere
    return name, torch.randn(shape)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--work', required=True)
    ap.add_argument('--family', required=True)
    ap.add_argument('--export', action='store_true',
                    help='a torch.export program of make_models2.py (HF models) instead of a '
                         'committed TorchScript model')
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    if args.export:
        subprocess.run([sys.executable, os.path.join(MODELS, 'make_models2.py'), args.work,
                        '%s:export' % args.family], check=True, stdout=subprocess.DEVNULL)
        pt = os.path.join(args.work, '%s_export.pt2' % args.family)
        inputs_file = os.path.join(args.work, args.family + '.inputs')
    else:
        pt = os.path.join(MODELS, '%s_script.pt' % args.family)
        inputs_file = os.path.join(MODELS, args.family + '.inputs')
    specs = [l.strip() for l in open(inputs_file) if l.strip()]
    batch = int(specs[0].split('<')[1].split('x')[0])
    cfg = os.path.join(args.work, 'cfg.json')
    json.dump({'train_batch_size': batch, 'train_micro_batch_size_per_gpu': batch,
               'gradient_accumulation_steps': 1,
               'optimizer': {'type': 'AdamW', 'params': {'lr': 1e-3}}}, open(cfg, 'w'))
    step = os.path.join(args.work, 'step.mlir')
    cmd = [os.path.join(args.bin, 'ds-opt'), pt, '--config', cfg, '-o', step]
    for s in specs:
        cmd += ['--input', s]
    subprocess.run(cmd, check=True)
    report = subprocess.run([os.path.join(args.bin, 'ds-opt'), step, '--flops-report'],
                            check=True, capture_output=True, text=True).stdout
    print(report, end='')
    row = re.search(r'^micro_step\s+1\s+(\d+)\s+(\d+)\s+(\d+)$', report, re.M)
    ds_flops, ds_matmul = int(row.group(1)), int(row.group(2))

    warnings.filterwarnings('ignore')
    module = load_module(pt)
    inputs = [example(s)[1] for s in specs]
    with FlopCounterMode(display=False) as counter:
        out = module(*inputs)
        loss = out[-1] if isinstance(out, tuple) else out
        forward = counter.get_total_flops()
        loss.backward()
    torch_total = counter.get_total_flops()
    kinds = {str(k): v for k, v in counter.get_flop_counts()['Global'].items()}
    print('PyTorch FlopCounterMode: forward %d, forward and backward %d (%s)' %
          (forward, torch_total, ', '.join('%s %d' % kv for kv in sorted(kinds.items()))))
    ok = ds_matmul == torch_total and ds_flops >= ds_matmul
    print('%s: ds matmul flops per micro-step %d, PyTorch %d, equal: %s; all flops %d -> %s' %
          (args.family, ds_matmul, torch_total, ds_matmul == torch_total, ds_flops,
           'PASS' if ok else 'FAIL'))
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()

#!/usr/bin/python3
"""How far ds is from PyTorch on ResNet-18 (BatchNorm) compared with how far PyTorch is from
itself: 20 AdamW steps at lr 1e-5 trained by ds-run, by ds-reference on OpenBLAS and by
ds-reference on Debian's reference BLAS, for two micro-batch sizes. Prints the worst per-step
relative loss difference of each pair and the step-1 gradient distance.

usage: /usr/bin/python3 bench/resnet_spread.py [--build build] [--steps 20]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'test', 'e2e'))
from train_compare import read_safetensors  # noqa: E402

BLAS = {'OpenBLAS': '/usr/lib/x86_64-linux-gnu/openblas-openmp',
        'reference BLAS': '/usr/lib/x86_64-linux-gnu/blas'}


def losses(path):
    return [json.loads(l)['loss'] for l in open(path)]


def worst(a, b):
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


def grad_distance(a, b):
    ga, gb = read_safetensors(a), read_safetensors(b)
    return max(np.linalg.norm(ga[k].astype(np.float64) - gb[k]) /
               max(np.linalg.norm(gb[k].astype(np.float64)), 1e-30) for k in gb)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--build', default=os.path.join(HERE, '..', 'build'))
    ap.add_argument('--steps', type=int, default=20)
    args = ap.parse_args()
    for d in BLAS.values():
        if not os.path.exists(os.path.join(d, 'libblas.so.3')):
            sys.exit('missing %s (apt-get install libopenblas0-openmp libblas3)' % d)
    binary = os.path.join(args.build, 'bin')
    print('ResNet-18, lr 1e-5, %d steps: worst relative loss difference (step-1 gradient '
          'distance)' % args.steps)
    print('%-6s %-24s %-24s %-24s' % ('mb', 'ds vs torch(OpenBLAS)', 'ds vs torch(ref BLAS)',
                                      'torch vs torch'))
    for mb in (8, 2):
        work = tempfile.mkdtemp(prefix='ds-resnet-spread-')
        # ds-run and ds-reference (system BLAS) on the same data and config.
        subprocess.run(['/usr/bin/python3', os.path.join(HERE, '..', 'test', 'e2e',
                                                         'train_compare.py'),
                        '--family', 'resnet18', '--lr', '1e-5', '--mb', str(mb), '--gas', '1',
                        '--steps', str(args.steps), '--bin', binary, '--work', work],
                       stdout=subprocess.DEVNULL)
        w = lambda f: os.path.join(work, f)
        data = ['--data', 'x=' + w('x.npy'), '--data', 'y=' + w('y.npy')]
        runs = {}
        for name, libdir in BLAS.items():
            tag = name.split()[0]
            model = os.path.join(HERE, '..', 'test', 'models', 'resnet18_script.pt')
            if not os.path.exists(model):  # made by train_compare.py when not committed
                model = w('resnet18_script.pt')
            subprocess.run([os.path.join(binary, 'ds-reference'), model,
                            '--config', w('ds_config.json'), '--steps', str(args.steps),
                            '--threads', '1', '--log', w(tag + '.jsonl'),
                            '--dump-grads', w(tag + '.safetensors')] + data,
                           env=dict(os.environ, LD_LIBRARY_PATH=libdir), check=True,
                           stdout=subprocess.DEVNULL)
            runs[tag] = (losses(w(tag + '.jsonl')), w(tag + '.safetensors'))
        ds = (losses(w('ds.jsonl')), w('ds_grads.safetensors'))
        cell = lambda a, b: '%.1e (%.1e)' % (worst(a[0], b[0]), grad_distance(a[1], b[1]))
        print('%-6d %-24s %-24s %-24s' % (mb, cell(ds, runs['OpenBLAS']),
                                          cell(ds, runs['reference']),
                                          cell(runs['reference'], runs['OpenBLAS'])))


if __name__ == '__main__':
    main()

"""Writes a small learnable token dataset for the example GPT (vocab 64, 16 tokens per sample):
each sample counts upward by a per-sample stride from a random start, mod 64, so the next token
is predictable from the previous two. idx.npy holds the inputs, targets.npy the same shifted by
one. usage: /usr/bin/python3 make_data.py OUTDIR [SAMPLES=1600]"""
import os
import sys

import numpy as np

out = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 1600
rng = np.random.RandomState(0)
start = rng.randint(0, 64, size=(n, 1))
stride = rng.randint(1, 4, size=(n, 1))
seq = (start + stride * np.arange(17)[None, :]) % 64
os.makedirs(out, exist_ok=True)
np.save(os.path.join(out, 'idx.npy'), seq[:, :16].astype(np.int64))
np.save(os.path.join(out, 'targets.npy'), seq[:, 1:].astype(np.int64))

"""Writes a small learnable token file for the example GPT (vocab 64) as nanoGPT writes them:
flat uint16 tokens. Each run of 17 tokens counts upward by a stride from a random start, mod
64, so the next token is predictable from the previous two.
usage: /usr/bin/python3 make_data.py OUT.bin [RUNS=2000]"""
import sys

import numpy as np

out = sys.argv[1]
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
rng = np.random.RandomState(0)
start = rng.randint(0, 64, size=(runs, 1))
stride = rng.randint(1, 4, size=(runs, 1))
seq = (start + stride * np.arange(16)[None, :]) % 64
seq.astype(np.uint16).ravel().tofile(out)

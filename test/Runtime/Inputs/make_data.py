"""Writes small .npy inputs for the MLP (x: [80, 16] f32, y: [80] i64) and bad variants."""
import sys

import numpy as np

prefix = sys.argv[1]
rng = np.random.RandomState(0)
x = rng.randn(80, 16).astype(np.float32)
np.save(prefix + '.x.npy', x)
np.save(prefix + '.y.npy', rng.randint(0, 4, size=(80,)).astype(np.int64))
np.save(prefix + '.x_i64.npy', x.astype(np.int64))
bad = x.copy()
bad[8:16] = np.nan  # the second step's samples
np.save(prefix + '.x_nan.npy', bad)

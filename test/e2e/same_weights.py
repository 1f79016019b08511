#!/usr/bin/python3
"""same_weights.py A.safetensors B.safetensors: exits 0 and prints "identical" when every
tensor of A is in B with the same dtype, shape and bytes (names only in B are ignored)."""
import sys

from train_compare import read_safetensors

a, b = read_safetensors(sys.argv[1]), read_safetensors(sys.argv[2])
bad = [k for k in a if k not in b or a[k].dtype != b[k].dtype or a[k].shape != b[k].shape
       or a[k].tobytes() != b[k].tobytes()]
for k in bad:
    print('differs: %s' % k)
print('%d tensors %s' % (len(a), 'identical' if not bad else 'DIFFERENT'))
sys.exit(1 if bad else 0)

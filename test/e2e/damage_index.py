#!/usr/bin/python3
"""Damages a checkpoint index's first tensor-parallel tensor, as a test of the reader's
refusals: `parts` (a split that does not divide its dimension), `nopart` (the pieces of part 0
only), `short` (part 0's pieces one element short).

usage: damage_index.py CHECKPOINT.json parts|nopart|short"""
import json
import sys

path, how = sys.argv[1], sys.argv[2]
index = json.load(open(path))
t = next(x for x in index['tensors'] if 'split' in x)
if how == 'parts':
    t['split']['parts'] = 3
elif how == 'nopart':
    t['pieces'] = [p for p in t['pieces'] if p[3] == 0]
elif how == 'short':
    t['pieces'] = [[f, s, c - 1 if q == 0 else c, q] for f, s, c, q in t['pieces']]
else:
    sys.exit('unknown damage ' + how)
json.dump(index, open(path, 'w'))

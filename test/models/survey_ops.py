#!/usr/bin/python3
"""Survey the TorchScript node kinds used by each model archive.

Usage: /usr/bin/python3 survey_ops.py OUTDIR [--dump-graph NAME.pt:FILE ...]

For each OUTDIR/*.pt: load it, take a copy of forward's graph, inline all
calls (torch._C._jit_pass_inline), and print the multiset of node kinds,
counting nodes inside nested blocks (prim::If / prim::Loop bodies) too.
"""
import collections
import glob
import os
import sys

import torch


def inlined_graph(path):
    m = torch.jit.load(path)
    g = m.forward.graph if hasattr(m, 'forward') else m.graph
    g = g.copy()
    torch._C._jit_pass_inline(g)
    return g


def count_kinds(block, counter, depth=0, nested=None):
    for n in block.nodes():
        counter[n.kind()] += 1
        if nested is not None and depth > 0:
            nested[n.kind()] += 1
        for b in n.blocks():
            count_kinds(b, counter, depth + 1, nested)


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    outdir = argv[1]
    dumps = {}
    i = 2
    while i < len(argv):
        if argv[i] == '--dump-graph':
            name, out = argv[i + 1].split(':', 1)
            dumps[name] = out
            i += 2
        else:
            print('bad argument %r' % argv[i])
            return 2
    for path in sorted(glob.glob(os.path.join(outdir, '*.pt'))):
        g = inlined_graph(path)
        c = collections.Counter()
        nested = collections.Counter()
        count_kinds(g.block(), c, 0, nested)
        base = os.path.basename(path)
        print('== %s: %d nodes, %d kinds' % (base, sum(c.values()), len(c)))
        for k in sorted(c, key=lambda k: (k.split('::')[0], k)):
            extra = ' (%d inside blocks)' % nested[k] if nested[k] else ''
            print('  %-40s x%d%s' % (k, c[k], extra))
        if base in dumps:
            with open(dumps[base], 'w') as f:
                f.write(str(g))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))

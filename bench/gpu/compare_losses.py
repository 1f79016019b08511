"""Compares ds's log with PyTorch's: each step's loss, relative difference, and a verdict
against the bound (1e-4 relative by default).
usage: compare_losses.py DS.jsonl TORCH.jsonl [BOUND]"""
import json
import sys

ds = [json.loads(x) for x in open(sys.argv[1])]
pt = [json.loads(x) for x in open(sys.argv[2])]
bound = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-4
print('| step | ds loss | PyTorch loss | rel diff |')
print('|---|---|---|---|')
worst = 0.0
for a, b in zip(ds, pt):
    rel = abs(a['loss'] - b['loss']) / max(abs(b['loss']), 1e-30)
    worst = max(worst, rel)
    print('| %d | %.8f | %.8f | %.2e |' % (a['step'], a['loss'], b['loss'], rel))
ok = len(ds) == len(pt) and len(ds) > 0 and worst <= bound
print('%d steps, worst rel diff %.2e, bound %.0e: %s' % (len(ds), worst, bound,
                                                        'MATCH' if ok else 'DIFFER'))
sys.exit(0 if ok else 1)

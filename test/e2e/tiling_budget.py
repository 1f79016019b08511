"""ds-opt --device-memory chooses sequence tiling: a budget that only the tiled MLPs fit.

A one-block language model (embedding, residual MLP 16 -> 64 -> 16, layer norm, LM head,
cross-entropy) exported
with torch.export at 256 tokens: its MLP keeps [256, 64] intermediates whole; "auto" MLP tiles
(ALST's ceil(256 / 16) = 16) keep one tile's. The budget lies between the untiled and the tiled
peaks (--memory-report); ds-opt --device-memory must choose sequence tiling, say how many tiles,
plan within the budget, and train under it (ds-run --device-memory) with the losses of the
untiled step within 1e-6.

usage: tiling_budget.py --bin BUILD/bin --work DIR [--steps 4]
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_compare as tc  # noqa: E402
from recompute import compile_step, report_peak  # noqa: E402

TOKENS, VOCAB, D = 256, 64, 16


class OneBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.up, self.down = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        self.norm, self.head = nn.LayerNorm(D), nn.Linear(D, VOCAB, bias=False)

    def forward(self, idx, targets):
        x = self.emb(idx)
        x = x + self.down(F.gelu(self.up(x)))
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--work', required=True)
    ap.add_argument('--steps', type=int, default=4)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    w = lambda f: os.path.join(args.work, f)
    b = lambda t: os.path.join(args.bin, t)
    torch.manual_seed(0)
    example = (torch.zeros(1, TOKENS, dtype=torch.long), torch.ones(1, TOKENS, dtype=torch.long))
    pt = w('oneblock.pt2')
    torch.export.save(torch.export.export(OneBlock(), example), pt)
    specs = [('idx', 'tensor<1x%dxi64>' % TOKENS), ('targets', 'tensor<1x%dxi64>' % TOKENS)]
    rng = np.random.RandomState(0)
    data = []
    for name, _ in specs:
        path = w(name + '.npy')
        np.save(path, rng.randint(0, VOCAB, size=(args.steps, TOKENS)).astype(np.int64))
        data += ['--data', '%s=%s' % (name, path)]
    inputs = sum([['--input', '%s=%s' % s] for s in specs], [])
    base = {'train_batch_size': 1, 'optimizer': {'type': 'AdamW', 'params': {'lr': 1e-3}},
            'steps_per_print': 1000}

    def compile(name, cfg, extra=()):
        return compile_step(b, w, pt, inputs, name, cfg, extra)

    def train(name, mlir, flags=()):
        log = w(name + '.jsonl')
        tc.run([b('ds-run'), mlir] + data + ['--steps', str(args.steps), '--threads', '1',
                                             '--log', log] + list(flags), w(name + '.log'))
        return [json.loads(l)['loss'] for l in open(log)]

    plain, _ = compile('plain', base)
    tiled, _ = compile('tiled', dict(base, sequence_tiling={'mlp_tiles': 'auto'}))
    plain_peak, tiled_peak = report_peak(b, plain)[0], report_peak(b, tiled)[0]
    print('untiled peak %d, auto-tiled peak %d' % (plain_peak, tiled_peak))
    budget = (plain_peak + tiled_peak) // 2
    fitted, err = compile('fitted', base, ['--device-memory', str(budget)])
    note = next((l for l in err.splitlines() if '--device-memory' in l), err).strip()
    chose = 'chose sequence_tiling auto: ' in note and ' 16 MLP tiles' in note
    peak = report_peak(b, fitted)[0]
    print('--device-memory %d: %s -> %s' % (budget, note.split(': ', 2)[-1],
                                            'PASS' if chose and peak <= budget else 'FAIL'))
    ref = train('plain', plain)
    got = train('fitted', fitted, ['--device-memory', str(budget)])
    worst = max(abs(x - y) / abs(y) for x, y in zip(got, ref))
    print('under the budget: %d steps, worst loss rel diff %.2e against the untiled step '
          '(at most 1e-06) -> %s' % (len(got), worst, 'PASS' if worst <= 1e-6 and
                                     len(got) == args.steps else 'FAIL'))


if __name__ == '__main__':
    main()

